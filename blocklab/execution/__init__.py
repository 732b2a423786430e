"""Execution: a run's way through the machine. The lab (builds, storages, datasets, servers),
the experiment loop and its rounds, the runner of one measured run, run controls (placement,
steady warm-up, aligned checkpoints), progress, the run lock, round orders of each design,
the preflight check of an experiment against this machine, and the probes' overhead self-
test.

May import analysis, experiment_file, workloads, probes, postgres, storage, store and the
shared nouns; never commands, fleet, report or economics.
The layers are checked by import-linter (pyproject.toml, docs/ARCHITECTURE.md).
"""
