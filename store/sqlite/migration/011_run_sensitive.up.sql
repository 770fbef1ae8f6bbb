-- sensitive holds which arguments of the run's tools are secret, as the
-- agent version that started the run declared them (JSON: tool name to its
-- sensitive fields and the fields its schema declares). Every reader of the
-- run redacts by it, the CLI too, which has no agent code. Written once, by
-- the insert: no checkpoint touches it. NULL for the runs created before
-- it, whose secrets are not known.
ALTER TABLE runs ADD COLUMN sensitive BLOB;

PRAGMA user_version = 11;
