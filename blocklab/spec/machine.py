"""What an experiment asks of this machine, checked by `plan` and `run` before anything
starts (parsing a file asks nothing of the machine): each build's source and patches,
each storage's kind and options as blocklab.storage can provision them here (root, the
probed mkfs + mount block sizes, a memory cgroup, a device that may be erased), each
workload driver's program (installed by `make setup`), and room
for what blocklab.sizing estimates its largest variant needs."""

from __future__ import annotations

from blocklab.errors import UserError
from blocklab.paths import Paths
from blocklab.spec.experiment import Experiment


def check_machine(exp: Experiment, paths: Paths) -> None:
    """UserError naming the key (after the experiment file, as a parse error does)."""
    try:
        _check(exp, paths)
    except UserError as e:
        raise UserError(f"{exp.source}: {e}" if exp.source else str(e)) from e


def _check(exp: Experiment, paths: Paths) -> None:
    from blocklab import build, sizing, storage  # heavy: loaded when a command checks
    from blocklab.spec.design import check_placement

    check_placement(exp.run_design)
    variants = exp.variants()
    for req in {v.build.digest(): v.build for v in variants}.values():
        try:
            build.validate(req)
        except UserError as e:
            raise UserError(f"matrix.postgres (pg {req.pg}, source {req.source}): {e}") from e
    from blocklab.workloads import drivers

    for name in sorted({v.workload.driver for v in variants}):
        try:
            drivers.get(name).check_machine()
        except UserError as e:
            raise UserError(f"matrix.workload.driver ({name}): {e}") from e
    for sreq in {v.storage.digest(): v.storage for v in variants}.values():
        storage.validate(sreq, paths=paths, key="matrix.storage")
    for sreq, needs in sizing.needs_by_storage(variants).items():
        storage.check_room(sreq, needs, paths=paths, key="matrix.storage")
