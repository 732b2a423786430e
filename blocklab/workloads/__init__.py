"""Workloads: the drivers (pgbench, sysbench, go-tpc TPC-C-like and TPC-H-like) behind one
WorkloadDriver protocol, datasets (load once, snapshot, restore), sizing estimates and their
page arithmetic, query plans of a workload's statements.

May import postgres, storage, store and the shared nouns; never probes, experiment_file,
analysis or anything above.
The layers are checked by import-linter (pyproject.toml, docs/ARCHITECTURE.md).
"""
