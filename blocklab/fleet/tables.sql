-- blocklab's fleet bookkeeping beside procrastinate's own tables (in the results
-- database, not part of the results schema: the queue's side, like procrastinate_jobs).
CREATE TABLE IF NOT EXISTS blocklab_fleet_experiments (
    name          TEXT PRIMARY KEY,
    spec_text     TEXT NOT NULL,        -- the experiment file as submitted
    spec_path     TEXT NOT NULL,        -- where it was read (relative paths resolve there)
    overrides_json TEXT NOT NULL,       -- --duration/--scale/--clients given at submit
    hosts_json    TEXT NOT NULL,
    rounds        BIGINT NOT NULL,
    until_ci_pct  DOUBLE PRECISION,     -- per host: add rounds until every CI is this narrow
    max_rounds    BIGINT,
    submitted_at  TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS blocklab_fleet_agents (
    host        TEXT PRIMARY KEY,
    pid         BIGINT NOT NULL,
    started_at  TIMESTAMPTZ NOT NULL,
    last_seen   TIMESTAMPTZ NOT NULL
);
CREATE TABLE IF NOT EXISTS blocklab_fleet_failures (
    job_id      BIGINT NOT NULL,
    attempt     BIGINT NOT NULL,
    host        TEXT NOT NULL,
    experiment  TEXT NOT NULL,
    round       BIGINT NOT NULL,
    reason      TEXT NOT NULL,
    at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, attempt)
);
