-- A canceled run's pending waits are closed at once, as canceled, in the
-- cancel's transaction.
--
-- The waits table's CHECK on status gains canceled. As in 013, the CHECK
-- only widens, which every row already meets, so its text is changed in the
-- schema rather than the table rebuilt; the CREATE INDEX below changes the
-- schema cookie, so every other connection reloads the schema.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
SET sql = replace(sql, '''answered'', ''expired'')', '''answered'', ''expired'', ''canceled'')')
WHERE type = 'table' AND name = 'waits' AND instr(sql, '''canceled''') = 0;
PRAGMA writable_schema = RESET;

-- A tenant's pending waits, page by page: the questions people answer.
CREATE INDEX waits_tenant_status ON waits (tenant, status, created_at);

PRAGMA user_version = 18;
