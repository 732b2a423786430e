"""Results store. `ResultsStore` (store.base) is the interface; `ResultsDB` its SQLite
implementation (store.sqlite), the one callers open.

Layer: bottom, beside postgres and storage: may import only the shared nouns at the root.
Also export (CSV), copies between stores and the results directory's room.
"""

from blocklab.store.base import ResultsStore, Row, RunRecord
from blocklab.store.sqlite import RESULTS_DB_NAME, SCHEMA_VERSION, ResultsDB

__all__ = ["RESULTS_DB_NAME", "SCHEMA_VERSION", "ResultsDB", "ResultsStore", "Row", "RunRecord"]
