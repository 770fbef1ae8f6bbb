INSERT INTO tenant_spend (tenant, window_start, nano_usd)
VALUES (@tenant, @window_start, @nano_usd)
ON CONFLICT (tenant, window_start) DO UPDATE SET nano_usd = tenant_spend.nano_usd + excluded.nano_usd;
