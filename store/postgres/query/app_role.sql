-- The application role runs the requests of one tenant. It owns nothing,
-- bypasses nothing, and may read, insert and update (never delete) the
-- tables of the schema, subject to their row-level security. The connecting
-- role, which owns the tables, switches to it per transaction, so it must be
-- a member. Every Open checks this; it grants only what is missing.
DO $$
DECLARE
    app   text := current_setting('belay.app_role');
    sch   text := current_setting('belay.schema');
    owner_role text := current_user;
    tbl   text;
BEGIN
    IF app = owner_role THEN
        RAISE EXCEPTION 'belay connects as %, its application role: connect as the role that owns the tables', app;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = app) THEN
        -- Roles belong to the cluster: schemas migrating at once must not
        -- both create it.
        PERFORM pg_advisory_xact_lock(hashtext('belay role'), hashtext(app));
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = app) THEN
            EXECUTE format('CREATE ROLE %I NOLOGIN NOSUPERUSER NOBYPASSRLS NOINHERIT', app);
        END IF;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = app AND (rolsuper OR rolbypassrls)) THEN
        RAISE EXCEPTION 'role % is a superuser or bypasses row-level security: it cannot be belay''s application role', app;
    END IF;
    -- A member of the owner would act as the owner, which row-level
    -- security does not confine.
    IF pg_has_role(app, owner_role, 'USAGE') THEN
        RAISE EXCEPTION 'role % has the privileges of %, which owns the tables: it cannot be belay''s application role', app, owner_role;
    END IF;
    IF NOT pg_has_role(owner_role, app, 'MEMBER') THEN
        PERFORM pg_advisory_xact_lock(hashtext('belay role'), hashtext(app));
        EXECUTE format('GRANT %I TO %I', app, owner_role);
    END IF;
    IF NOT has_schema_privilege(app, sch, 'USAGE') THEN
        EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', sch, app);
    END IF;
    FOR tbl IN
        SELECT c.relname
        FROM pg_class c
        JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = sch AND c.relkind = 'r' AND c.relname <> 'belay_schema_version'
            AND NOT has_table_privilege(app, c.oid, 'SELECT, INSERT, UPDATE')
    LOOP
        EXECUTE format('GRANT SELECT, INSERT, UPDATE ON %I.%I TO %I', sch, tbl, app);
    END LOOP;
END
$$;
