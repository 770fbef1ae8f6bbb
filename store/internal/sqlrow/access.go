package sqlrow

import (
	"fmt"

	"github.com/belayrun/belay/store"
)

type apiKeyRaw struct {
	roles            List
	created, revoked int64
}

func apiKeyColumns(k *store.APIKey, x *apiKeyRaw, c *columns) {
	c.add("id", &k.ID)
	c.add("tenant", &k.Tenant)
	c.add("name", &k.Name)
	c.add("roles", x.roles.Dest())
	c.add("secret_hash", &k.SecretHash)
	c.add("created_at", &x.created)
	c.add("revoked_at", &x.revoked)
}

func decodeAPIKey(k *store.APIKey, x *apiKeyRaw) error {
	rs, err := x.roles.Strings()
	if err != nil {
		return fmt.Errorf("roles of key %s: %w", k.ID, err)
	}
	if rs != nil {
		k.Roles = make([]store.Role, len(rs))
		for i, r := range rs {
			k.Roles[i] = store.Role(r)
		}
	}
	k.CreatedAt, k.RevokedAt = Time(x.created), Time(x.revoked)
	return nil
}

// APIKey reads the columns of a "-- columns: api_key" query, the roles
// through the driver's List.
func APIKey(row Scanner, roles List) (store.APIKey, error) {
	return scanRow(row, &apiKeyRaw{roles: roles}, apiKeyColumns, decodeAPIKey)
}

type sessionRaw struct {
	created, expires int64
}

func sessionColumns(s *store.Session, x *sessionRaw, c *columns) {
	c.add("token_hash", &s.TokenHash)
	c.add("key_id", &s.KeyID)
	c.add("tenant", &s.Tenant)
	c.add("created_at", &x.created)
	c.add("expires_at", &x.expires)
}

func decodeSession(s *store.Session, x *sessionRaw) error {
	s.CreatedAt, s.ExpiresAt = Time(x.created), Time(x.expires)
	return nil
}

// Session reads the columns of a "-- columns: session" query.
func Session(row Scanner) (store.Session, error) {
	return scanRow(row, new(sessionRaw), sessionColumns, decodeSession)
}

type webhookRaw struct {
	kinds             List
	created, disabled int64
}

func webhookColumns(w *store.Webhook, x *webhookRaw, c *columns) {
	c.add("id", &w.ID)
	c.add("tenant", &w.Tenant)
	c.add("url", &w.URL)
	c.add("secret", &w.Secret)
	c.add("kinds", x.kinds.Dest())
	c.add("created_at", &x.created)
	c.add("disabled_at", &x.disabled)
}

func decodeWebhook(w *store.Webhook, x *webhookRaw) (err error) {
	if w.Kinds, err = x.kinds.Strings(); err != nil {
		return fmt.Errorf("kinds of %s: %w", w.ID, err)
	}
	w.CreatedAt, w.DisabledAt = Time(x.created), Time(x.disabled)
	return nil
}

// Webhook reads the columns of a "-- columns: webhook" query, the kinds
// through the driver's List.
func Webhook(row Scanner, kinds List) (store.Webhook, error) {
	return scanRow(row, &webhookRaw{kinds: kinds}, webhookColumns, decodeWebhook)
}
