INSERT INTO belay_schema_version (version, name) VALUES (@version, @name);
