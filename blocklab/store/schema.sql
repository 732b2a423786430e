-- blocklab results database, schema version 1.
-- Raw first: every run keeps its files in a directory of its own (runs.raw_dir);
-- the tables hold what was parsed from them. Aggregates are never stored.
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);

CREATE TABLE IF NOT EXISTS experiments (
    name        TEXT PRIMARY KEY,
    description TEXT NOT NULL DEFAULT '',
    spec_json   TEXT NOT NULL,          -- the validated experiment, as JSON
    seed        INTEGER NOT NULL,
    reference   TEXT,                   -- variant_id of the reference variant
    created_at  TEXT NOT NULL,          -- ISO 8601 UTC
    host_json   TEXT NOT NULL DEFAULT '{}',
    state       TEXT NOT NULL DEFAULT 'running',   -- running | done | interrupted | failed
    end_reason  TEXT NOT NULL DEFAULT ''           -- why the last run stopped adding rounds
);

CREATE TABLE IF NOT EXISTS variants (
    experiment   TEXT NOT NULL REFERENCES experiments(name) ON DELETE CASCADE,
    variant_id   TEXT NOT NULL,
    label        TEXT NOT NULL,
    position     INTEGER NOT NULL,      -- order in the experiment file's matrix
    variant_json TEXT NOT NULL,         -- blocklab.model.Variant
    dims_json    TEXT NOT NULL DEFAULT '{}',  -- {"block_size_kb": 4, "fs": "ext4-4k", ...}
    reference_id TEXT,                  -- the variant it is compared with (grouped references)
    PRIMARY KEY (experiment, variant_id)
);

CREATE TABLE IF NOT EXISTS rounds (
    experiment  TEXT NOT NULL REFERENCES experiments(name) ON DELETE CASCADE,
    round       INTEGER NOT NULL,
    seed        INTEGER NOT NULL,
    order_json  TEXT NOT NULL,          -- list of variant_id in run order
    PRIMARY KEY (experiment, round)
);

CREATE TABLE IF NOT EXISTS runs (
    id            INTEGER PRIMARY KEY,
    experiment    TEXT NOT NULL REFERENCES experiments(name) ON DELETE CASCADE,
    variant_id    TEXT NOT NULL,
    round         INTEGER NOT NULL,
    position      INTEGER NOT NULL,     -- place in the round's order
    status        TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
    reason        TEXT NOT NULL DEFAULT '',
    started_at    TEXT NOT NULL,
    ended_at      TEXT NOT NULL,
    tps           REAL,                 -- NULL when failed: a failure is never a number
    latency_avg_ms    REAL,
    latency_stddev_ms REAL,
    transactions      INTEGER,
    failed_transactions INTEGER,
    exit_code     INTEGER,
    command       TEXT NOT NULL DEFAULT '',
    raw_dir       TEXT NOT NULL DEFAULT '',   -- relative to the results directory (PostgreSQL: absolute)
    settings_json TEXT NOT NULL DEFAULT '{}', -- effective pg_settings (name -> setting, unit)
    provenance_json TEXT NOT NULL DEFAULT '{}',
    UNIQUE (experiment, variant_id, round)
);

-- Derived per-run metrics, in bytes/seconds/ratios, never pages: name carries the unit.
CREATE TABLE IF NOT EXISTS metrics (
    run_id  INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    name    TEXT NOT NULL,
    value   REAL,                       -- NULL = not measurable on this server (see missing)
    PRIMARY KEY (run_id, name)
);

-- Per-second series, long format: t_s counts seconds from the workload start.
CREATE TABLE IF NOT EXISTS series (
    run_id  INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    name    TEXT NOT NULL,
    t_s     REAL NOT NULL,
    value   REAL,
    PRIMARY KEY (run_id, name, t_s)
);

CREATE TABLE IF NOT EXISTS checkpoints (
    run_id      INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    seq         INTEGER NOT NULL,
    start_s     REAL,                   -- seconds from workload start (negative = before)
    end_s       REAL,                   -- NULL = still running when the run ended
    trigger     TEXT NOT NULL,          -- time | wal | requested | immediate | shutdown | ...
    buffers_written INTEGER,
    bytes_written   INTEGER,            -- buffers_written * the build's block size
    wal_distance_bytes INTEGER,
    incomplete  INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, seq)
);

CREATE INDEX IF NOT EXISTS runs_by_variant ON runs (experiment, variant_id);
