-- sensitive holds which arguments of the run's tools are secret, as the
-- agent version that started the run declared them (JSON: tool name to its
-- sensitive fields and the fields its schema declares). Every reader of the
-- run redacts by it, the CLI too, which has no agent code. Written once, by
-- the insert: no checkpoint touches it. NULL for the runs created before
-- it, whose secrets are not known. A nullable column without a default is
-- added without rewriting the table.
ALTER TABLE runs ADD COLUMN sensitive bytea;
