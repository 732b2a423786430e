-- blocklab results database, schema version 3 (PostgreSQL): a run is known by
-- (experiment, host, variant_id, round, copy_index); see schema_v3_run_identity.sql.
-- Applied inside the migration's transaction, under its advisory lock.
ALTER TABLE runs ADD COLUMN IF NOT EXISTS host TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN IF NOT EXISTS copy_index INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs DROP CONSTRAINT IF EXISTS runs_experiment_variant_id_round_key;
ALTER TABLE runs ADD CONSTRAINT runs_identity UNIQUE (experiment, host, variant_id, round, copy_index);
