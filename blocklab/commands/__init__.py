"""The CLI's commands: read flags, call the packages below, print results and pick exit codes
(the only place that does).

May import every package below it (fleet, report, execution, economics, analysis,
experiment_file, workloads, probes, postgres, storage, store) and the shared nouns at the
root.
The layers are checked by import-linter (pyproject.toml, docs/ARCHITECTURE.md).
"""
