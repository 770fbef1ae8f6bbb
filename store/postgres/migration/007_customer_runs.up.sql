-- An approval card shows what Belay already did for the same customer in
-- other runs. This index finds a customer's runs, and effects_run their
-- effects, so that the history reads one customer's rows and never the
-- tenant's whole ledger. Neither column changes after a run is created:
-- checkpoints stay HOT updates. Building it holds off writes to runs until
-- the migration commits, as every migration's DDL does.
CREATE INDEX runs_user ON runs (tenant, user_id);
