-- blocklab results database, schema version 7: a run's per-second series packed, one row
-- a (run, series) instead of one a point (blocklab.store.series_packed). t_s: the seconds
-- from the workload start, little-endian float64, ascending; value: the value at each,
-- float64, NaN where none was measured. At 10,000 runs of 8 series of 60 seconds the
-- point rows were 4.8 million, and reading them back took 4.7 s of CPU (1.8 s packed).
-- The upgrade packs the point rows stored before it and drops their table `series`.
CREATE TABLE IF NOT EXISTS run_series (
    run_id  INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    name    TEXT NOT NULL,
    t_s     BLOB NOT NULL,
    value   BLOB NOT NULL,
    PRIMARY KEY (run_id, name)
);
