INSERT INTO spend_caps (tenant, period, max_nano_usd)
VALUES (@tenant, @period, @max_nano_usd)
ON CONFLICT (tenant) DO UPDATE SET period = excluded.period, max_nano_usd = excluded.max_nano_usd;
