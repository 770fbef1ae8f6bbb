-- The support desk's world: what the knowledge base, billing, the mailbox and
-- the CRM hold. Every statement is idempotent: each process that opens the
-- file runs this script.

CREATE TABLE IF NOT EXISTS kb_articles (
    id       TEXT PRIMARY KEY,
    title    TEXT NOT NULL,
    body     TEXT NOT NULL,
    -- Words customers use for the problem, searched with the title and body.
    keywords TEXT NOT NULL DEFAULT ''
);

CREATE TABLE IF NOT EXISTS accounts (
    id    TEXT PRIMARY KEY,
    name  TEXT NOT NULL,
    email TEXT NOT NULL UNIQUE,
    plan  TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS tickets (
    id         TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts (id),
    subject    TEXT NOT NULL,
    body       TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS invoices (
    id           TEXT PRIMARY KEY,
    account_id   TEXT NOT NULL REFERENCES accounts (id),
    description  TEXT NOT NULL,
    amount_cents INTEGER NOT NULL,
    currency     TEXT NOT NULL,
    status       TEXT NOT NULL,
    issued_on    TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS charges (
    id           TEXT PRIMARY KEY,
    invoice_id   TEXT NOT NULL REFERENCES invoices (id),
    amount_cents INTEGER NOT NULL,
    -- The charge this one repeats by mistake; empty for a legitimate charge.
    duplicate_of TEXT NOT NULL DEFAULT '',
    charged_at   TEXT NOT NULL
);

-- At most one refund per charge: billing answers a second request for the
-- same charge with the first refund. seq numbers the ids (RF-00001, ...).
CREATE TABLE IF NOT EXISTS refunds (
    seq          INTEGER PRIMARY KEY,
    id           TEXT NOT NULL UNIQUE,
    charge_id    TEXT NOT NULL UNIQUE REFERENCES charges (id),
    amount_cents INTEGER NOT NULL
);

-- Every idempotency key a refund request carried, with the refund it got, so
-- a caller that lost the response can ask by key.
CREATE TABLE IF NOT EXISTS refund_keys (
    key       TEXT PRIMARY KEY,
    refund_id TEXT NOT NULL REFERENCES refunds (id)
);

-- The mailbox's outbox. A message sent with a key is sent once per key.
CREATE TABLE IF NOT EXISTS emails (
    seq             INTEGER PRIMARY KEY,
    id              TEXT NOT NULL UNIQUE,
    idempotency_key TEXT UNIQUE, -- NULL when sent without a key
    to_addr         TEXT NOT NULL,
    subject         TEXT NOT NULL,
    body            TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS emails_to_addr ON emails (to_addr);

-- CRM notes have no idempotency key: every call adds one.
CREATE TABLE IF NOT EXISTS crm_notes (
    seq       INTEGER PRIMARY KEY,
    id        TEXT NOT NULL UNIQUE,
    ticket_id TEXT NOT NULL REFERENCES tickets (id),
    text      TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS crm_notes_ticket_id ON crm_notes (ticket_id);

-- Failures to inject, shared by every process that opens the file: the next
-- `remaining` calls of the named kind fail; `fired` counts those that did.
CREATE TABLE IF NOT EXISTS faults (
    name      TEXT PRIMARY KEY,
    remaining INTEGER NOT NULL,
    fired     INTEGER NOT NULL DEFAULT 0
);
