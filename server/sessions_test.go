package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/belayrun/belay/store"
)

// withClock returns a copy of f whose requests go to a new server over st,
// for f's runtime, whose clock reads now and whose log is the copy's logs.
func (f *fixture) withClock(st store.AccessStore, now time.Time) *fixture {
	f.t.Helper()
	logs := &syncBuffer{}
	srv, err := New(Config{Runtime: f.rt, Store: st, Logger: slog.New(slog.NewJSONHandler(logs, nil)),
		now: func() time.Time { return now }})
	if err != nil {
		f.t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	f.t.Cleanup(hs.Close)
	g := *f
	g.st, g.srv, g.http, g.logs = st, srv, hs, logs
	return &g
}

// session creates a console session of a new key of tenant that expires at
// expiresAt, as if someone had signed in a day before.
func (f *fixture) session(tenant string, expiresAt time.Time) store.Session {
	f.t.Helper()
	k, err := CreateKey(context.Background(), f.st, tenant, "maya", []store.Role{store.RoleApprover}, expiresAt.Add(-24*time.Hour))
	if err != nil {
		f.t.Fatal(err)
	}
	sess := store.Session{TokenHash: hashSecret(randomHex(32)), KeyID: k.Key.ID, Tenant: tenant,
		CreatedAt: k.Key.CreatedAt, ExpiresAt: expiresAt}
	if err := f.st.CreateSession(context.Background(), sess); err != nil {
		f.t.Fatal(err)
	}
	return sess
}

func TestSignInDeletesExpiredSessions(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, f *fixture) {
		// Far from the wall clock: the purge must go by the server's clock.
		now := time.Date(2031, 6, 1, 9, 0, 0, 0, time.UTC)
		f = f.withClock(f.st, now)
		expired := []store.Session{f.session("acme", now.Add(-time.Minute)), f.session("globex", now.Add(-time.Hour)), f.session("acme", now)}
		live := []store.Session{f.session("acme", now.Add(time.Minute)), f.session("globex", now.Add(time.Hour))}

		c := f.signIn(f.key("acme", "ops", store.RoleApprover))
		if status, _ := get(t, c, f.http.URL+"/console/"); status != http.StatusOK {
			t.Errorf("the console after signing in: %d", status)
		}
		ctx := context.Background()
		for _, sess := range expired {
			// Asked before it expired, a session whose row stayed is found.
			if _, err := f.st.Session(ctx, sess.TokenHash, sess.ExpiresAt.Add(-time.Second)); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("session of %s that expired at %s, after a sign-in at %s: %v, want ErrNotFound", sess.Tenant, sess.ExpiresAt, now, err)
			}
		}
		for _, sess := range live {
			if _, err := f.st.Session(ctx, sess.TokenHash, now); err != nil {
				t.Errorf("session of %s expiring at %s, after a sign-in at %s: %v", sess.Tenant, sess.ExpiresAt, now, err)
			}
		}
	})
}

// purgeFails is a store whose purge of expired sessions fails.
type purgeFails struct{ store.AccessStore }

func (purgeFails) DeleteExpiredSessions(context.Context, time.Time) (int, error) {
	return 0, errors.New("database is locked")
}

func TestSignInWhenThePurgeFails(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	now := time.Date(2031, 6, 1, 9, 0, 0, 0, time.UTC)
	f = f.withClock(purgeFails{f.st}, now)
	expired := f.session("acme", now.Add(-time.Minute))

	c := f.signIn(f.key("acme", "maya", store.RoleApprover))
	if status, _ := get(t, c, f.http.URL+"/console/"); status != http.StatusOK {
		t.Errorf("the console after signing in: %d", status)
	}
	if logs := f.logs.String(); !strings.Contains(logs, "delete expired sessions") || !strings.Contains(logs, "database is locked") {
		t.Errorf("the failed purge is not logged:\n%s", logs)
	}
	// Left to the next sign-in.
	if _, err := f.st.Session(context.Background(), expired.TokenHash, expired.ExpiresAt.Add(-time.Second)); err != nil {
		t.Errorf("the expired session after a failed purge: %v", err)
	}
}
