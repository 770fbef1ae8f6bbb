-- Ticket T-1001: Ada Lovelace paid invoice INV-2026-004512 twice, two seconds
-- apart. INSERT OR IGNORE makes seeding safe to repeat, and never undoes what
-- a run already did to the world.

INSERT OR IGNORE INTO accounts (id, name, email, plan) VALUES
    ('ACC-1001', 'Ada Lovelace', 'ada@example.com', 'Pro, billed annually');

INSERT OR IGNORE INTO tickets (id, account_id, subject, body) VALUES
    ('T-1001', 'ACC-1001', 'Charged twice',
     'Hi, I was charged twice for my last invoice (INV-2026-004512). Can you fix it? - Ada');

INSERT OR IGNORE INTO invoices (id, account_id, description, amount_cents, currency, status, issued_on) VALUES
    ('INV-2026-004512', 'ACC-1001', 'Pro plan, annual subscription', 28800, 'USD', 'paid', '2026-03-02');

INSERT OR IGNORE INTO charges (id, invoice_id, amount_cents, duplicate_of, charged_at) VALUES
    ('CH-1', 'INV-2026-004512', 28800, '', '2026-03-02T09:14:03Z'),
    ('CH-2', 'INV-2026-004512', 28800, 'CH-1', '2026-03-02T09:14:05Z');

INSERT OR IGNORE INTO kb_articles (id, title, body, keywords) VALUES
    ('KB-14', 'Duplicate charges',
     'Duplicate charges are refunded in full to the original payment method within 5 to 10 business days. '
     || 'Refund the duplicate charge only, never the original one, and record the reason as an internal note on the ticket.',
     'charged twice double charge duplicate payment billed twice refund'),
    ('KB-7', 'Changing your plan',
     'You can move between plans at any time from Settings > Billing. An upgrade is prorated; a downgrade takes effect at the next renewal.',
     'upgrade downgrade switch plan change subscription'),
    ('KB-22', 'Resetting your password',
     'Use "Forgot password" on the sign-in page. The reset link expires after 30 minutes.',
     'password login sign in locked out reset');
