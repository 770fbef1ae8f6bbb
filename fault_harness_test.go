package belay_test

// The harness of the real-process fault tests (zombie_test.go): a bank of
// the tests' own that counts what lands, the agent the worker processes
// run, the worker process itself (this test binary, run again), and the
// processes' control from the test.

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	mathrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/internal/testrun"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/postgres"
	"github.com/belayrun/belay/store/sqlite"
)

// faultBank is a downstream of the tests' own, over HTTP on loopback: it
// applies every charge it receives and records when it landed and under
// which fencing token, so the tests count effects without trusting Belay's
// records. A charge sent for a tool that honours keys lands once per key.
type faultBank struct {
	srv *httptest.Server

	// refuseLate makes the bank refuse a charge that reaches it after the
	// deadline its caller sent (CallInfo.Deadline), as a downstream that
	// uses the deadline does. A worker stopped between its last look at
	// its context and its send sends when it wakes; nothing in its process
	// can prevent that (the README says so), and the fleet's random stops
	// land there now and then on a loaded machine.
	refuseLate bool

	mu       sync.Mutex
	landed   []landing
	requests int
	// late counts the charges refused for arriving after their deadline.
	late int
}

type landing struct {
	Run   string    `json:"run"`
	Tool  string    `json:"tool"`
	Key   string    `json:"key"`
	Token int64     `json:"token"`
	At    time.Time `json:"at"`
	// By names the worker process that sent it.
	By string `json:"by"`
}

type chargeRequest struct {
	landing
	HonorsKey bool      `json:"honors_key"`
	Deadline  time.Time `json:"deadline"`
}

func newFaultBank(t *testing.T) *faultBank {
	b := &faultBank{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /charge", func(w http.ResponseWriter, r *http.Request) {
		var req chargeRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		b.mu.Lock()
		b.requests++
		if b.refuseLate && !req.Deadline.IsZero() && time.Now().After(req.Deadline) {
			b.late++
			b.mu.Unlock()
			http.Error(w, "the charge arrived after its deadline; nothing was charged", http.StatusConflict)
			return
		}
		if !(req.HonorsKey && b.findLocked(req.Key) >= 0) {
			req.landing.At = time.Now()
			b.landed = append(b.landed, req.landing)
		}
		n := b.findLocked(req.Key)
		b.mu.Unlock()
		fmt.Fprintf(w, `{"charge_id":"CH-%d"}`, n+1)
	})
	mux.HandleFunc("GET /charge", func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		n := b.findLocked(r.URL.Query().Get("key"))
		b.mu.Unlock()
		if n < 0 {
			fmt.Fprint(w, `{"found":false}`)
			return
		}
		fmt.Fprintf(w, `{"found":true,"charge_id":"CH-%d"}`, n+1)
	})
	mux.HandleFunc("GET /runs/{run}", func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		n := 0
		for _, l := range b.landed {
			if l.Run == r.PathValue("run") {
				n++
			}
		}
		b.mu.Unlock()
		fmt.Fprintf(w, `{"charges":%d}`, n)
	})
	b.srv = httptest.NewServer(mux)
	t.Cleanup(b.srv.Close)
	return b
}

func (b *faultBank) findLocked(key string) int {
	for i, l := range b.landed {
		if l.Key == key {
			return i
		}
	}
	return -1
}

// ofRun is what landed for a run, in order.
func (b *faultBank) ofRun(run string) []landing {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []landing
	for _, l := range b.landed {
		if l.Run == run {
			out = append(out, l)
		}
	}
	return out
}

func (b *faultBank) has(key string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.findLocked(key) >= 0
}

// toolKind is how a tool's outcome can be found out after a lost answer.
type toolKind string

const (
	honorsKey toolKind = "honors"    // the bank deduplicates by Belay's key
	reconcile toolKind = "reconcile" // the bank can be asked by key
	neither   toolKind = "neither"   // a person must look
)

