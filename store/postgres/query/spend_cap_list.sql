SELECT tenant, period, max_nano_usd FROM spend_caps ORDER BY tenant;
