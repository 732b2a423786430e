-- blocklab results database, schema version 5: each successful run's stationarity trends
-- (blocklab.analysis.stationarity), kept because a run's series never change once stored:
-- the summary and the report read them instead of judging every run's series again.
-- Derived from the series alone and reproduced exactly from them (`blocklab report
-- --full` judges every run again and replaces them); `method` names the test that judged
-- them (stationarity.METHOD), and rows of another method are ignored and replaced.
CREATE TABLE IF NOT EXISTS run_trends (
    run_id      INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    method      TEXT NOT NULL,
    series      TEXT NOT NULL,        -- a judged series' stored name; '' the run's own row
    n           INTEGER NOT NULL,     -- points tested ('' row: the window's points)
    mean        REAL,
    start_value REAL,                 -- the fitted value at the window's first second
    end_value   REAL,                 -- ... and at its last
    change_pct  REAL,
    p_value     REAL,
    drifted     INTEGER,
    PRIMARY KEY (run_id, method, series)
);
