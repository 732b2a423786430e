"""What an experiment asks of this machine, checked by `plan` and `run` before anything
starts (parsing a file asks nothing of the machine): each build's source and patches,
each storage's kind and options as blocklab.storage can provision them here (root, the
probed mkfs + mount block sizes, a memory cgroup, a device that may be erased), each
workload driver's program (installed by `make setup`), and room
for what blocklab.workloads.sizing estimates its largest variant needs."""

from __future__ import annotations

from blocklab import storage
from blocklab.errors import UserError
from blocklab.execution import cycles, placement
from blocklab.experiment_file.design import RunDesign
from blocklab.experiment_file.experiment import Experiment
from blocklab.paths import Paths
from blocklab.postgres import build
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
    for name in sorted({v.workload.driver for v in variants}):
        try:
            drivers.get(name).check_machine()
        except UserError as e:
            raise UserError(f"matrix.workload.driver ({name}): {e}") from e
    for sreq in {v.storage.digest(): v.storage for v in variants}.values():
        storage.validate(sreq, paths=paths, key="matrix.storage")
    for sreq, needs in sizing.needs_by_storage(variants).items():
        storage.check_room(sreq, needs, paths=paths, key="matrix.storage")


def check_placement(design: RunDesign) -> None:
    """An explicit placement whose CPUs this machine lacks: UserError naming the key."""
    if design.placement != "explicit":
        return
    assert design.driver_cpus is not None and design.server_cpus is not None
    placement.from_lists(design.driver_cpus, design.server_cpus, placement.machine_cpus())
