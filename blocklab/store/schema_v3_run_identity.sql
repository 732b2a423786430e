-- blocklab results database, schema version 3 (SQLite): a run is known by
-- (experiment, host, variant_id, round, copy_index). `host` is the fleet host that ran it
-- ('' on one machine); `copy_index` numbers the runs of one variant in one round (designs
-- that run a variant twice per round: A B B A, an A/A control arm). SQLite cannot drop a
-- table constraint, so runs is rebuilt: foreign keys off (metrics, series and checkpoints
-- keep their run ids), one transaction, the version row inside it.
PRAGMA foreign_keys = OFF;
BEGIN;
CREATE TABLE runs_v3 (
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
    raw_dir       TEXT NOT NULL DEFAULT '',
    settings_json TEXT NOT NULL DEFAULT '{}',
    provenance_json TEXT NOT NULL DEFAULT '{}',
    host          TEXT NOT NULL DEFAULT '',
    copy_index    INTEGER NOT NULL DEFAULT 0,
    UNIQUE (experiment, host, variant_id, round, copy_index)
);
INSERT INTO runs_v3 (id, experiment, variant_id, round, position, status, reason, started_at,
    ended_at, tps, latency_avg_ms, latency_stddev_ms, transactions, failed_transactions,
    exit_code, command, raw_dir, settings_json, provenance_json)
SELECT id, experiment, variant_id, round, position, status, reason, started_at,
    ended_at, tps, latency_avg_ms, latency_stddev_ms, transactions, failed_transactions,
    exit_code, command, raw_dir, settings_json, provenance_json FROM runs;
DROP TABLE runs;
ALTER TABLE runs_v3 RENAME TO runs;
CREATE INDEX IF NOT EXISTS runs_by_variant ON runs (experiment, variant_id);
INSERT INTO schema_version VALUES (3);
COMMIT;
PRAGMA foreign_keys = ON;
