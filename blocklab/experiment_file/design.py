"""The experiment file's [design] and [placement] tables: how runs are ordered, placed,
warmed up and started within the checkpoint cycle.

    [design]
    kind = "abba"            # paired (default), short-runs, abba, aa-control, interleaved
    slice_s = 5              # with "interleaved": seconds per pgbench slice (1..300)
    slices = 12              # with "interleaved": slices per variant per round (even, 2..400)
    warmup = "steady"        # "fixed" (default: the matrix's warmup seconds) or "steady"
    warmup_max_s = 120       # with "steady": the bound of the warm-up
    checkpoint = "aligned"   # "free" (default) or "aligned": CHECKPOINT right before each
                             # measured run and a checkpoint_timeout the run never reaches;
                             # or "cycles": the measured window covers whole checkpoint cycles
    cycles = 2               # with "cycles": how many (1..20, the same for every variant)
    quiesce_max_s = 30       # wait at most this long before each measured run for the
                             # kernel's dirty pages and the storage's I/O to drain
                             # (default 0: off)
    placement = "auto"       # "none" (default), "auto" (driver on its own CPU), or
                             # "explicit" (the [placement] table; implied by the table)
    layout_control = 3       # 3 layout variants of each reference build run as extra
                             # arms (blocklab.experiment_file.layout_control; 0..8, default 0)
    footprint = false        # the compressed footprint of the data volume after each run
                             # (blocklab.probes.footprint): left out, measured where the
                             # data volume is a loop image (ext4, xfs, btrfs); true asks
                             # for it (a loop image is then required); false skips it

    [placement]
    driver_cpus = "1"
    server_cpus = "0"

Parsing is pure; which CPUs the machine has is checked by `check_placement` (plan and
run, through blocklab.experiment_file.check_machine).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from blocklab.errors import UserError
from blocklab.experiment_file.values import (
    boolean,
    check_keys,
    choice,
    fail,
    integer,
    string,
    table,
)
from blocklab.probes import footprint

LOOP_KINDS = footprint.LOOP_KINDS  # the storage kinds whose data volume has a loop image

PAIRED = "paired"
SHORT_RUNS = "short-runs"
ABBA = "abba"
AA_CONTROL = "aa-control"
INTERLEAVED = "interleaved"  # both servers up, short slices alternating (Thue-Morse)
DESIGNS = (PAIRED, SHORT_RUNS, ABBA, AA_CONTROL, INTERLEAVED)
SHORT_FACTOR = 2  # short-runs: runs this many times shorter, this many times more rounds

DESIGN_KEYS = (
    "kind",
    "warmup",
    "warmup_max_s",
    "checkpoint",
    "cycles",
    "quiesce_max_s",
    "placement",
    "footprint",
    "slice_s",
    "slices",
    "layout_control",
)
INTERLEAVED_KEYS = ("slice_s", "slices")
PLACEMENT_KEYS = ("driver_cpus", "server_cpus")
WARMUPS = ("fixed", "steady")
CHECKPOINTS = ("free", "aligned", "cycles")
PLACEMENTS = ("none", "auto", "explicit")
DEFAULT_WARMUP_MAX_S = 120
# The fewest seconds a steady warm-up runs: it judges the last 3 chunks of 5 s
# (blocklab.execution.controls), so a smaller bound would be a promise it does not keep.
MIN_WARMUP_MAX_S = 15
DEFAULT_CYCLES = 2
MAX_CYCLES = 20
DEFAULT_QUIESCE_MAX_S = 0  # off until a bench shows it lowers noise or carry-over (issue 21)
MAX_QUIESCE_S = 600
DEFAULT_SLICE_S = 5
MAX_SLICE_S = 300
DEFAULT_SLICES = 12
MAX_SLICES = 400
MAX_LAYOUT_CONTROL = 8  # layout variants of each reference build
# interleaved: a second storage of the same kind per variant; a block device is one only
INTERLEAVED_STORAGE_KINDS = ("dir", *LOOP_KINDS)
# aligned: the run never reaches this checkpoint_timeout (PostgreSQL's maximum, 1 day)
ALIGNED_CHECKPOINT_TIMEOUT = "1d"


class RunDesign(BaseModel):
    """What the experiment asks of the order and the conditions of its runs."""

    model_config = ConfigDict(frozen=True)

    kind: str = PAIRED
    warmup: str = "fixed"
    warmup_max_s: int = DEFAULT_WARMUP_MAX_S
    checkpoint: str = "free"
    cycles: int = DEFAULT_CYCLES  # with checkpoint "cycles": whole cycles per measured run
    quiesce_max_s: int = DEFAULT_QUIESCE_MAX_S
    placement: str = "none"
    driver_cpus: str | None = None
    server_cpus: str | None = None
    footprint: bool | None = None  # None: where the data volume is a loop image
    slice_s: int = DEFAULT_SLICE_S  # interleaved: seconds per pgbench slice
    slices: int = DEFAULT_SLICES  # interleaved: slices per variant per round
    layout_control: int = 0  # layout variants of each reference build, run as extra arms

    def is_default(self) -> bool:
        return self == RunDesign()

    def to_json(self) -> dict[str, Any]:
        """The design as stored; keys added later are left out at their defaults, so the
        JSON of an experiment written before them does not change."""
        out = self.model_dump(mode="json")
        if self.checkpoint != "cycles":
            out.pop("cycles")
        if self.quiesce_max_s == DEFAULT_QUIESCE_MAX_S:
            out.pop("quiesce_max_s")
        if self.footprint is None:
            out.pop("footprint")
        if not self.layout_control:
            out.pop("layout_control")
        if self.kind != INTERLEAVED:
            for key in INTERLEAVED_KEYS:
                out.pop(key)
        return out


def parse(design: Any, placement: Any) -> RunDesign:
    """The [design] and [placement] tables (either may be None: absent)."""
    d = table(design, "design") if design is not None else {}
    check_keys(d, DESIGN_KEYS, "design")
    kind = string(d.get("kind", PAIRED), "design.kind")
    try:
        check_design(kind, key="design.kind")
    except UserError:
        raise fail("design.kind", f"unknown design {kind!r}", ", ".join(DESIGNS)) from None
    out: dict[str, Any] = {
        "kind": kind,
        "warmup": choice(d.get("warmup", "fixed"), "design.warmup", WARMUPS),
        "warmup_max_s": integer(
            d.get("warmup_max_s", DEFAULT_WARMUP_MAX_S),
            "design.warmup_max_s",
            MIN_WARMUP_MAX_S,
            3600,
        ),
        "checkpoint": choice(d.get("checkpoint", "free"), "design.checkpoint", CHECKPOINTS),
        "cycles": integer(d.get("cycles", DEFAULT_CYCLES), "design.cycles", 1, MAX_CYCLES),
        "quiesce_max_s": integer(
            d.get("quiesce_max_s", DEFAULT_QUIESCE_MAX_S), "design.quiesce_max_s", 0, MAX_QUIESCE_S
        ),
    }
    if "cycles" in d and out["checkpoint"] != "cycles":
        raise fail(
            "design.cycles",
            f"set with design.checkpoint = {out['checkpoint']!r}",
            "design.checkpoint = 'cycles' (or leave design.cycles out)",
        )
    if "footprint" in d:
        out["footprint"] = boolean(d["footprint"], "design.footprint")
    out["layout_control"] = integer(
        d.get("layout_control", 0), "design.layout_control", 0, MAX_LAYOUT_CONTROL
    )
    out |= _interleaving(d, kind)
    mode = choice(
        d.get("placement", "explicit" if placement is not None else "none"),
        "design.placement",
        PLACEMENTS,
    )
    if placement is not None:
        if mode != "explicit":
            raise fail(
                "placement",
                f"a [placement] table with design.placement = {mode!r}",
                "design.placement = 'explicit' (or leave it out) with a [placement] table",
            )
        p = table(placement, "placement")
        check_keys(p, PLACEMENT_KEYS, "placement")
        for key in PLACEMENT_KEYS:
            if key not in p:
                raise fail(f"placement.{key}", "missing", "a CPU list such as '1' or '0-2,4'")
            out[key] = string(p[key], f"placement.{key}")
    elif mode == "explicit":
        raise fail("design.placement", "'explicit' without a [placement] table", "none, auto")
    out["placement"] = mode
    rd = RunDesign(**out)
    check_interleaved(rd)
    return rd


def _interleaving(d: dict[str, Any], kind: str) -> dict[str, Any]:
    """slice_s and slices: only with kind "interleaved"; slices even (pairs of slices)."""
    for key in INTERLEAVED_KEYS:
        if key in d and kind != INTERLEAVED:
            raise fail(
                f"design.{key}",
                f"set with design.kind = {kind!r}",
                f"design.kind = {INTERLEAVED!r} (or leave design.{key} out)",
            )
    slice_s = integer(d.get("slice_s", DEFAULT_SLICE_S), "design.slice_s", 1, MAX_SLICE_S)
    slices = integer(d.get("slices", DEFAULT_SLICES), "design.slices", 2, MAX_SLICES)
    if slices % 2:
        raise fail(
            "design.slices",
            f"{slices} is odd: the Thue-Morse order balances pairs of slices",
            f"an even number 2..{MAX_SLICES}",
        )
    return {"slice_s": slice_s, "slices": slices}


def check_interleaved(rd: RunDesign) -> None:
    """interleaved runs both servers at once, driven in turns by short slices: the
    controls that act on one run alone (a steady warm-up, a cycle-bound checkpoint, a
    quiet machine, CPU placement, the footprint after a run) do not apply. "aligned"
    does: each server takes a CHECKPOINT right before its first measured slice and
    checkpoint_timeout is set out of the round's reach (blocklab.execution.interleaved)."""
    if rd.kind != INTERLEAVED:
        return
    refusals = [
        ("layout_control", rd.layout_control > 0, rd.layout_control, "0 (two servers only)"),
        ("checkpoint", rd.checkpoint == "cycles", rd.checkpoint, "'free' or 'aligned'"),
        ("warmup", rd.warmup == "steady", rd.warmup, "'fixed' (the matrix's warmup seconds)"),
        ("footprint", rd.footprint is True, rd.footprint, "false (or leave it out)"),
        ("quiesce_max_s", rd.quiesce_max_s > 0, rd.quiesce_max_s, "0 (or leave it out)"),
        ("placement", rd.placement != "none", rd.placement, "'none'"),
    ]
    for key, refused, value, allowed in refusals:
        if refused:
            raise fail(
                f"design.{key}",
                f"{value!r} with design.kind = {INTERLEAVED!r} (both servers run at once, "
                "in turns of short slices)",
                allowed,
            )


