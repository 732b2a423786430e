"""The database role workloads connect as: a login role that owns the workload's database
and its tables but is not a superuser (SQL, pure).

The server's bootstrap superuser (the `blocklab` role) stays blocklab's own: the probes,
settings read-back, CHECKPOINT, VACUUM and the load's fillfactor work use it. A driver
(pgbench, sysbench, go-tpc) and the TPC-H-like plan pass connect as ROLE, so a custom
script's SQL cannot run `COPY ... TO PROGRAM`, read server files (`pg_read_file`) or
`LOAD` a library: those need a superuser or a role granted them, and ROLE is neither.

`handover_sql()` makes ROLE (when missing) and gives it the current database and every
relation of the user's schemas (and, on PostgreSQL 15+, the right to set
SESSION_SETTING); it is idempotent. A driver that needs more on a server (the TPC-H-like
one on PostgreSQL 13 and 14) says so with `needs_superuser(major)`, and the runner's
provenance records the role it ran as (`driver_role`). It runs after every load (the snapshot
keeps it) and again before every run, so a snapshot made before the role existed gets it
too (the CHECKPOINT that follows keeps it out of the measured window).
"""

from __future__ import annotations

ROLE = "blocklab_workload"
# the superuser-only setting the TPC-H-like driver's sessions set for themselves (its
# per-query times); PostgreSQL 15+ can grant it, older servers cannot (needs_superuser)
SESSION_SETTING = "log_min_duration_statement"
USER_SCHEMAS = "n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname !~ '^pg_'"
# relkind -> the ALTER command that can change its owner
OWNED_KINDS = {"r": "TABLE", "p": "TABLE", "v": "VIEW", "m": "MATERIALIZED VIEW",
               "f": "FOREIGN TABLE", "S": "SEQUENCE"}  # fmt: skip


def handover_sql() -> str:
    """Create ROLE (LOGIN, no superuser, no role or database creation, no replication)
    unless it exists, then give it the current database and every relation of the user's
    schemas that it does not own yet (a sequence owned by a column moves with its
    table)."""
    kinds = ", ".join(f"'{k}'" for k in OWNED_KINDS)
    cases = " ".join(f"WHEN '{k}' THEN '{v}'" for k, v in OWNED_KINDS.items())
    return f"""
DO $do$
DECLARE r record;
BEGIN
  IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = '{ROLE}') THEN
    CREATE ROLE {ROLE} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION;
  END IF;
  EXECUTE format('ALTER DATABASE %I OWNER TO {ROLE}', current_database());
  IF current_setting('server_version_num')::int >= 150000 THEN
    IF NOT has_parameter_privilege('{ROLE}', '{SESSION_SETTING}', 'SET') THEN
      EXECUTE 'GRANT SET ON PARAMETER {SESSION_SETTING} TO {ROLE}';
    END IF;
  END IF;
  FOR r IN SELECT c.oid::regclass AS rel, CASE c.relkind {cases} END AS what
           FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
           WHERE c.relkind IN ({kinds}) AND {USER_SCHEMAS}
             AND c.relowner <> (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = '{ROLE}')
             AND NOT EXISTS (SELECT FROM pg_catalog.pg_depend d
                             WHERE d.classid = 'pg_catalog.pg_class'::regclass
                               AND d.objid = c.oid AND d.deptype IN ('a', 'i')
                               AND c.relkind = 'S')
  LOOP
    EXECUTE format('ALTER %s %s OWNER TO {ROLE}', r.what, r.rel);
  END LOOP;
END
$do$;
"""
