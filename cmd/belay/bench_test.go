package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/sqlite"
)

func TestBenchJSON(t *testing.T) {
	t.Parallel()
	out, err := belayCmd(t, "bench", "--runs", "4", "--steps", "3", "--concurrency", "2", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	for k, want := range map[string]any{"runs": 4.0, "steps_per_run": 3.0, "concurrency": 2.0, "store": "sqlite", "steps": 12.0} {
		if res[k] != want {
			t.Errorf("%s = %v, want %v", k, res[k], want)
		}
	}
	for _, k := range []string{"seconds", "steps_per_sec", "overhead_p50_ms", "overhead_p99_ms", "bytes_per_step",
		"db_bytes_per_step", "commits", "writes", "peak_rss_mb"} {
		if _, ok := res[k].(float64); !ok {
			t.Errorf("%s = %v, want a number", k, res[k])
		}
	}
	if res["writes"].(float64) < res["commits"].(float64) || res["commits"].(float64) == 0 {
		t.Errorf("writes %v, commits %v: every commit holds at least one write", res["writes"], res["commits"])
	}
}

func TestBenchModelLatency(t *testing.T) {
	t.Parallel()
	out, err := belayCmd(t, "bench", "--runs", "2", "--steps", "2", "--concurrency", "2", "--model-latency", "2ms", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Steps          int     `json:"steps"`
		ModelLatencyMS float64 `json:"model_latency_ms"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Steps != 4 || res.ModelLatencyMS != 2 {
		t.Errorf("bench --model-latency 2ms: %q (%v)", out, err)
	}
}

func TestSlowModelHonoursCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	m := slowModel{Model: scripted.New(scripted.Reply{Text: "late"}), latency: time.Hour}
	if _, err := m.Generate(ctx, model.Request{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Generate after cancel: %v, want context.Canceled", err)
	}
}

func TestBenchKeepsDB(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "bench.db")
	out, err := belayCmd(t, "bench", "--runs", "3", "--steps", "2", "--concurrency", "3", "--db", db)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "durable steps      6") {
		t.Errorf("report should count 6 durable steps:\n%s", out)
	}
	out, err = belayCmd(t, "runs", "--db", db, "--status", "done")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out, " bench "); n != 3 {
		t.Errorf("want 3 done bench runs in %s, got %d:\n%s", db, n, out)
	}

	_, err = belayCmd(t, "bench", "--runs", "1", "--db", db)
	if err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("bench into an existing database: got %v, want a refusal", err)
	}
}

func TestBenchErrors(t *testing.T) {
	t.Parallel()
	_, err := belayCmd(t, "bench", "--store", "postgres", "--database-url", "")
	if err == nil || !strings.Contains(err.Error(), "needs --database-url") {
		t.Errorf("--store postgres without a URL: got %v", err)
	}
	for _, args := range [][]string{
		{"bench", "--store", "mysql"},
		{"bench", "--runs", "0"},
		{"bench", "--concurrency", "0"},
		{"bench", "--model-latency", "-1ms"},
	} {
		_, err := belayCmd(t, args...)
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("%q: got %v, want a usage error", args, err)
		}
	}
}

// testDatabaseURL is the PostgreSQL the tests use: $BELAY_TEST_DATABASE_URL,
// else the local server. Without one, CI fails and elsewhere the test is
// skipped, loudly.
func testDatabaseURL(t *testing.T) string {
	t.Helper()
	url := os.Getenv("BELAY_TEST_DATABASE_URL")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no PostgreSQL at %s (CI=true needs one): %v", redactURL(url), err)
		}
		t.Skipf("SKIPPED: no PostgreSQL at %s: %v", redactURL(url), err)
	}
	conn.Close(t.Context())
	return url
}

func TestBenchOnPostgres(t *testing.T) {
	t.Parallel()
	url := testDatabaseURL(t)
	out, err := belayCmd(t, "bench", "--store", "postgres", "--database-url", url, "--runs", "4", "--steps", "3", "--concurrency", "2", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil || got["store"] != "postgres" || got["steps"] != 12.0 {
		t.Errorf("bench --store postgres: %q (%v)", out, err)
	}
	// The schema's size is measured; the SQLite writer's counts are not
	// there to report, and are left out rather than shown as zeros.
	if n, _ := got["db_bytes_per_step"].(float64); n <= 0 {
		t.Errorf("db_bytes_per_step = %v, want the schema's bytes per step", got["db_bytes_per_step"])
	}
	for _, k := range []string{"bytes_per_step", "commits", "writes"} {
		if v, ok := got[k]; ok {
			t.Errorf("%s = %v on PostgreSQL, want it left out", k, v)
		}
	}
}

// bench --parked parks runs on approval, measures a worker over them in a
// process of its own and times approvals until their runs are claimed.
func TestBenchParked(t *testing.T) {
	if testing.Short() {
		t.Skip("builds belay and starts a worker process")
	}
	t.Parallel()
	out, err := exec.Command(belayBinary(t), "bench", "--parked", "40", "--idle", "1s", "--resumes", "5", "--json").Output()
	if err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	var res map[string]any
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if res["parked"] != 40.0 || res["resumes"] != 5.0 || res["store"] != "sqlite" {
		t.Errorf("parked %v, resumes %v, store %v; want 40, 5, sqlite", res["parked"], res["resumes"], res["store"])
	}
	for _, k := range []string{"fill_seconds", "idle_seconds", "resume_p50_ms", "resume_p99_ms", "resume_max_ms"} {
		if v, ok := res[k].(float64); !ok || v <= 0 {
			t.Errorf("%s = %v, want a positive number", k, res[k])
		}
	}
	if _, err := os.Stat("/proc/self/stat"); err == nil {
		if v, _ := res["rss_mb"].(float64); v <= 0 {
			t.Errorf("rss_mb = %v, want the worker's memory", res["rss_mb"])
		}
		if _, ok := res["idle_cpu_pct"].(float64); !ok {
			t.Errorf("idle_cpu_pct = %v, want a number", res["idle_cpu_pct"])
		}
	}
}

// bench --waiting has runs ask their user a question, measures a worker
// over them in a process of its own and times replies until their runs are
// claimed; the runs it replied to go on to their answer.
func TestBenchWaiting(t *testing.T) {
	if testing.Short() {
		t.Skip("builds belay and starts a worker process")
	}
	t.Parallel()
	db := filepath.Join(t.TempDir(), "waiting.db")
	cmd := exec.Command(belayBinary(t), "bench", "--waiting", "30", "--idle", "1s", "--resumes", "4", "--db", db, "--json")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v:\n%s\n%s", err, out, stderr.Bytes())
	}
	var res map[string]any
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if res["waiting"] != 30.0 || res["resumes"] != 4.0 || res["store"] != "sqlite" || res["parked"] != nil {
		t.Errorf("waiting %v, resumes %v, store %v, parked %v; want 30, 4, sqlite, none", res["waiting"], res["resumes"], res["store"], res["parked"])
	}
	for _, k := range []string{"fill_seconds", "idle_seconds", "resume_p50_ms", "resume_p99_ms", "resume_max_ms", "reply_p50_ms"} {
		if v, ok := res[k].(float64); !ok || v <= 0 {
			t.Errorf("%s = %v, want a positive number", k, res[k])
		}
	}
	if _, err := os.Stat("/proc/self/stat"); err == nil {
		if v, _ := res["rss_mb"].(float64); v <= 0 {
			t.Errorf("rss_mb = %v, want the worker's memory", res["rss_mb"])
		}
	}
	// The store the bench kept: four runs were answered, the others still
	// wait for their user.
	st, err := sqlite.Open(context.Background(), db, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	waits, err := st.Waits(context.Background(), store.ListWaitsParams{Tenant: belay.AnyTenant})
	if err != nil {
		t.Fatal(err)
	}
	answered, pending := 0, 0
	for _, w := range waits {
		if w.Kind != store.WaitInput {
			t.Errorf("wait %s is a %s, want input", w.ID, w.Kind)
		}
		switch w.Status {
		case store.WaitAnswered:
			answered++
		case store.WaitPending:
			pending++
		}
	}
	if answered != 4 || pending != 26 {
		t.Errorf("%d waits answered, %d pending; want 4 and 26", answered, pending)
	}
}

// bench --takeover kills a worker mid-step and freezes another, and times
// until a worker in another process has claimed each run: the killed
// worker's runs well within their lease (its process is proven gone), the
// frozen one's once their leases run out.
func TestBenchTakeover(t *testing.T) {
	if testing.Short() {
		t.Skip("builds belay and starts worker processes")
	}
	t.Parallel()
	cmd := exec.Command(belayBinary(t), "bench", "--takeover", "--runs", "4", "--lease-ttl", "3s", "--json")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v:\n%s\n%s", err, out, stderr.Bytes())
	}
	var res takeoverResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if res.Runs != 4 || res.Store != "sqlite" || res.LeaseTTLMS != 3000 {
		t.Errorf("runs %d, store %s, lease %v ms; want 4, sqlite, 3000", res.Runs, res.Store, res.LeaseTTLMS)
	}
	if res.KilledP50MS <= 0 || res.KilledMaxMS < res.KilledP50MS || res.KilledMaxMS >= res.LeaseTTLMS {
		t.Errorf("killed worker's runs taken over after p50 %v, max %v ms; want within the %v ms lease", res.KilledP50MS, res.KilledMaxMS, res.LeaseTTLMS)
	}
	// A frozen worker renewed its leases at most a third of a lease before
	// it froze: they run out at least two thirds of a lease after.
	if res.FrozenP50MS < res.LeaseTTLMS*2/3 || res.FrozenMaxMS < res.FrozenP50MS {
		t.Errorf("frozen worker's runs taken over after p50 %v, max %v ms; want once their %v ms leases ran out", res.FrozenP50MS, res.FrozenMaxMS, res.LeaseTTLMS)
	}
}

// --scenario keys runs runs on few keys and reads the holds from the
// traces: one a run at least, and no two of one key at once.
func TestBenchScenarioKeys(t *testing.T) {
	t.Parallel()
	out, err := belayCmd(t, "bench", "--scenario", "keys", "--runs", "30", "--keys", "3", "--concurrency", "8", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var res keysResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if res.Scenario != "keys" || res.Runs != 30 || res.Keys != 3 || res.Holds < 30 || res.Overlaps != 0 {
		t.Errorf("%+v: want 30 runs on 3 keys, a hold each at least, no overlap", res)
	}
}

// --scenario fairness times tenant B's late runs to their first claim
// while tenant A's backlog waits: B's runs all start with most of A's
// still queued.
func TestBenchScenarioFairness(t *testing.T) {
	t.Parallel()
	out, err := belayCmd(t, "bench", "--scenario", "fairness", "--backlog", "400", "--late", "5", "--concurrency", "8", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var res fairnessResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if res.Scenario != "fairness" || res.Backlog != 400 || res.Late != 5 || res.BacklogLeft < 200 {
		t.Errorf("%+v: want B's 5 runs started with most of A's 400 still queued", res)
	}
	if _, err := belayCmd(t, "bench", "--scenario", "fairness", "--backlog", "4", "--concurrency", "8"); err == nil {
		t.Error("a backlog smaller than the workers: no error")
	}
}

// --scenario tpm runs both halves: with the shared limit no call of the
// first minute is answered 429, as the bucket starts with the provider's
// minute; without it, more runs call than the provider admits and some are
// answered 429.
func TestBenchScenarioTPM(t *testing.T) {
	t.Parallel()
	out, err := belayCmd(t, "bench", "--scenario", "tpm", "--runs", "8", "--tpm", "6000", "--duration", "3s", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var res tpmResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if res.Scenario != "tpm" || res.Runs != 8 || res.TPM != 6000 || len(res.Phases) != 2 {
		t.Fatalf("%+v: want 8 runs at 6000 tokens a minute, two halves", res)
	}
	limited, free := res.Phases[0], res.Phases[1]
	if !limited.SharedLimit || limited.Answered429 != 0 || limited.ModelCalls == 0 {
		t.Errorf("with the shared limit: %+v, want calls and none answered 429", limited)
	}
	if free.SharedLimit || free.Answered429 == 0 {
		t.Errorf("without it: %+v, want some of 8 runs answered 429 by an account that admits 5 calls a minute", free)
	}
	if _, err := belayCmd(t, "bench", "--scenario", "tpm", "--tpm", "100"); err == nil {
		t.Error("a limit below one call: no error")
	}
}

// bench --timers has runs sleep on timers a day away, then times how late
// a worker in a process of its own starts runs that come due; the store it
// keeps shows the due runs claimed and the sleeping ones still paused.
func TestBenchTimers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds belay and starts a worker process")
	}
	t.Parallel()
	db := filepath.Join(t.TempDir(), "timers.db")
	cmd := exec.Command(belayBinary(t), "bench", "--timers", "40", "--resumes", "5", "--db", db, "--json")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v:\n%s\n%s", err, out, stderr.Bytes())
	}
	var res map[string]any
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if res["timers"] != 40.0 || res["due"] != 5.0 || res["store"] != "sqlite" || res["worker_poll_ms"] != 200.0 {
		t.Errorf("timers %v, due %v, store %v, poll %v; want 40, 5, sqlite, 200", res["timers"], res["due"], res["store"], res["worker_poll_ms"])
	}
	for _, k := range []string{"fill_seconds", "late_p50_ms", "late_p99_ms", "late_max_ms"} {
		if v, ok := res[k].(float64); !ok || v <= 0 {
			t.Errorf("%s = %v, want a positive number", k, res[k])
		}
	}
	if p50, max := res["late_p50_ms"].(float64), res["late_max_ms"].(float64); p50 > max {
		t.Errorf("late p50 %v above its max %v", p50, max)
	}
	st, err := sqlite.Open(context.Background(), db, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	runs, err := st.ListRuns(context.Background(), store.ListRunsParams{Tenant: belay.AnyTenant})
	if err != nil {
		t.Fatal(err)
	}
	status := map[store.Status]int{}
	for _, r := range runs {
		status[r.Status]++
	}
	// The worker is killed once it has claimed the due runs, done or not.
	if status[store.StatusDone]+status[store.StatusRunning] != 5 || status[store.StatusPaused] != 40 || len(runs) != 45 {
		t.Errorf("runs by status %v, want the 5 due ones claimed (running or done) and 40 paused (asleep)", status)
	}
}
