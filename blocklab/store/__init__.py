"""Results database. SQLite today; the interface (ResultsDB) is what callers use."""

from blocklab.store.db import RESULTS_DB_NAME, SCHEMA_VERSION, ResultsDB, RunRecord

__all__ = ["RESULTS_DB_NAME", "SCHEMA_VERSION", "ResultsDB", "RunRecord"]
