package belay_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/sqlite"

	_ "modernc.org/sqlite"
)

// The five-step plan of the checkpoint table in the source texts. Two
// downstream systems honour Belay's key; three do not and are reconciled by
// asking them what they hold.
var crashPlan = []struct {
	tool      string
	honorsKey bool
}{
	{"refund", true},
	{"email", true},
	{"close_ticket", false},
	{"crm_note", false},
	{"update_forecast", false},
}

const crashMarker = "CRASHPOINT"

// downstream is the world the plan acts on: a log of every effect that
// landed, in its own database, shared by the killed worker and its successor.
type downstream struct{ db *sql.DB }

func openDownstream(t testing.TB, path string) *downstream {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=synchronous(FULL)")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS applied (id INTEGER PRIMARY KEY, tool TEXT NOT NULL, key TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &downstream{db: db}
}

// apply lands one effect. A system that honours keys ignores a key it has
// seen; the others apply every call they get.
func (d *downstream) apply(ctx context.Context, tool, key string, honorsKey bool) error {
	if honorsKey {
		_, err := d.db.ExecContext(ctx, `INSERT INTO applied (tool, key) SELECT ?, ? WHERE NOT EXISTS (SELECT 1 FROM applied WHERE key = ?)`, tool, key, key)
		return err
	}
	_, err := d.db.ExecContext(ctx, `INSERT INTO applied (tool, key) VALUES (?, '')`, tool)
	return err
}

func (d *downstream) find(ctx context.Context, tool string) (bool, error) {
	var n int
	err := d.db.QueryRowContext(ctx, `SELECT count(*) FROM applied WHERE tool = ?`, tool).Scan(&n)
	return n > 0, err
}

