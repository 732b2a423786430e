"""What an experiment asks of this machine, checked by `plan` and `run` before anything
starts (parsing a file asks nothing of the machine): each build's source and patches,
each storage's kind and options as blocklab.storage can provision them here (root, the
probed mkfs + mount block sizes, a memory cgroup, a device that may be erased), each
workload driver's program (installed by `make setup`), the I/O settings each build,
its PostgreSQL version and this kernel can run (blocklab.postgres.io_settings: io_method,
io_workers, io_combine_limit, wal_compression, ...), and room for what
blocklab.workloads.sizing estimates its largest variant needs."""

from __future__ import annotations

from collections.abc import Callable

from blocklab import storage
from blocklab.errors import UserError
from blocklab.execution import cycles, placement
from blocklab.experiment_file.design import RunDesign
from blocklab.experiment_file.experiment import Experiment
from blocklab.model import BuildRequest, Variant
from blocklab.paths import Paths
from blocklab.postgres import build, io_settings, settings_catalogue
from blocklab.postgres.installation import major_of
from blocklab.workloads import drivers, sizing


def check_machine(exp: Experiment, paths: Paths) -> None:
    """UserError naming the key (after the experiment file, as a parse error does)."""
    try:
        _check(exp, paths)
    except UserError as e:
        raise UserError(f"{exp.source}: {e}" if exp.source else str(e)) from e


def _check(exp: Experiment, paths: Paths) -> None:
    check_placement(exp.run_design)
    cycles.check_experiment(exp)
    variants = exp.variants()
    for req in {v.build.digest(): v.build for v in variants}.values():
        try:
            build.validate(req)
        except UserError as e:
            raise UserError(f"matrix.postgres (pg {req.pg}, source {req.source}): {e}") from e
    check_io_settings(variants, lambda req: build_ability(req, paths))
    for name in sorted({v.workload.driver for v in variants}):
        try:
            drivers.get(name).check_machine()
        except UserError as e:
            raise UserError(f"matrix.workload.driver ({name}): {e}") from e
    for sreq in {v.storage.digest(): v.storage for v in variants}.values():
        storage.validate(sreq, paths=paths, key="matrix.storage")
    for sreq, needs in sizing.needs_by_storage(variants).items():
        storage.check_room(sreq, needs, paths=paths, key="matrix.storage")


def build_ability(req: BuildRequest, paths: Paths) -> io_settings.BuildAbility:
    """A cached build's version, libraries and catalogue; else what the build will be."""
    inst = build.cached_for(req, paths)
    if inst is not None:
        return io_settings.BuildAbility(
            inst.major,
            inst.features,
            settings_catalogue.stored(inst),
            f"PostgreSQL {inst.version} (build {inst.key})",
        )
    label = f"PostgreSQL {req.pg} (to be built)"
    return io_settings.BuildAbility(major_of(req.pg), build.request_features(req), None, label)


def check_io_settings(
    variants: list[Variant],
    ability_of: Callable[[BuildRequest], io_settings.BuildAbility],
    read_kernel: Callable[[], str] = io_settings.read_io_uring_refusal,
) -> None:
    """UserError naming the first setting (key = value: why) a variant's build, its
    PostgreSQL version or this kernel cannot run; the kernel is read only when a
    variant asks for io_uring."""
    asks_uring = any(dict(v.settings).get("io_method", "").lower() == "io_uring" for v in variants)
    kernel = read_kernel() if asks_uring else ""
    abilities: dict[str, io_settings.BuildAbility] = {}
    for v in variants:
        digest = v.build.digest()
        if digest not in abilities:
            abilities[digest] = ability_of(v.build)
        found = io_settings.refusals(dict(v.settings), abilities[digest], kernel)
        if found:
            raise UserError(f"{found[0]} (variant {v.label or v.variant_id})")


def check_placement(design: RunDesign) -> None:
    """An explicit placement whose CPUs this machine lacks: UserError naming the key."""
    if design.placement != "explicit":
        return
    assert design.driver_cpus is not None and design.server_cpus is not None
    placement.from_lists(design.driver_cpus, design.server_cpus, placement.machine_cpus())