def check_interleaved_variants(design: RunDesign, storage_kinds: Sequence[str]) -> None:
    """interleaved alternates between exactly two servers, each on a storage of its own:
    two variants, on storage kinds blocklab can make a second of."""
    if design.kind != INTERLEAVED:
        return
    if len(storage_kinds) != 2:
        raise fail(
            "matrix",
            f"gives {len(storage_kinds)} variant(s) with design.kind = {INTERLEAVED!r}",
            "exactly two variants (the design alternates between two servers)",
        )
    other = sorted({k for k in storage_kinds if k not in INTERLEAVED_STORAGE_KINDS})
    if other:
        raise fail(
            "matrix.storage",
            f"kind {', '.join(map(repr, other))} with design.kind = {INTERLEAVED!r}: each "
            "variant needs a storage of its own, and a block device is only one",
            "storage kinds " + ", ".join(INTERLEAVED_STORAGE_KINDS),
        )


def apply_short_runs(design: RunDesign, matrix: dict[str, Any], rounds: int) -> tuple[Any, int]:
    """short-runs: the matrix's duration SHORT_FACTOR times shorter, that many more rounds
    (the same measuring time). A varying duration is an error: the design sets it."""
    if design.kind != SHORT_RUNS:
        return matrix, rounds
    duration = matrix.get("duration", None)
    if duration is None:
        raise fail("matrix.duration", "missing", "design 'short-runs' halves a fixed duration")
    if isinstance(duration, list) or not isinstance(duration, int) or isinstance(duration, bool):
        raise fail(
            "matrix.duration",
            f"{duration!r} with design 'short-runs'",
            "one duration in seconds (the design runs it shorter)",
        )
    short_s, more_rounds = short_runs_plan(duration, rounds)
    return {**matrix, "duration": max(1, round(short_s))}, more_rounds


