-- blocklab results database, schema version 4: per-query times and plans of a run
-- (SQL workloads such as the TPC-H-like one). A query's time is the server's (its log's
-- statement duration), `calls` times per run; its plan is the plan the variant chose,
-- captured outside the measured window, normalised (blocklab.plans) and stored once per
-- fingerprint.
CREATE TABLE IF NOT EXISTS query_plans (
    fingerprint  TEXT PRIMARY KEY,        -- blocklab.plans.fingerprint of the normalised plan
    plan_json    TEXT NOT NULL            -- the normalised plan (node types, joins, relations)
);

CREATE TABLE IF NOT EXISTS run_queries (
    run_id           INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    query            TEXT NOT NULL,       -- the workload's name for it: q1 .. q22
    calls            INTEGER NOT NULL,
    time_ms_mean     REAL NOT NULL,       -- server-side, per call
    time_ms_total    REAL NOT NULL,
    plan_fingerprint TEXT REFERENCES query_plans(fingerprint),
    PRIMARY KEY (run_id, query)
);
