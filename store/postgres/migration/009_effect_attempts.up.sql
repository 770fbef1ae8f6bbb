-- Each call sent under a key records who sent it and until when it may
-- still be in flight: the lease epoch of its sender and the moment its
-- longest call (timeout and abandon grace) ends. A later holder of the run
-- waits until then before it asks the downstream, calls again or asks a
-- person, so a frozen sender's call cannot land after it decided.
ALTER TABLE effects ADD COLUMN epoch bigint NOT NULL DEFAULT 0;
ALTER TABLE effects ADD COLUMN in_flight_until bigint NOT NULL DEFAULT 0;
