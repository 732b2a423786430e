"""Results store. `ResultsStore` (store.base) is the interface; `ResultsDB` its SQLite
implementation (store.sqlite), the one callers open."""

from blocklab.store.base import ResultsStore, Row, RunRecord
from blocklab.store.sqlite import RESULTS_DB_NAME, SCHEMA_VERSION, ResultsDB

__all__ = ["RESULTS_DB_NAME", "SCHEMA_VERSION", "ResultsDB", "ResultsStore", "Row", "RunRecord"]
