-- blocklab results database, schema version 2: device profiles (blocklab device profile).
-- One profile = fio on one storage at request sizes x queue depths x patterns; each point
-- keeps fio's JSON output raw. A failed point has a reason and no numbers.
CREATE TABLE IF NOT EXISTS device_profiles (
    id           INTEGER PRIMARY KEY,
    name         TEXT NOT NULL UNIQUE,
    created_at   TEXT NOT NULL,          -- ISO 8601 UTC
    state        TEXT NOT NULL DEFAULT 'running',  -- running | done | interrupted | failed
    target_json  TEXT NOT NULL DEFAULT '{}',       -- storage kind, path, file-system facts
    host_json    TEXT NOT NULL DEFAULT '{}',
    fio_version  TEXT NOT NULL DEFAULT '',
    ioengine     TEXT NOT NULL DEFAULT '',
    runtime_s    REAL NOT NULL,           -- per point
    size_bytes   INTEGER NOT NULL         -- fio's file or device region
);

CREATE TABLE IF NOT EXISTS device_profile_points (
    profile_id     INTEGER NOT NULL REFERENCES device_profiles(id) ON DELETE CASCADE,
    pattern        TEXT NOT NULL,         -- randread | randwrite | read | write
    request_bytes  INTEGER NOT NULL,
    iodepth        INTEGER NOT NULL,
    status         TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
    reason         TEXT NOT NULL DEFAULT '',
    iops           REAL,
    bw_bytes_per_s REAL,
    lat_mean_us    REAL,                  -- completion latency (fio clat)
    lat_p50_us     REAL,
    lat_p99_us     REAL,
    lat_p999_us    REAL,
    runtime_s      REAL,                  -- what fio measured
    command        TEXT NOT NULL DEFAULT '',
    fio_json       TEXT NOT NULL DEFAULT '', -- fio --output-format=json, raw
    PRIMARY KEY (profile_id, pattern, request_bytes, iodepth)
);
