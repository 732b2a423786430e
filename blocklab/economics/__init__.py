"""Economics: the Five-Minute Rule per page size, its inputs (prices, IOPS) and report, device
profiles measured with fio and their store.

Beside execution: may import analysis, experiment_file, storage, store and the shared nouns;
never execution, commands, fleet or report.
The layers are checked by import-linter (pyproject.toml, docs/ARCHITECTURE.md).
"""
