INSERT INTO pgbench_history (tid, bid, aid, delta, mtime, filler) SELECT 1, 1, g, 0, now(), 'x' FROM generate_series(1, 4000000) g;