def check_footprint(design: RunDesign, storage_kinds: Sequence[str]) -> None:
    """design.footprint = true on a data volume without a loop image: UserError."""
    other = sorted({k for k in storage_kinds if k not in LOOP_KINDS})
    if design.footprint and other:
        raise fail(
            "design.footprint",
            f"true, but matrix.storage has kind {', '.join(map(repr, other))}: the footprint "
            "reads the data volume's loop image",
            "storage kinds " + ", ".join(LOOP_KINDS) + " with footprint = true; or false",
        )


def check_design(name: str, *, key: str = "design") -> str:
    """The design name, or a UserError naming the key and the allowed values."""
    if name not in DESIGNS:
        raise UserError(f"{key}: unknown design {name!r}; allowed: {', '.join(DESIGNS)}")
    return name


def check_reference(design: str, variant_ids: Sequence[str], reference: str | None) -> None:
    """aa-control repeats the reference: it needs one among the variants."""
    if design == AA_CONTROL and (reference is None or reference not in variant_ids):
        raise UserError(
            f"design {AA_CONTROL!r} runs the reference twice per round: set the experiment's "
            f"reference to one of the variants ({', '.join(sorted(variant_ids))})"
        )


def short_runs_plan(
    duration_s: float, rounds: int, factor: int = SHORT_FACTOR
) -> tuple[float, int]:
    """(duration, rounds) of the short-runs design: the same measuring time in more rounds."""
    return duration_s / factor, rounds * factor
