package postgres

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/belayrun/belay/store"
)

// tenantTables are the tables row-level security confines.
var tenantTables = []string{"runs", "journal", "effects", "outbox", "approvals", "waits", "signals", "kill_switches",
	"api_keys", "sessions", "webhooks", "deliveries", "run_lineage", "schedules", "spend_caps", "tenant_spend"}

// rlsFixture gives tenants a and b a run each with a row in every tenant
// table.
func rlsFixture(t *testing.T, s *Store) {
	t.Helper()
	ctx := t.Context()
	for _, tenant := range []string{"a", "b"} {
		id := "run-" + tenant
		if _, _, err := s.CreateRun(ctx, store.CreateRunParams{ID: id, Tenant: tenant, Agent: "x", Now: t0,
			Events: []store.Event{{Type: "created", Time: t0}}}); err != nil {
			t.Fatal(err)
		}
		runs, err := s.ClaimRuns(ctx, store.ClaimRunsParams{Owner: "w", Now: t0, TTL: time.Hour, Limit: 1})
		if err != nil || len(runs) != 1 {
			t.Fatalf("ClaimRuns: %v, %v", ids(runs), err)
		}
		f := store.Fence{RunID: id, Owner: "w", Epoch: runs[0].LeaseEpoch}
		if _, _, err := s.BeginEffect(ctx, store.BeginEffectParams{Fence: f, Now: t0,
			Effect: store.Effect{Tenant: tenant, Key: "k", Tool: "refund", ArgsHash: "h"}}); err != nil {
			t.Fatal(err)
		}
		if err := s.Checkpoint(ctx, store.CheckpointParams{Fence: f, Now: t0,
			Run:      store.RunUpdate{Status: store.StatusRunning, Messages: 1, LeaseExpires: t0.Add(time.Hour)},
			Messages: []store.Message{{Seq: 0, Role: "user", Content: []byte(`"hi"`), CreatedAt: t0}},
			Outbox:   []store.OutboxMessage{{Kind: "k", Payload: json.RawMessage(`{}`)}},
			Approvals: []store.Approval{{ID: "ap-" + tenant, Tool: "refund", Args: json.RawMessage(`{}`), ArgsHash: "h",
				Binding: "b", ExpiresAt: t0.Add(time.Hour)}},
			Waits: []store.Wait{{ID: "wt-" + tenant, ToolUseID: "toolu_1", Kind: store.WaitInput, Name: "ask_user",
				Prompt: json.RawMessage(`{}`), Binding: "b", ExpiresAt: t0.Add(time.Hour)}},
		}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Signal(ctx, store.SignalParams{Tenant: tenant, RunID: id, ID: "sg-" + tenant, Name: "e",
			Payload: json.RawMessage(`{}`), Now: t0}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.PutSchedule(ctx, store.Schedule{Tenant: tenant, Name: "nightly", Agent: "a", Spec: "@daily",
			Input: "go", Overlap: store.OverlapSkip, Missed: store.MissedSkip, NextAt: t0.Add(time.Hour), CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		if err := s.SetKillSwitch(ctx, store.KillSwitchParams{Tenant: tenant, Reason: "off", Now: t0}); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateAPIKey(ctx, store.APIKey{ID: "key-" + tenant, Tenant: tenant, Name: "n",
			Roles: []store.Role{store.RoleAdmin}, SecretHash: "h", CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateSession(ctx, store.Session{TokenHash: "tok-" + tenant, KeyID: "key-" + tenant, Tenant: tenant,
			CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateWebhook(ctx, store.Webhook{ID: "wh-" + tenant, Tenant: tenant, URL: "https://example.com/" + tenant,
			Secret: "s", CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		if err := s.SetSpendCap(ctx, store.SetSpendCapParams{Cap: store.SpendCap{Tenant: tenant, Period: store.SpendDaily,
			MaxNanoUSD: 1e9}, Now: t0}); err != nil {
			t.Fatal(err)
		}
		if err := s.AddTenantSpend(ctx, store.AddTenantSpendParams{Tenant: tenant, Window: t0, NanoUSD: 1}); err != nil {
			t.Fatal(err)
		}
	}
	// A lineage row for each tenant's run, as a fork of it would have.
	if _, err := s.pool.Exec(ctx, `INSERT INTO run_lineage (tenant, run_id, parent_run_id, at_step, forked_by, reason, created_at)
		VALUES ('a', 'run-a', 'p', 0, 'x', '', 0), ('b', 'run-b', 'p', 0, 'x', '', 0)`); err != nil {
		t.Fatal(err)
	}
	// Fans each tenant's notification out to its webhook.
	if ds, err := s.ClaimDeliveries(ctx, store.ClaimDeliveriesParams{Owner: "sender", Now: t0, TTL: time.Minute, Limit: 10}); err != nil || len(ds) != 2 {
		t.Fatalf("ClaimDeliveries: %d deliveries, %v; want 2", len(ds), err)
	}
}

// tenantsIn returns the tenants whose rows table shows in tx.
func tenantsIn(t *testing.T, tx pgx.Tx, table string) []string {
	t.Helper()
	// No WHERE: only row-level security can hide a row.
	rows, err := tx.Query(t.Context(), "SELECT DISTINCT tenant FROM "+table+" ORDER BY tenant")
	if err != nil {
		t.Fatalf("select from %s: %v", table, err)
	}
	tenants, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("select from %s: %v", table, err)
	}
	return tenants
}

// A transaction of the application role scoped to tenant a sees, changes and
// adds rows of tenant a only, whatever its WHERE clauses say.
func TestRowLevelSecurity(t *testing.T) {
	t.Parallel()
	s := openTest(t, Config{})
	rlsFixture(t, s)
	ctx := t.Context()

	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET LOCAL ROLE belay_app"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT set_config('belay.tenant', 'a', true)"); err != nil {
		t.Fatal(err)
	}
	for _, table := range tenantTables {
		want := []string{"a"}
		if got := tenantsIn(t, tx, table); !slices.Equal(got, want) {
			t.Errorf("tenant a sees the rows of %v in %s, want %v", got, table, want)
		}
	}
	tag, err := tx.Exec(ctx, "UPDATE runs SET final = 'changed'")
	if err != nil {
		t.Fatal(err)
	}
	if tag.RowsAffected() != 1 {
		t.Errorf("UPDATE without WHERE changed %d runs, want tenant a's 1", tag.RowsAffected())
	}
	for _, q := range []string{
		"INSERT INTO runs (id, tenant, user_id, client_request_id, agent, agent_version, input, dry_run, status, created_at, updated_at) " +
			"VALUES ('intruder', 'b', '', '', 'x', '', '', false, 'queued', 0, 0)",
		"INSERT INTO journal (tenant, run_id, step, at, first_message, messages, first_event, events, body) " +
			"VALUES ('b', 'run-b', 0, 0, 0, 0, 1, 1, convert_to('{\"m\":[],\"e\":[{\"y\":\"forged\"}]}', 'UTF8'))",
		"INSERT INTO kill_switches (tenant, engaged, reason, updated_at) VALUES ('', true, 'global', 0)",
		"INSERT INTO api_keys (id, tenant, name, roles, secret_hash, created_at) VALUES ('forged', 'b', 'x', '{admin}', 'h', 0)",
		"INSERT INTO webhooks (id, tenant, url, secret, kinds, created_at) VALUES ('forged', 'b', 'https://evil', 's', '{}', 0)",
	} {
		if _, err := tx.Exec(ctx, "SAVEPOINT s"); err != nil {
			t.Fatal(err)
		}
		var pe *pgconn.PgError
		if _, err := tx.Exec(ctx, q); !errors.As(err, &pe) || pe.Code != "42501" {
			t.Errorf("%s: %v, want a row-level security violation (42501)", q, err)
		}
		if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT s"); err != nil {
			t.Fatal(err)
		}
	}
	// History is append-only for the application role.
	if _, err := tx.Exec(ctx, "SAVEPOINT s"); err != nil {
		t.Fatal(err)
	}
	var pe *pgconn.PgError
	if _, err := tx.Exec(ctx, "DELETE FROM journal"); !errors.As(err, &pe) || pe.Code != "42501" {
		t.Errorf("DELETE as the application role: %v, want permission denied (42501)", err)
	}
	if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT s"); err != nil {
		t.Fatal(err)
	}

	// Without a tenant, the application role sees nothing.
	if _, err := tx.Exec(ctx, "SELECT set_config('belay.tenant', '', true)"); err != nil {
		t.Fatal(err)
	}
	for _, table := range tenantTables {
		if table == "kill_switches" {
			continue // the global switch, if any, is everyone's
		}
		if got := tenantsIn(t, tx, table); len(got) != 0 {
			t.Errorf("the application role without a tenant sees the rows of %v in %s", got, table)
		}
	}
}

// The store's own scope does what the raw SQL above does, within one
// pipelined implicit transaction, and leaves the connection as it found it.
func TestStoreScope(t *testing.T) {
	t.Parallel()
	s := openTest(t, Config{MaxConns: 1})
	rlsFixture(t, s)
	ctx := t.Context()

	// Prepared and cached on the pool's one connection as the owner first:
	// run as the application role, the plan must be made again under its
	// policies.
	const allRuns = "SELECT id FROM runs ORDER BY id"
	rows, err := s.pool.Query(ctx, allRuns)
	if err != nil {
		t.Fatal(err)
	}
	if all, err := pgx.CollectRows(rows, pgx.RowTo[string]); err != nil || len(all) != 2 {
		t.Fatalf("the owner sees runs %v, %v; want both", all, err)
	}

	var (
		user, tenant string
		seen         []string
	)
	b := s.batch("b")
	b.Queue("SELECT current_user, current_setting('belay.tenant')").QueryRow(func(row pgx.Row) error {
		return row.Scan(&user, &tenant)
	})
	b.Queue(allRuns).Query(func(rows pgx.Rows) (err error) {
		seen, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err := s.send(ctx, b); err != nil {
		t.Fatal(err)
	}
	if user != "belay_app" || tenant != "b" || !slices.Equal(seen, []string{"run-b"}) {
		t.Errorf("scoped batch: user %q, tenant %q, runs %v; want belay_app, b, [run-b]", user, tenant, seen)
	}

	// The one connection of the pool is back to the owner, seeing all.
	var owner bool
	var n int
	if err := s.pool.QueryRow(ctx, "SELECT current_user <> 'belay_app', (SELECT count(*) FROM runs)").Scan(&owner, &n); err != nil {
		t.Fatal(err)
	}
	if !owner || n != 2 {
		t.Errorf("after a scoped batch: owner %v, %d runs visible; want the owner seeing 2", owner, n)
	}

	// Reads with a tenant see only its rows through the store's methods too.
	if _, err := s.GetRun(ctx, "a", "run-b"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetRun of b's run as a: %v, want ErrNotFound", err)
	}
	if es, err := s.Effects(ctx, "a", "run-b"); err != nil || len(es) != 0 {
		t.Errorf("Effects of b's run as a: %v, %v", es, err)
	}
	// An effect written as a tenant cannot name another tenant's run.
	_, _, err = s.BeginEffect(ctx, store.BeginEffectParams{Fence: store.Fence{RunID: "run-b", Owner: "w", Epoch: 2}, Now: t0,
		Effect: store.Effect{Tenant: "a", Key: "k2", Tool: "refund", ArgsHash: "h"}})
	if !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("BeginEffect as a on b's run: %v, want ErrLeaseLost", err)
	}

	// Keys, sessions, webhooks and deliveries too.
	if ks, err := s.APIKeys(ctx, "a"); err != nil || len(ks) != 1 || ks[0].ID != "key-a" {
		t.Errorf("APIKeys as a: %v, %v; want [key-a]", keyIDs(ks), err)
	}
	if ws, err := s.Webhooks(ctx, "a"); err != nil || len(ws) != 1 || ws[0].ID != "wh-a" {
		t.Errorf("Webhooks as a: %+v, %v; want wh-a alone", ws, err)
	}
	if ds, err := s.Deliveries(ctx, store.ListDeliveriesParams{Tenant: "a"}); err != nil || len(ds) != 1 || ds[0].Tenant != "a" {
		t.Errorf("Deliveries as a: %+v, %v; want a's one", ds, err)
	}
	if err := s.RevokeAPIKey(ctx, "a", "key-b", t0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RevokeAPIKey as a of b's key: %v, want ErrNotFound", err)
	}
	if err := s.DisableWebhook(ctx, "a", "wh-b", t0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("DisableWebhook as a of b's webhook: %v, want ErrNotFound", err)
	}
	if err := s.CreateSession(ctx, store.Session{TokenHash: "tok-forged", KeyID: "key-b", Tenant: "a", CreatedAt: t0,
		ExpiresAt: t0.Add(time.Hour)}); err == nil {
		t.Error("CreateSession as a under b's key: no error")
	}
	if _, err := s.CancelRun(ctx, store.CancelRunParams{Tenant: "a", RunID: "run-b", By: "x", Now: t0}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("CancelRun as a of b's run: %v, want ErrNotFound", err)
	}
}

func keyIDs(ks []store.APIKey) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.ID
	}
	return out
}

// The application role owns nothing and bypasses nothing.
func TestAppRole(t *testing.T) {
	t.Parallel()
	s := openTest(t, Config{})
	ctx := t.Context()
	var super, bypass, login bool
	if err := s.pool.QueryRow(ctx, "SELECT rolsuper, rolbypassrls, rolcanlogin FROM pg_roles WHERE rolname = $1", s.role).
		Scan(&super, &bypass, &login); err != nil {
		t.Fatal(err)
	}
	if super || bypass || login {
		t.Errorf("role %s: superuser %v, bypassrls %v, login %v; want none", s.role, super, bypass, login)
	}
	rows, err := s.pool.Query(ctx, `
		SELECT c.relname, pg_get_userbyid(c.relowner), c.relrowsecurity
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relkind = 'r' ORDER BY c.relname`, s.schema)
	if err != nil {
		t.Fatal(err)
	}
	type table struct {
		Name  string
		Owner string
		RLS   bool
	}
	tables, err := pgx.CollectRows(rows, pgx.RowToStructByPos[table])
	if err != nil {
		t.Fatal(err)
	}
	var secured []string
	for _, tb := range tables {
		if tb.Owner == s.role {
			t.Errorf("table %s is owned by the application role", tb.Name)
		}
		if tb.RLS {
			secured = append(secured, tb.Name)
		}
	}
	want := slices.Sorted(slices.Values(tenantTables))
	if !slices.Equal(secured, want) {
		t.Errorf("tables with row-level security %v, want %v", secured, want)
	}
}