// faultConfig is what a worker process runs, passed in its environment.
type faultConfig struct {
	Name   string        `json:"name"`
	Store  string        `json:"store"` // "sqlite" or "postgres"
	DSN    string        `json:"dsn"`   // the SQLite file, or the PostgreSQL URL
	Schema string        `json:"schema"`
	Bank   string        `json:"bank"`
	TTL    time.Duration `json:"ttl"`
	// Tools are the run's steps, one tool call each, in order.
	Tools   []toolKind `json:"tools"`
	Workers int        `json:"workers"`
	// ModelWait is how long each model call takes. WaitBefore is how long
	// a tool waits before it sends (on its context), WaitAfter how long
	// the bank's answer takes to come back once the charge landed; each
	// is drawn between the two bounds, per call.
	ModelWait  [2]time.Duration `json:"model_wait"`
	WaitBefore [2]time.Duration `json:"wait_before"`
	WaitAfter  [2]time.Duration `json:"wait_after"`
	Timeout    time.Duration    `json:"timeout"`
	// Agent is "conversation" for conversationAgent, "courier" for
	// courierAgent, else faultAgent.
	Agent string `json:"agent,omitempty"`
	// Limits are the agent's provider limits.
	Limits []belay.ProviderLimit `json:"limits"`
}

const faultMarker = "FAULTPOINT"

func between(b [2]time.Duration) time.Duration {
	if b[1] <= b[0] {
		return b[0]
	}
	return b[0] + time.Duration(mathrand.Int64N(int64(b[1]-b[0])))
}

// faultAgent is the agent every worker of a test runs, and the test itself
// to start runs: the same definition, so the same version. Each step calls
// one tool; out receives the markers of the points a test stops a worker
// at, as "FAULTPOINT <worker> <point> <run> <tool> <token>".
func faultAgent(cfg faultConfig, out io.Writer) *belay.Agent {
	var mu sync.Mutex
	mark := func(point, run, tool string, token int64) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, "%s %s %s %s %s %d\n", faultMarker, cfg.Name, point, run, tool, token)
		if f, ok := out.(*os.File); ok {
			_ = f.Sync()
		}
	}
	client := &http.Client{}
	var tools []belay.Tool
	for i, kind := range cfg.Tools {
		name := fmt.Sprintf("charge_%d_%s", i+1, kind)
		t := belay.Tool{
			Name:        name,
			Description: "charge the order (" + string(kind) + ")",
			Effect:      belay.Irreversible,
			HonorsKey:   kind == honorsKey,
			Timeout:     cfg.Timeout,
			Retry:       belay.RetryPolicy{MaxAttempts: 3, BaseDelay: 50 * time.Millisecond},
			// A worker woken from a stop finds every call it had in flight
			// timed out at once, which would open its breaker against a
			// bank that is up: the tests are about the ledger, not it.
			Breaker: belay.BreakerPolicy{Failures: 1000},
			Call: func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
				ci, _ := belay.CallInfoFrom(ctx)
				mark("before-send", ci.RunID, name, ci.FencingToken)
				// A well-written tool: it waits on its context, and checks it
				// just before it sends.
				select {
				case <-time.After(between(cfg.WaitBefore)):
				case <-ctx.Done():
				}
				if err := ctx.Err(); err != nil {
					mark("gave-up", ci.RunID, name, ci.FencingToken)
					return nil, err
				}
				body, _ := json.Marshal(chargeRequest{landing: landing{Run: ci.RunID, Tool: name, Key: ci.IdempotencyKey,
					Token: ci.FencingToken, By: cfg.Name}, HonorsKey: kind == honorsKey, Deadline: ci.Deadline})
				req, _ := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodPost, cfg.Bank+"/charge", strings.NewReader(string(body)))
				res, err := client.Do(req)
				if err != nil {
					return nil, fmt.Errorf("%w: %v", belay.ErrUnknownOutcome, err)
				}
				answer, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if res.StatusCode == http.StatusConflict {
					return nil, belay.Transient(fmt.Errorf("the bank refused the charge: %s", answer))
				}
				mark("after-send", ci.RunID, name, ci.FencingToken)
				// The answer is slow to come back.
				select {
				case <-time.After(between(cfg.WaitAfter)):
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				return answer, nil
			},
		}
		if kind == reconcile {
			t.Reconcile = func(ctx context.Context, key string, _ json.RawMessage) (json.RawMessage, bool, error) {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Bank+"/charge?key="+key, nil)
				res, err := client.Do(req)
				if err != nil {
					return nil, false, err
				}
				defer res.Body.Close()
				var found struct {
					Found bool `json:"found"`
				}
				answer, _ := io.ReadAll(res.Body)
				if err := json.Unmarshal(answer, &found); err != nil {
					return nil, false, err
				}
				return answer, found.Found, nil
			}
		}
		tools = append(tools, t)
	}
	script := func(req model.Request) (scripted.Reply, error) {
		done := 0
		for _, m := range req.Messages {
			if m.Role == model.RoleAssistant {
				done++
			}
		}
		if done >= len(tools) {
			return scripted.Reply{Text: "every charge is made"}, nil
		}
		return scripted.Reply{Text: fmt.Sprintf("step %d", done+1),
			Calls: []scripted.Call{{Name: tools[done].Name, Args: map[string]any{"step": done + 1, "cents": 100 * (done + 1)}}}}, nil
	}
	allow := func(context.Context, belay.PolicyCall) (belay.Decision, error) {
		return belay.Decision{Verdict: belay.Allow}, nil
	}
	return &belay.Agent{Name: "charger", Model: slowModel{scripted.Func(script), cfg.ModelWait, mark},
		Tools: tools, Prices: scripted.Prices, Policy: allow, PolicyVersion: "allow-all", Limits: cfg.Limits,
		Requirements: []belay.Requirement{{Name: "every charge landed", Check: func(ctx context.Context, run belay.RunInfo) (bool, error) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Bank+"/runs/"+run.ID, nil)
			res, err := client.Do(req)
			if err != nil {
				return false, err
			}
			defer res.Body.Close()
			var got struct {
				Charges int `json:"charges"`
			}
			if err := json.NewDecoder(res.Body).Decode(&got); err != nil {
				return false, err
			}
			return got.Charges >= len(tools), nil
		}}}}
}

