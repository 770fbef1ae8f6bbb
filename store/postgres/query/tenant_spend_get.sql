SELECT nano_usd FROM tenant_spend WHERE tenant = @tenant AND window_start = @window_start;
