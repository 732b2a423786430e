-- blocklab results database, schema version 6: the few facts of each run's provenance
-- that every summary reads (blocklab.store.run_facts.FACTS: the server's version, the
-- build's and the dataset's keys), kept beside it when the run is stored. A real run's
-- provenance is 12 kB and its settings 23 kB: reading both for every run took a
-- 10,000-run report 1.2 s an update, for three short strings a run. Derived from
-- runs.provenance_json alone; filled for the runs stored before this version when the
-- store is upgraded (blocklab.store.run_facts.fill).
CREATE TABLE IF NOT EXISTS run_facts (
    run_id      INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
    facts_json  TEXT NOT NULL           -- {"version", "build_key", "dataset": {"key"}}: those present
);
