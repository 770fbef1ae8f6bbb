-- A canceled run's pending waits are closed at once, as canceled, in the
-- cancel's transaction.
ALTER TABLE waits DROP CONSTRAINT waits_status_check;
ALTER TABLE waits ADD CONSTRAINT waits_status_check CHECK (status IN ('pending', 'answered', 'expired', 'canceled'));
