"""An experiment file from its text to the Experiment: TOML, the overrides of the command
line, the [experiment] table, then the matrix, excludes and references."""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from blocklab.errors import UserError
from blocklab.experiment_file import design as run_design
from blocklab.experiment_file import fleet, layout_control, matrix, selectors, settings
from blocklab.experiment_file.design import AA_CONTROL, INTERLEAVED
from blocklab.experiment_file.dimensions import Dimension
from blocklab.experiment_file.experiment import Experiment, default_seed
from blocklab.experiment_file.matrix import Combo
from blocklab.experiment_file.values import (
    boolean,
    check_keys,
    choice,
    fail,
    integer,
    number,
    string,
    table,
)
from blocklab.model import Variant
from blocklab.postgres import settings_policy as policies

TOP_KEYS = ("experiment", "matrix", "exclude", "design", "placement", "fleet")
EXPERIMENT_KEYS = (
    "name",
    "description",
    "seed",
    "rounds",
    "reference",
    "settings_policy",
    "until_ci_pct",
    "max_rounds",
    "time_budget_s",
    "allow_commands",
    "equivalence",
)
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
# what the command line overrides -> the suffix it adds to the experiment's name
OVERRIDABLE = {"scale": "s", "clients": "c", "duration": "d", "cycles": "n", "slices": "sl"}
DESIGN_OVERRIDES = ("cycles", "slices")  # [design] keys; the others are [matrix] keys
DEMO = "demo.toml"  # packaged beside this module


