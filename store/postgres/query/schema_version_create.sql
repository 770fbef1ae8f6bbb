-- One row per migration applied; the schema's version is the highest.
CREATE TABLE belay_schema_version (
    version    integer     NOT NULL PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