func (d *downstream) effects(t *testing.T) []string {
	rows, err := d.db.Query(`SELECT tool FROM applied ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var tools []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		tools = append(tools, s)
	}
	return tools
}

// crashAgent is the agent both the killed worker and its successor run; it
// must be the same version in both.
func crashAgent(d *downstream, afterLanding func(tool string)) *belay.Agent {
	var replies []scripted.Reply
	var tools []belay.Tool
	for i, step := range crashPlan {
		replies = append(replies, scripted.Reply{
			Text:  fmt.Sprintf("step %d of the plan", i+1),
			Calls: []scripted.Call{{Name: step.tool, Args: map[string]any{"target": "T-9", "step": i + 1}}},
		})
		tools = append(tools, belay.Tool{
			Name:        step.tool,
			Description: "applies " + step.tool,
			Effect:      belay.Irreversible,
			HonorsKey:   step.honorsKey,
			Call: func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
				ci, _ := belay.CallInfoFrom(ctx)
				if err := d.apply(ctx, step.tool, ci.IdempotencyKey, step.honorsKey); err != nil {
					return nil, err
				}
				afterLanding(step.tool)
				return json.RawMessage(`{"ok":true}`), nil
			},
			Reconcile: func(ctx context.Context, key string, args json.RawMessage) (json.RawMessage, bool, error) {
				found, err := d.find(ctx, step.tool)
				return json.RawMessage(`{"ok":true,"reconciled":true}`), found, err
			},
		})
	}
	replies = append(replies, scripted.Reply{Text: "all five steps are done"})
	// The plan is approved in advance: this test is about crashes.
	allow := func(context.Context, belay.PolicyCall) (belay.Decision, error) {
		return belay.Decision{Verdict: belay.Allow}, nil
	}
	return &belay.Agent{Name: "planner", Model: scripted.New(replies...), Tools: tools, Prices: scripted.Prices,
		Policy: allow, PolicyVersion: "allow-all"}
}

// crashingStore counts the writes a worker makes and, at the chosen one,
// reports it and blocks until the test kills the process. Renewals are
// timer-driven, so they are not counted: the points stay deterministic.
type crashingStore struct {
	store.Store
	point func(what string)
}

func (s *crashingStore) ClaimRuns(ctx context.Context, p store.ClaimRunsParams) ([]store.Run, error) {
	runs, err := s.Store.ClaimRuns(ctx, p)
	if len(runs) > 0 {
		s.point("after claim")
	}
	return runs, err
}

func (s *crashingStore) Checkpoint(ctx context.Context, p store.CheckpointParams) error {
	err := s.Store.Checkpoint(ctx, p)
	if err == nil {
		var types []string
		for _, e := range p.Events {
			types = append(types, e.Type)
		}
		s.point(fmt.Sprintf("after write of step %d (%s)", p.Run.Step, strings.Join(types, ",")))
	}
	return err
}

func (s *crashingStore) BeginEffect(ctx context.Context, p store.BeginEffectParams) (store.Effect, bool, error) {
	e, existed, err := s.Store.BeginEffect(ctx, p)
	if err == nil {
		s.point("after intent " + p.Effect.Tool)
	}
	return e, existed, err
}

// TestCrashWorker is the worker process of TestCrashAtEveryWriteBoundary.
func TestCrashWorker(t *testing.T) {
	crashAt, err := strconv.Atoi(os.Getenv("BELAY_CRASH_AT"))
	if err != nil {
		t.Skip("runs only as the child of TestCrashAtEveryWriteBoundary")
	}
	ctx := context.Background()
	dir := os.Getenv("BELAY_CRASH_DIR")
	st, err := sqlite.Open(ctx, filepath.Join(dir, "belay.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var mu sync.Mutex
	n := 0
	point := func(what string) {
		mu.Lock()
		n++
		hit := n == crashAt
		mu.Unlock()
		if hit {
			fmt.Printf("%s %d %s\n", crashMarker, crashAt, what)
			os.Stdout.Sync()
			time.Sleep(time.Hour) // hang here until the test's SIGKILL
		}
	}
	d := openDownstream(t, filepath.Join(dir, "world.db"))
	rt, err := belay.New(belay.Config{
		Store:  &crashingStore{Store: st, point: point},
		Agents: []*belay.Agent{crashAgent(d, func(tool string) { point("after " + tool + " landed downstream") })},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestCrashAtEveryWriteBoundary kills a real worker process with SIGKILL at
// every write boundary of a five-step plan in turn, and at every moment an
// effect has landed downstream but is not yet recorded, then resumes the run
// in another process. It is the "after, and idempotent" row of the
// checkpoint table, proven on the engine: always five effects, never six.
func TestCrashAtEveryWriteBoundary(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process per crash point")
	}
	ctx := context.Background()
	windows := 0
	for point := 1; ; point++ {
		dir := t.TempDir()
		st, err := sqlite.Open(ctx, filepath.Join(dir, "belay.db"), sqlite.Config{})
		if err != nil {
			t.Fatal(err)
		}
		d := openDownstream(t, filepath.Join(dir, "world.db"))
		rt, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{crashAgent(d, func(string) {})}})
		if err != nil {
			t.Fatal(err)
		}
		run, _, err := rt.StartRun(ctx, belay.RunRequest{Agent: "planner", User: "u", ClientRequestID: "plan", Input: "run the plan"})
		if err != nil {
			t.Fatal(err)
		}

		where, crashed := crashChild(t, dir, point)
		if !crashed {
			// The worker finished without reaching this point: every
			// boundary has been crashed at.
			st.Close()
			// The claim; per step its model response (which carries the
			// previous step's tool results), the intent, the landing
			// downstream and the settled effect; the final answer; the stop.
			if want := 1 + 4*len(crashPlan) + 2; point-1 != want {
				t.Fatalf("%d crash points, want %d: the plan's write boundaries have changed", point-1, want)
			}
			break
		}
		t.Logf("crash %d: %s", point, where)
		if strings.Contains(where, "landed downstream") {
			windows++
		}

		// The successor: another process, here the test itself, on the
		// same files. The dead worker's lease is taken over at once.
		if err := rt.Drain(ctx); err != nil {
			t.Fatalf("point %d (%s): resume: %v", point, where, err)
		}
		got, err := st.GetRun(ctx, "", run.ID)
		if err != nil {
			t.Fatal(err)
		}
		effects := d.effects(t)
		if got.Status != store.StatusDone || len(effects) != len(crashPlan) {
			t.Errorf("crash %d %s: status %s (%s %s), %d effects %v; want done and 5",
				point, where, got.Status, got.StopReason, got.StopDetail, len(effects), effects)
		}
		st.Close()
	}
	if windows != len(crashPlan) {
		t.Errorf("crashed in the window after an effect landed %d times, want %d", windows, len(crashPlan))
	}
}

// crashChild runs TestCrashWorker in a new process set to crash at point,
// and kills it with SIGKILL when it gets there.
func crashChild(t *testing.T, dir string, point int) (where string, crashed bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashWorker$", "-test.count=1")
	cmd.Env = append(os.Environ(), "BELAY_CRASH_AT="+strconv.Itoa(point), "BELAY_CRASH_DIR="+dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	timer := time.AfterFunc(2*time.Minute, func() { _ = cmd.Process.Kill(); close(done) })
	defer timer.Stop()
	sc := bufio.NewScanner(out)
	var lines []string
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, crashMarker+" "); ok {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			_, where, _ := strings.Cut(rest, " ")
			return where, true
		}
		lines = append(lines, line)
	}
	if err := cmd.Wait(); err != nil {
		select {
		case <-done:
			t.Fatalf("crash worker hung at point %d", point)
		default:
		}
		t.Fatalf("crash worker at point %d: %v\n%s\n%s", point, err, strings.Join(lines, "\n"), stderr.String())
	}
	return "", false
}