// slowModel is a scripted model whose calls take a while, marking the
// moment each starts.
type slowModel struct {
	*scripted.Model
	wait [2]time.Duration
	mark func(point, run, tool string, token int64)
}

func (m slowModel) Generate(ctx context.Context, req model.Request) (model.Response, error) {
	m.mark("model", "-", "-", 0)
	select {
	case <-time.After(between(m.wait)):
	case <-ctx.Done():
		return model.Response{}, ctx.Err()
	}
	return m.Model.Generate(ctx, req)
}

// openFaultStore opens the store of cfg.
func openFaultStore(ctx context.Context, cfg faultConfig) (store.Store, error) {
	if cfg.Store == "postgres" {
		return postgres.Open(ctx, cfg.DSN, postgres.Config{Schema: cfg.Schema})
	}
	return sqlite.Open(ctx, cfg.DSN, sqlite.Config{})
}

// TestFaultWorker is the worker process of the fault tests: it runs the
// agent of its configuration until SIGTERM.
func TestFaultWorker(t *testing.T) {
	raw := os.Getenv("BELAY_FAULT_WORKER")
	if raw == "" {
		t.Skip("runs only as a worker process of the fault tests")
	}
	var cfg faultConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		t.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	st, err := openFaultStore(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	agent := faultAgent(cfg, os.Stdout)
	switch cfg.Agent {
	case "conversation":
		agent = conversationAgent(cfg, os.Stdout)
	case "courier":
		agent = courierAgent(cfg)
	}
	rt, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{agent},
		LeaseTTL: cfg.TTL, PollInterval: 20 * time.Millisecond, Workers: max(cfg.Workers, 1), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("%s %s ready - - 0\n", faultMarker, cfg.Name)
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = rt.Stop(stopCtx)
}

// faultProc is a worker process and what it printed.
type faultProc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}

	mu      sync.Mutex
	lines   []string
	stderr  []string
	changed chan struct{}
}