def load(path: Path, overrides: Mapping[str, int] | None = None) -> Experiment:
    """Read, validate and expand an experiment file. Raises UserError on any bad input.
    `overrides` replace fixed matrix values (OVERRIDABLE, e.g. {"scale": 1}) and name
    the experiment after them, so its results are stored beside the file's own."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError as e:
        raise UserError(f"experiment file {str(path)!r} does not exist") from e
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as e:
        raise UserError(f"experiment file {str(path)!r} cannot be read: {e}") from e
    return _from_text(text, path, str(path), overrides)


def demo(
    *,
    rounds: int | None = None,
    duration_s: int | None = None,
    scale: int | None = None,
    clients: int | None = None,
    cycles: int | None = None,
    slices: int | None = None,
) -> Experiment:
    """The built-in experiment (blocklab/experiment_file/demo.toml): PostgreSQL 18, 4 kB vs
    8 kB data pages, interleaved slices. The numbers change it as --rounds/--slices/
    --scale/--clients change a file."""
    text = resources.files("blocklab.experiment_file").joinpath(DEMO).read_text()
    given = {
        "scale": scale,
        "clients": clients,
        "duration": duration_s,
        "cycles": cycles,
        "slices": slices,
    }
    overrides = {k: v for k, v in given.items() if v is not None}
    exp = _from_text(text, Path(DEMO), None, overrides)
    return exp if rounds is None else exp.model_copy(update={"rounds": rounds})


def _from_text(
    text: str, path: Path, source: str | None, overrides: Mapping[str, int] | None
) -> Experiment:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"{path}: not valid TOML: {e}") from e
    if overrides:
        data = _overridden(data, overrides, path)
    try:
        return from_dict(data, base=path.resolve().parent, source=source)
    except UserError as e:
        raise UserError(f"{path}: {e}") from e


def overridden_name(name: str, overrides: Mapping[str, int | None]) -> str:
    """'page-size' with {"scale": 1, "duration": 2} -> 'page-size-s1-d2'."""
    parts = [f"{tag}{overrides[k]}" for k, tag in OVERRIDABLE.items() if overrides.get(k)]
    return "-".join([name, *parts])


def _overridden(data: dict[str, Any], overrides: Mapping[str, int], path: Path) -> dict[str, Any]:
    """A copy of the file's data with fixed matrix values replaced (a varying one is an
    error: an override must not collapse a dimension the experiment compares) and the
    [design] keys the command line sets (--cycles)."""
    values = dict(table(data.get("matrix", {}), "matrix"))
    design = _design_overridden(data, overrides)
    for key, value in overrides.items():
        if key not in OVERRIDABLE:
            raise UserError(f"--{key}: not an override; allowed: {', '.join(OVERRIDABLE)}")
        if key in DESIGN_OVERRIDES:
            continue
        current = values.get(key)
        if isinstance(current, list) and len(current) > 1:
            raise UserError(
                f"--{key}: {path} varies matrix.{key} ({', '.join(map(str, current))}); "
                f"--{key} replaces a fixed value only (edit the file to change the list)"
            )
        values[key] = value
    head = dict(table(data.get("experiment", {}), "experiment"))
    if isinstance(head.get("name"), str):
        head["name"] = overridden_name(head["name"], overrides)
    out = {**data, "experiment": head, "matrix": values}
    return out if design is None else {**out, "design": design}


def _design_overridden(data: dict[str, Any], overrides: Mapping[str, int]) -> dict[str, Any] | None:
    """The [design] table with --cycles or --slices applied (None without them). A design
    that measures whole checkpoint cycles refuses --duration: the cycles set its window,
    not a duration; so does the interleaved one (its slices do); any other design refuses
    --cycles and --slices."""
    design = dict(table(data.get("design", {}), "design"))
    checkpoint = design.get("checkpoint", "free")
    if design.get("kind") == run_design.INTERLEAVED and "duration" in overrides:
        n = design.get("slices", run_design.DEFAULT_SLICES)
        slice_s = design.get("slice_s", run_design.DEFAULT_SLICE_S)
        raise UserError(
            f'--duration: this experiment\'s [design] kind = "interleaved" measures slices: '
            f"each variant's window in a round is {n} slices of {slice_s} s, not a duration; "
            f"use --slices N (an even number 2..{run_design.MAX_SLICES})"
        )
    if checkpoint == "cycles" and "duration" in overrides:
        n = design.get("cycles", run_design.DEFAULT_CYCLES)
        raise UserError(
            f'--duration: this experiment\'s [design] checkpoint = "cycles" measures whole '
            f"checkpoint cycles: each run's window is {n} whole checkpoint cycle"
            f"{'' if n == 1 else 's'} of checkpoint_timeout {_timeout_text(data)}, not a "
            "duration; use --cycles N for a longer window (N cycles per run, 1.."
            f"{run_design.MAX_CYCLES}), or change matrix.settings.checkpoint_timeout in the file"
        )
    if "slices" in overrides:
        design = _slices_overridden(design, overrides["slices"])
    if "cycles" not in overrides:
        return design if "slices" in overrides else None
    if checkpoint != "cycles":
        raise UserError(
            f'--cycles: only for [design] checkpoint = "cycles"; this experiment\'s '
            f"checkpoint is {checkpoint!r} (its window is set by --duration)"
        )
    n = overrides["cycles"]
    if not 1 <= n <= run_design.MAX_CYCLES:
        raise UserError(f"--cycles: whole cycles per run, 1..{run_design.MAX_CYCLES} (got {n})")
    return {**design, "cycles": n}


def _slices_overridden(design: dict[str, Any], n: int) -> dict[str, Any]:
    """The [design] table with --slices N (slices per variant per round): only for the
    interleaved design, an even number in its range."""
    kind = design.get("kind", run_design.PAIRED)
    if kind != run_design.INTERLEAVED:
        raise UserError(
            f'--slices: only for [design] kind = "interleaved"; this experiment\'s design is '
            f"{kind!r} (its window is set by --duration)"
        )
    if n % 2 or not 2 <= n <= run_design.MAX_SLICES:
        raise UserError(
            f"--slices: an even number 2..{run_design.MAX_SLICES} (got {n}): the Thue-Morse "
            "order balances pairs of slices"
        )
    return {**design, "slices": n}


def _timeout_text(data: dict[str, Any]) -> str:
    """matrix.settings.checkpoint_timeout as the file writes it, for messages."""
    settings_table = data.get("matrix", {}).get("settings", {})
    value = settings_table.get("checkpoint_timeout") if isinstance(settings_table, dict) else None
    if value is None:
        return "5min (PostgreSQL's default)"
    return " / ".join(map(str, value)) if isinstance(value, list) else str(value)


def from_dict(data: dict[str, Any], *, base: Path, source: str | None = None) -> Experiment:
    """The Experiment of parsed TOML; `base` is where relative paths in it start from.
    Pure: it reads the files the experiment names, and asks nothing of the machine
    (blocklab.experiment_file.check_machine does, in plan and run)."""
    check_keys(data, TOP_KEYS, "")
    head = table(data.get("experiment", {}), "experiment")
    check_keys(head, EXPERIMENT_KEYS, "experiment")
    if "experiment" not in data or "name" not in head:
        raise fail("experiment.name", "missing", "a short name: letters, digits, . _ -")
    rd = run_design.parse(data.get("design"), data.get("placement"))
    meta = _experiment_meta(head)
    values, meta["rounds"] = run_design.apply_short_runs(
        rd, table(data.get("matrix", {}), "matrix"), meta["rounds"]
    )
    if rd.kind == AA_CONTROL and head.get("reference") is None:
        raise fail(
            "experiment.reference",
            "missing: design 'aa-control' runs the reference twice per round",
            "a selector such as { block_size = 8 } or a variant label",
        )
    dims = matrix.dimensions(values, base)
    vocab = selectors.Vocabulary.of(dims, matrix.known_values(dims))
    rules = selectors.excludes(data.get("exclude", []), vocab)
    combos = selectors.drop_excluded(matrix.combos(dims), rules)
    meta["run_design"] = rd
    exp = _assemble(meta, dims, combos, data, vocab, source)
    run_design.check_footprint(rd, [v.storage.kind for v in exp.variants()])
    run_design.check_interleaved_variants(rd, [v.storage.kind for v in exp.variants()])
    split = {h: len(ids) for h, ids in exp.host_variants.items() if len(ids) != 2}
    if rd.kind == INTERLEAVED and split:
        raise fail(
            "fleet",
            f"hosts {', '.join(f'{h} ({n} variant(s))' for h, n in sorted(split.items()))} "
            f"with design.kind = {INTERLEAVED!r}",
            "both variants on every host (the design alternates between two servers)",
        )
    return exp


def _experiment_meta(head: dict[str, Any]) -> dict[str, Any]:
    name = string(head["name"], "experiment.name")
    if not NAME_RE.match(name):
        raise fail("experiment.name", f"{name!r} is not a usable name", "letters, digits, . _ -")
    rounds = integer(head.get("rounds", 5), "experiment.rounds", 1, 10000)
    meta: dict[str, Any] = {
        "name": name,
        "description": string(head.get("description", ""), "experiment.description"),
        "seed": integer(head["seed"], "experiment.seed", 0, 2**63 - 1)
        if "seed" in head
        else default_seed(name),
        "rounds": rounds,
        "settings_policy": choice(
            head.get("settings_policy", "native"), "experiment.settings_policy", policies.POLICIES
        ),
        "reference": head.get("reference"),
        "allow_commands": boolean(head.get("allow_commands", False), settings.ALLOW_KEY),
    }
    return meta | _stopping(head, rounds)


def _stopping(head: dict[str, Any], rounds: int) -> dict[str, Any]:
    """The optional adaptive-rounds keys."""
    out: dict[str, Any] = {}
    if "until_ci_pct" in head:
        pct = number(head["until_ci_pct"], "experiment.until_ci_pct")
        if pct >= 100:
            raise fail(
                "experiment.until_ci_pct", f"{pct} is not a useful precision", "0 < pct < 100"
            )
        out["until_ci_pct"] = pct
    if "equivalence" in head:
        out["equivalence_pct"] = _equivalence(head["equivalence"])
    if "max_rounds" in head:
        out["max_rounds"] = integer(head["max_rounds"], "experiment.max_rounds", rounds, 10000)
    if "time_budget_s" in head:
        out["time_budget_s"] = number(head["time_budget_s"], "experiment.time_budget_s")
    return out


def _equivalence(value: Any) -> float:
    """[experiment] equivalence: X of "equal within ±X %" (blocklab.analysis.stats)."""
    pct = number(value, "experiment.equivalence")
    if pct >= 100:
        raise fail("experiment.equivalence", f"{pct} is not a usable margin", "0 < percent < 100")
    return pct


def _assemble(
    meta: dict[str, Any],
    dims: Sequence[Dimension],
    combos: list[Combo],
    data: dict[str, Any],
    vocab: selectors.Vocabulary,
    source: str | None,
) -> Experiment:
    varying = matrix.varying(combos)
    labels = [matrix.label(c.flat, varying, dims) for c in combos]
    ref_index = selectors.references(meta["reference"], combos, labels, varying, vocab)
    policy = meta["settings_policy"]
    variants = [matrix.to_variant(c, dims, labels[i], policy) for i, c in enumerate(combos)]
    matrix.check_distinct(variants, combos)
    for v in variants:
        _check_driver_server(v)
    settings.check_allowed(
        settings.command_settings(s for v in variants for s in v.settings), meta["allow_commands"]
    )
    ids = [v.variant_id for v in variants]
    hosts = fleet.host_assignment(data.get("fleet"), combos, ref_index, labels, vocab)
    variants, refs, dims_map = layout_control.arms(
        variants,
        {ids[i]: ids[r] for i, r in enumerate(ref_index)},
        {ids[i]: matrix.dims_of(c.flat, varying, dims) for i, c in enumerate(combos)},
        meta["run_design"].layout_control,
    )
    host_ids = {h: tuple(ids[i] for i in idx) for h, idx in hosts.items()}
    return Experiment(
        **meta,
        matrix=_normalized(dims),
        exclude=[_jsonable(r) for r in data.get("exclude", [])],
        host_variants=layout_control.hosts_with_arms(host_ids, variants, refs),
        variant_list=tuple(variants),
        reference_map=refs,
        dims_map=dims_map,
        source=source,
    )


# Drivers that need a newer server than blocklab builds: go-tpc v1.0.12's tpch creates a
# view with date_add() (PostgreSQL 16+) before its queries, and panics on PostgreSQL 15.
DRIVER_MIN_PG = {"tpch": 16}


def _check_driver_server(v: Variant) -> None:
    least = DRIVER_MIN_PG.get(v.workload.driver)
    if least is None or v.build.source != "debian" or not v.build.pg.isdigit():
        return  # a tarball's or tree's version is known only once it is unpacked
    if int(v.build.pg) < least:
        allowed = ", ".join(p for p in ("15", "17", "18") if int(p) >= least)
        raise fail(
            "matrix.postgres",
            f"pg {v.build.pg} cannot run the {v.workload.driver} driver (go-tpc's TPC-H "
            f"queries need PostgreSQL {least} or newer)",
            allowed,
        )


def _normalized(dims: Sequence[Dimension]) -> dict[str, Any]:
    return {d.key: [o.json for o in d.options] for d in dims}


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, sort_keys=True, default=str))
