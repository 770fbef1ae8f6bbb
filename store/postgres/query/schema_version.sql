SELECT coalesce(max(version), 0) FROM belay_schema_version;
