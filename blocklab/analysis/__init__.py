"""Analysis: pure statistics and what is derived from stored runs. Paired comparisons and
intervals (stats), precision and noise for planning, each design's analysis, the metric
catalogue, the summary and its tables, per-query summaries.

Starts no process. May import experiment_file, workloads (its pure query-plan and driver
catalogue), store and the shared nouns; never execution or anything above.
The layers are checked by import-linter (pyproject.toml, docs/ARCHITECTURE.md).
"""
