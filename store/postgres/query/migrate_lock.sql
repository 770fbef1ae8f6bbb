-- Migrations of a schema run one at a time: the others wait here, then find
-- the work done. The settings name the schema and the application role to
-- the statements that follow, which cannot take parameters.
SELECT pg_advisory_xact_lock(hashtext('belay migrate'), hashtext(@schema::text)),
    set_config('belay.schema', @schema, true),
    set_config('belay.app_role', @app_role, true);
