#!/bin/sh
# run as root from the directory it writes to: runuser -u blocklab -- sh record_pg_stat_io_18.sh OUT.csv
set -eu
B=/var/lib/blocklab/cache/builds/pg18.6-bs8k-wal8k-f3edcb2e1c12/bin
D=/var/tmp/statio-rec/data
S=/var/tmp/statio-rec/sock
P=55432
mkdir -p "$S"
"$B/initdb" -D "$D" -U postgres --no-instructions >/dev/null
cat >>"$D/postgresql.conf" <<CONF
listen_addresses = ''
unix_socket_directories = '$S'
port = $P
shared_buffers = 16MB
autovacuum = off
CONF
"$B/pg_ctl" -D "$D" -l /var/tmp/statio-rec/server.log -w start >/dev/null
q() { "$B/psql" -h "$S" -p $P -U postgres -X -q -v ON_ERROR_STOP=1 "$@"; }
q -c "SELECT pg_stat_reset_shared('io')" >/dev/null  # from here on, not initdb's
"$B/pgbench" -h "$S" -p $P -U postgres -i -s 5 -q postgres 2>/dev/null  # COPY: bulkwrite; its VACUUM: vacuum
q -c "UPDATE pgbench_accounts SET filler = 'u' WHERE aid % 10 = 0" >/dev/null
q -c "VACUUM pgbench_accounts" >/dev/null  # vacuum
q -c "SET max_parallel_workers_per_gather = 0; SELECT sum(abalance) FROM pgbench_accounts" >/dev/null  # seq scan of a table > shared_buffers/4: bulkread
q -c "CREATE TABLE big AS SELECT g, repeat('x', 100) AS pad FROM generate_series(1, 200000) g" >/dev/null  # bulkwrite
q -c "SET temp_buffers = '1MB'; CREATE TEMP TABLE t AS SELECT g FROM generate_series(1, 300000) g; SELECT count(*) FROM t" >/dev/null  # temp relation
"$B/pgbench" -h "$S" -p $P -U postgres -c 2 -T 10 postgres >/dev/null 2>&1  # normal
q -c "CHECKPOINT" >/dev/null
q --csv -c "SELECT * FROM pg_stat_io" >"$1"
"$B/pg_ctl" -D "$D" -m fast -w stop >/dev/null
