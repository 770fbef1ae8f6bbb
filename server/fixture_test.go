package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/examples/support"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/postgres"
	"github.com/belayrun/belay/store/sqlite"
	"github.com/jackc/pgx/v5"
)

// demoInput is the support desk's double charge: its run asks to refund
// 288.00 USD on invoice INV-2026-004512, which needs a person's approval.
const demoInput = support.DoubleChargeRequest

// secret is planted in a sensitive argument; it must never be shown.
const secret = "sk_live_PLANTED_9f3a7c"

type fixture struct {
	t     *testing.T
	st    store.AccessStore
	world *support.World
	rt    *belay.Runtime
	srv   *Server
	http  *httptest.Server
	logs  *syncBuffer
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// vaultAgent stores a credential for a customer: its token argument is
// sensitive, and the call needs approval.
func vaultAgent() *belay.Agent {
	save := belay.NewTool("save_credential", "store a customer's API token", belay.Irreversible,
		func(ctx context.Context, in struct {
			Customer string `json:"customer"`
			Token    string `json:"token"`
		}) (string, error) {
			if in.Token != secret {
				return "", &belay.ArgumentError{Tool: "save_credential", Err: io.ErrUnexpectedEOF}
			}
			return "saved for " + in.Customer, nil
		})
	save.Sensitive = []string{"token"}
	m := scripted.Func(func(req model.Request) (scripted.Reply, error) {
		if len(req.Messages) == 1 {
			return scripted.Reply{Text: "Saving the token.", Calls: []scripted.Call{{Name: "save_credential",
				Args: map[string]string{"customer": "ada", "token": secret}}}}, nil
		}
		return scripted.Reply{Text: "Your token is stored."}, nil
	})
	return &belay.Agent{Name: "vault", Version: "v1", Model: m, Tools: []belay.Tool{save}}
}

// newFixture serves the support desk and the vault agent from a new
// SQLite store; configure changes the server's Config.
func newFixture(t *testing.T, configure ...func(*Config)) *fixture {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "belay.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return newFixtureOn(t, st, configure...)
}

// eachStore runs fn on a fixture over SQLite, then over PostgreSQL in a
// schema of its own: the server must behave the same on both, and on
// PostgreSQL row-level security confines every tenant's requests again.
func eachStore(t *testing.T, fn func(t *testing.T, f *fixture)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, newFixture(t))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		fn(t, newFixtureOn(t, openPostgres(t)))
	})
}

// openPostgres opens a PostgreSQL store in a new schema, dropped when the
// test ends. The server is $BELAY_TEST_DATABASE_URL or the local one;
// without one CI fails and elsewhere the test says loudly it is skipped.
func openPostgres(t *testing.T) store.AccessStore {
	t.Helper()
	url := os.Getenv("BELAY_TEST_DATABASE_URL")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no PostgreSQL (CI=true needs one): %v", err)
		}
		t.Skipf("SKIPPED: no PostgreSQL for the server's tests on PostgreSQL: %v", err)
	}
	schema := "belay_server_" + strings.ToLower(rand.Text()[:10])
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
		admin.Close(context.Background())
	})
	st, err := postgres.Open(ctx, url, postgres.Config{Schema: schema, MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func newFixtureOn(t *testing.T, st store.AccessStore, configure ...func(*Config)) *fixture {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	world, err := support.OpenWorld(ctx, filepath.Join(dir, "world.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { world.Close() })
	if err := world.Seed(ctx); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	agent := support.NewAgent(world, scripted.Func(support.Script()))
	// The hub sees the runtime's events at once; what other writers add it
	// finds by its poll.
	hub := NewEventHub(st, 50*time.Millisecond, logger)
	rt, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{agent, vaultAgent(), conciergeAgent(), settlingAgent()}, HumanApproval: true, Logger: logger, Observer: hub})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Runtime: rt, Store: st, Logger: logger, LivePoll: 20 * time.Millisecond, Events: hub}
	for _, c := range configure {
		c(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return &fixture{t: t, st: st, world: world, rt: rt, srv: srv, http: hs, logs: logs}
}

// key creates an API key and returns it whole.
func (f *fixture) key(tenant, name string, roles ...store.Role) string {
	f.t.Helper()
	k, err := CreateKey(context.Background(), f.st, tenant, name, roles, time.Now())
	if err != nil {
		f.t.Fatal(err)
	}
	return k.Secret
}

type response struct {
	status int
	header http.Header
	body   []byte
	// closes says the server closes the connection after the response.
	closes bool
}

func (r response) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("response %d is not JSON: %v\n%s", r.status, err, r.body)
	}
}

// code is the error code of an error response.
func (r response) code(t *testing.T) string {
	t.Helper()
	return r.apiError(t).Code
}

// message is the message of an error response.
func (r response) message(t *testing.T) string {
	t.Helper()
	return r.apiError(t).Message
}

func (r response) apiError(t *testing.T) apiError {
	t.Helper()
	var e struct {
		Error apiError `json:"error"`
	}
	r.json(t, &e)
	if e.Error.Message == "" {
		t.Errorf("error %q without a message", e.Error.Code)
	}
	return e.Error
}

// do sends a request; headers alternate names and values.
func (f *fixture) do(method, path, key string, body any, headers ...string) response {
	f.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			f.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, f.http.URL+path, rd)
	if err != nil {
		f.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := f.http.Client().Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: raw, closes: res.Close}
}

// start starts a run through the API and returns it.
func (f *fixture) start(key, idem, agent, user, input string) runView {
	f.t.Helper()
	res := f.do("POST", "/v1/runs", key, map[string]any{"agent": agent, "user": user, "input": input}, "Idempotency-Key", idem)
	if res.status != http.StatusCreated {
		f.t.Fatalf("POST /v1/runs: %d %s", res.status, res.body)
	}
	var run runView
	res.json(f.t, &run)
	return run
}

// drain runs every due run until it stops.
func (f *fixture) drain() {
	f.t.Helper()
	if err := f.rt.Drain(context.Background()); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) pending(key string) []approvalView {
	f.t.Helper()
	res := f.do("GET", "/v1/approvals?status=pending", key, nil)
	if res.status != http.StatusOK {
		f.t.Fatalf("GET /v1/approvals: %d %s", res.status, res.body)
	}
	var out struct {
		Approvals []approvalView `json:"approvals"`
	}
	res.json(f.t, &out)
	return out.Approvals
}

func (f *fixture) events(runID string) []store.Event {
	f.t.Helper()
	evs, err := f.st.Events(context.Background(), runID)
	if err != nil {
		f.t.Fatal(err)
	}
	return evs
}
