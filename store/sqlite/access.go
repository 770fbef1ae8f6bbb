package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	_ "embed"

	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/internal/sqlrow"
)

var _ store.AccessStore = (*Store)(nil)

var (
	//go:embed query/api_key_insert.sql
	apiKeyInsertSQL string
	//go:embed query/api_key_get.sql
	apiKeyGetSQL string
	//go:embed query/api_key_list.sql
	apiKeyListSQL string
	//go:embed query/api_key_revoke.sql
	apiKeyRevokeSQL string
	//go:embed query/session_insert.sql
	sessionInsertSQL string
	//go:embed query/session_get.sql
	sessionGetSQL string
	//go:embed query/session_delete.sql
	sessionDeleteSQL string
	//go:embed query/session_delete_key.sql
	sessionDeleteKeySQL string
	//go:embed query/session_delete_expired.sql
	sessionDeleteExpiredSQL string
)

// CreateAPIKey inserts a key; an ID that exists fails.
func (s *Store) CreateAPIKey(ctx context.Context, k store.APIKey) error {
	err := s.writer.do(ctx, 0, func(ctx context.Context, tx *writeTx) error {
		_, err := tx.ExecContext(ctx, apiKeyInsertSQL,
			sql.Named("id", k.ID),
			sql.Named("tenant", k.Tenant),
			sql.Named("name", k.Name),
			sql.Named("roles", joinRoles(k.Roles)),
			sql.Named("secret_hash", k.SecretHash),
			sql.Named("created_at", sqlrow.Nanos(k.CreatedAt)),
		)
		return err
	})
	if err != nil {
		return fmt.Errorf("create api key %s: %w", k.ID, err)
	}
	return nil
}

// APIKey returns a key by ID in any tenant, revoked or not.
func (s *Store) APIKey(ctx context.Context, id string) (store.APIKey, error) {
	k, err := sqlrow.APIKey(s.read.QueryRowContext(ctx, apiKeyGetSQL, sql.Named("id", id)), new(roleList))
	if errors.Is(err, sql.ErrNoRows) {
		return store.APIKey{}, fmt.Errorf("get api key %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.APIKey{}, fmt.Errorf("get api key %s: %w", id, err)
	}
	return k, nil
}

// APIKeys lists a tenant's keys ("" for every tenant) in creation order.
func (s *Store) APIKeys(ctx context.Context, tenant string) ([]store.APIKey, error) {
	ks, err := readAll(ctx, s.read, scanAPIKey, apiKeyListSQL, sql.Named("tenant", tenant))
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	return ks, nil
}

// RevokeAPIKey revokes a key of the tenant and ends its sessions. The tenant
// must match exactly.
func (s *Store) RevokeAPIKey(ctx context.Context, tenant, id string, now time.Time) error {
	err := s.writer.do(ctx, 0, func(ctx context.Context, tx *writeTx) error {
		res, err := tx.ExecContext(ctx, apiKeyRevokeSQL,
			sql.Named("id", id),
			sql.Named("tenant", tenant),
			sql.Named("now", sqlrow.Nanos(now)),
		)
		if err != nil {
			return err
		}
		if err := mustFind(res); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, sessionDeleteKeySQL, sql.Named("key_id", id))
		return err
	})
	if err != nil {
		return fmt.Errorf("revoke api key %s: %w", id, err)
	}
	return nil
}

// CreateSession inserts a session of an existing key.
func (s *Store) CreateSession(ctx context.Context, sess store.Session) error {
	err := s.writer.do(ctx, 0, func(ctx context.Context, tx *writeTx) error {
		_, err := tx.ExecContext(ctx, sessionInsertSQL,
			sql.Named("token_hash", sess.TokenHash),
			sql.Named("key_id", sess.KeyID),
			sql.Named("tenant", sess.Tenant),
			sql.Named("created_at", sqlrow.Nanos(sess.CreatedAt)),
			sql.Named("expires_at", sqlrow.Nanos(sess.ExpiresAt)),
		)
		return err
	})
	if err != nil {
		return fmt.Errorf("create session of key %s: %w", sess.KeyID, err)
	}
	return nil
}

// Session returns a session that has not expired at now and whose key is
// not revoked.
func (s *Store) Session(ctx context.Context, tokenHash string, now time.Time) (store.Session, error) {
	sess, err := sqlrow.Session(s.read.QueryRowContext(ctx, sessionGetSQL,
		sql.Named("token_hash", tokenHash),
		sql.Named("now", sqlrow.Nanos(now)),
	))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Session{}, fmt.Errorf("get session: %w", store.ErrNotFound)
	}
	if err != nil {
		return store.Session{}, fmt.Errorf("get session: %w", err)
	}
	return sess, nil
}

// EndSession deletes a session, if it exists.
func (s *Store) EndSession(ctx context.Context, tokenHash string) error {
	err := s.writer.do(ctx, 0, func(ctx context.Context, tx *writeTx) error {
		_, err := tx.ExecContext(ctx, sessionDeleteSQL, sql.Named("token_hash", tokenHash))
		return err
	})
	if err != nil {
		return fmt.Errorf("end session: %w", err)
	}
	return nil
}

// DeleteExpiredSessions deletes the sessions of every tenant that have
// expired at now.
func (s *Store) DeleteExpiredSessions(ctx context.Context, now time.Time) (int, error) {
	var n int64
	err := s.writer.do(ctx, 0, func(ctx context.Context, tx *writeTx) error {
		res, err := tx.ExecContext(ctx, sessionDeleteExpiredSQL, sql.Named("now", sqlrow.Nanos(now)))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("delete expired sessions: %w", err)
	}
	return int(n), nil
}

// mustFind turns a statement that matched no row into ErrNotFound.
func mustFind(res sql.Result) error {
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return store.ErrNotFound
	}
	return nil
}

// roleList reads an API key's roles, which SQLite stores comma-separated
// (no role has a comma in its name); none is nil.
type roleList string

func (l *roleList) Dest() any { return (*string)(l) }

func (l *roleList) Strings() ([]string, error) {
	if *l == "" {
		return nil, nil
	}
	return strings.Split(string(*l), ","), nil
}

func scanAPIKey(row sqlrow.Scanner) (store.APIKey, error) { return sqlrow.APIKey(row, new(roleList)) }

func joinRoles(rs []store.Role) string {
	ss := make([]string, len(rs))
	for i, r := range rs {
		ss[i] = string(r)
	}
	return strings.Join(ss, ",")
}
