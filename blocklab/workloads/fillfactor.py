"""fillfactor for drivers that create their own tables (sysbench, go-tpc): SQL (pure).

A driver's load creates its tables with CREATE TABLE and fills them afterwards, and has no
fillfactor option. Before the load, blocklab.workloads.dataset installs an event trigger on
`ddl_command_end` for CREATE TABLE that sets the new table's fillfactor with ALTER TABLE,
before any row is inserted, so the load itself honours it; after the load the trigger is
dropped (the snapshot keeps only the tables' reloptions).

Index fillfactor is set after the load on every B-tree index of the workload's schemas
(ALTER INDEX ... SET (fillfactor = N)) and applied with REINDEX, since indexes built
after the rows (sysbench's k_N) ignore a setting made later.

`RELOPTIONS_SQL` reads back what the catalogue holds, for the dataset's record.
"""

from __future__ import annotations

TRIGGER = "blocklab_fillfactor"
USER_SCHEMAS = "n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname !~ '^pg_'"


def _int(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 10 <= value <= 100:
        raise ValueError(f"{name}: {value!r} is not an integer from 10 to 100")
    return value


def install_trigger_sql(fillfactor: int) -> str:
    """The function and event trigger that give every new table `fillfactor`."""
    ff = _int("fillfactor", fillfactor)
    return f"""
CREATE FUNCTION {TRIGGER}() RETURNS event_trigger LANGUAGE plpgsql AS $fn$
DECLARE r record;
BEGIN
  FOR r IN SELECT * FROM pg_event_trigger_ddl_commands()
           WHERE object_type = 'table' AND command_tag = 'CREATE TABLE'
  LOOP
    EXECUTE format('ALTER TABLE %s SET (fillfactor = {ff})', r.object_identity);
  END LOOP;
END
$fn$;
CREATE EVENT TRIGGER {TRIGGER} ON ddl_command_end WHEN TAG IN ('CREATE TABLE')
  EXECUTE FUNCTION {TRIGGER}();
"""


def drop_trigger_sql() -> str:
    return f"DROP EVENT TRIGGER {TRIGGER}; DROP FUNCTION {TRIGGER}();"


def index_fillfactor_sql(fillfactor: int) -> str:
    """Sets `fillfactor` on every B-tree index of the user's schemas and rebuilds it."""
    ff = _int("index_fillfactor", fillfactor)
    return f"""
DO $do$
DECLARE r record;
BEGIN
  FOR r IN SELECT c.oid::regclass AS idx FROM pg_class c
           JOIN pg_namespace n ON n.oid = c.relnamespace
           JOIN pg_am a ON a.oid = c.relam
           WHERE c.relkind = 'i' AND a.amname = 'btree' AND {USER_SCHEMAS}
  LOOP
    EXECUTE format('ALTER INDEX %s SET (fillfactor = {ff})', r.idx);
    EXECUTE format('REINDEX INDEX %s', r.idx);
  END LOOP;
END
$do$;
"""


# one line per table and index of the user's schemas: name|kind|reloptions|bytes
RELATIONS_SQL = f"""
SELECT c.relname, c.relkind, coalesce(array_to_string(c.reloptions, ','), ''),
       pg_relation_size(c.oid)
       + CASE WHEN c.relkind = 'r' THEN pg_relation_size(c.oid, 'fsm')
              + pg_relation_size(c.oid, 'vm') ELSE 0 END
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'i') AND {USER_SCHEMAS}
ORDER BY c.relname
"""


def parse_relations(text: str) -> list[dict[str, object]]:
    """RELATIONS_SQL's psql -A -t output -> [{name, kind, reloptions, bytes}]."""
    out: list[dict[str, object]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        name, kind, options, nbytes = line.split("|")
        out.append(
            {
                "name": name,
                "kind": "table" if kind == "r" else "index",
                "reloptions": [o for o in options.split(",") if o],
                "bytes": int(nbytes),
            }
        )
    return out