// startFaultWorker starts a worker process running cfg.
func startFaultWorker(t *testing.T, cfg faultConfig) *faultProc {
	t.Helper()
	raw, _ := json.Marshal(cfg)
	p := &faultProc{name: cfg.Name, done: make(chan struct{}), changed: make(chan struct{})}
	p.cmd = exec.Command(os.Args[0], "-test.run=^TestFaultWorker$", "-test.count=1")
	p.cmd.Env = append(os.Environ(), "BELAY_FAULT_WORKER="+string(raw))
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var reading sync.WaitGroup
	read := func(r io.Reader, into *[]string) {
		defer reading.Done()
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			*into = append(*into, sc.Text())
			close(p.changed)
			p.changed = make(chan struct{})
			p.mu.Unlock()
		}
	}
	reading.Add(2)
	go read(stdout, &p.lines)
	go read(stderr, &p.stderr)
	go func() {
		reading.Wait()
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// waitMark waits for a marker line of the process starting with prefix
// (after "FAULTPOINT <worker> ") at or after line from, and returns its
// fields and the index of the next line.
func (p *faultProc) waitMark(ctx context.Context, from int, prefix string) ([]string, int, error) {
	want := faultMarker + " " + p.name + " " + prefix
	for {
		p.mu.Lock()
		lines, changed := p.lines, p.changed
		p.mu.Unlock()
		for i := from; i < len(lines); i++ {
			if strings.HasPrefix(lines[i], want) {
				return strings.Fields(lines[i])[2:], i + 1, nil
			}
		}
		select {
		case <-changed:
		case <-p.done:
			return nil, 0, fmt.Errorf("%s exited before it printed %q; stderr:\n%s", p.name, prefix, p.tail())
		case <-ctx.Done():
			return nil, 0, fmt.Errorf("%s did not print %q: %w; stderr:\n%s", p.name, prefix, ctx.Err(), p.tail())
		}
	}
}

// marks counts the marker lines of a point.
func (p *faultProc) marks(point string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, l := range p.lines {
		if f := strings.Fields(l); len(f) > 2 && f[0] == faultMarker && f[2] == point {
			n++
		}
	}
	return n
}

func (p *faultProc) tail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.stderr[max(0, len(p.stderr)-15):], "\n")
}

func (p *faultProc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%s: signal %v: %v", p.name, sig, err)
	}
}

// stopped reports whether the kernel has the process stopped.
func (p *faultProc) stopped() bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && len(s) > i+2 && s[i+2] == 'T'
}

// freeze stops the process with SIGSTOP and waits until the kernel has it
// stopped.
func (p *faultProc) freeze(ctx context.Context, t *testing.T) {
	t.Helper()
	p.signal(t, syscall.SIGSTOP)
	if err := testrun.WaitUntil(ctx, func() bool { return p.stopped() }); err != nil {
		t.Fatalf("%s did not stop: %v", p.name, err)
	}
}

// faultStore is a store for a fault test: a SQLite file the processes
// share, or a PostgreSQL schema of the test's own.
func faultStore(t *testing.T, kind string) (faultConfig, store.Store) {
	t.Helper()
	cfg := faultConfig{Store: kind}
	switch kind {
	case "sqlite":
		cfg.DSN = filepath.Join(t.TempDir(), "belay.db")
	case "postgres":
		cfg.DSN = os.Getenv("BELAY_TEST_DATABASE_URL")
		if cfg.DSN == "" {
			cfg.DSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
		}
		cfg.Schema = "belay_fault_" + strings.ToLower(rand.Text()[:10])
		admin, err := pgx.Connect(t.Context(), cfg.DSN)
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("no PostgreSQL (CI=true needs one): %v", err)
			}
			t.Skipf("SKIPPED: no PostgreSQL for the fault tests on PostgreSQL: %v", err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, _ = admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{cfg.Schema}.Sanitize()+" CASCADE")
			_ = admin.Close(ctx)
		})
	}
	st, err := openFaultStore(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return cfg, st
}
