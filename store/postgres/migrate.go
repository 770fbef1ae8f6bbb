package postgres

import (
	"context"
	"embed"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/internal/migration"
)

//go:embed migration/*.up.sql
var migrationFS embed.FS

var (
	//go:embed query/migrate_lock.sql
	migrateLockSQL string
	//go:embed query/schema_create.sql
	schemaCreateSQL string
	//go:embed query/schema_inspect.sql
	schemaInspectSQL string
	//go:embed query/schema_version_create.sql
	schemaVersionCreateSQL string
	//go:embed query/schema_version.sql
	schemaVersionSQL string
	//go:embed query/schema_version_insert.sql
	schemaVersionInsertSQL string
	//go:embed query/app_role.sql
	appRoleSQL string
)

// SchemaVersion is the schema version this package migrates a PostgreSQL schema
// to, and writes: the number of its latest migration.
func SchemaVersion() int {
	ms, err := migrations()
	if err != nil {
		// Misnumbered migration files, which the tests refuse; such a build
		// opens no store either.
		return 0
	}
	return len(ms)
}

// migrations returns the embedded migrations in order.
func migrations() ([]migration.File, error) {
	return migration.Load(migrationFS, "migration/*.up.sql")
}

// migrate brings the schema to the latest version and checks the
// application role's privileges, in one transaction under an advisory lock
// on the schema's name: of many processes opening a new schema at once, one
// migrates and the others find it done.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, migrateLockSQL, namedArgs{"schema": s.schema, "app_role": s.role}); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		version, err := s.inspect(ctx, tx, len(ms))
		if err != nil {
			return err
		}
		for _, m := range ms[version:] {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("%s: %w", m.Name, err)
			}
			if _, err := tx.Exec(ctx, schemaVersionInsertSQL, namedArgs{"version": m.Version, "name": m.Name}); err != nil {
				return fmt.Errorf("%s: %w", m.Name, err)
			}
		}
		if _, err := tx.Exec(ctx, appRoleSQL); err != nil {
			return fmt.Errorf("application role %s: %w", s.role, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("migrate schema %s: %w", s.schema, err)
	}
	return nil
}

// inspect creates the schema and its version table if they do not exist and
// returns its version, 0 for a new one, or an error that says what to do
// with a schema that is not ours or is newer than this binary.
func (s *Store) inspect(ctx context.Context, tx pgx.Tx, latest int) (int, error) {
	if _, err := tx.Exec(ctx, schemaCreateSQL); err != nil {
		return 0, fmt.Errorf("create schema: %w", err)
	}
	var versioned, relations int
	if err := tx.QueryRow(ctx, schemaInspectSQL, namedArgs{"schema": s.schema}).Scan(&versioned, &relations); err != nil {
		return 0, fmt.Errorf("inspect: %w", err)
	}
	switch {
	case versioned == 1:
	case relations == 0:
		if _, err := tx.Exec(ctx, schemaVersionCreateSQL); err != nil {
			return 0, fmt.Errorf("create version table: %w", err)
		}
		return 0, nil
	default:
		return 0, fmt.Errorf("schema %s holds another application's tables: pass another schema: %w", s.schema, store.ErrNotBelay)
	}
	var version int
	if err := tx.QueryRow(ctx, schemaVersionSQL).Scan(&version); err != nil {
		return 0, fmt.Errorf("schema version: %w", err)
	}
	if version > latest {
		return 0, fmt.Errorf("schema %s was written by a newer belay (schema %d, this binary knows %d): upgrade belay: %w",
			s.schema, version, latest, store.ErrSchemaTooNew)
	}
	return version, nil
}
