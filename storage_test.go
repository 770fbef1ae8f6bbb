package belay

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

// measuringStore adds up the bytes each step's writes carry.
type measuringStore struct {
	store.Store
	mu     sync.Mutex
	byStep map[int]int
}

func (s *measuringStore) Checkpoint(ctx context.Context, p store.CheckpointParams) error {
	n := len(p.Run.Plan) + len(p.Run.Guard) + len(p.Run.Final) + len(p.Run.StopDetail)
	for _, m := range p.Messages {
		n += len(m.Content)
	}
	for _, e := range p.Events {
		n += len(e.Data) + len(e.Type)
	}
	s.mu.Lock()
	s.byStep[p.Run.Step] += n
	s.mu.Unlock()
	return s.Store.Checkpoint(ctx, p)
}

// longRunAgent calls a read tool steps times, each turn with a thought of
// about 400 characters, then answers.
func longRunAgent(steps int) *Agent {
	thought := strings.Repeat("Checking the next record before deciding. ", 10)[:400]
	m := scripted.Func(func(req model.Request) (scripted.Reply, error) {
		turn := len(req.Messages) / 2
		if turn >= steps {
			return scripted.Reply{Text: "checked them all"}, nil
		}
		return scripted.Reply{Text: thought, Calls: []scripted.Call{{Name: "lookup", Args: map[string]string{"id": fmt.Sprintf("R-%06d", turn)}}}}, nil
	})
	return &Agent{Name: "long", Model: m, Tools: []Tool{lookupTool()}, Budget: Budget{MaxTurns: steps + 1}, Prices: scripted.Prices}
}

// What a step writes depends on what the step added, never on how long the
// history already is: messages are appended, not rewritten, and the guard
// state is bounded.
func TestBytesPerStepDoNotGrowWithTheRun(t *testing.T) {
	t.Parallel()
	const steps = 200
	ms := &measuringStore{Store: openStore(t), byStep: map[int]int{}}
	run := startAndDrain(t, newRuntime(t, ms, nil, longRunAgent(steps)), RunRequest{Agent: "long", User: "u", Input: "check every record"})
	if run.Status != store.StatusDone || run.Step != steps {
		t.Fatalf("run %s after %d steps (%s)", run.Status, run.Step, run.StopDetail)
	}
	// The guard remembers the latest facts, up to a bound it reaches within
	// the first factMemory steps; from there on every step costs the same.
	early, late := ms.byStep[factMemory+8], ms.byStep[190]
	if early == 0 || late == 0 {
		t.Fatalf("no writes measured: %v", ms.byStep)
	}
	// Token counts and ids gain a digit or two over the run; the history
	// itself must not be rewritten.
	if late > early+64 {
		t.Errorf("step 190 wrote %d bytes, step %d wrote %d: writes grow with the run", late, factMemory+8, early)
	}
	t.Logf("bytes written: step %d %d, step 190 %d", factMemory+8, early, late)
}

func TestLongRunStaysSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("500 steps")
	}
	t.Parallel()
	st := openStore(t)
	run := startAndDrain(t, newRuntime(t, st, nil, longRunAgent(500)), RunRequest{Agent: "long", User: "u", Input: "check every record"})
	if run.Status != store.StatusDone {
		t.Fatalf("run %s (%s)", run.Status, run.StopDetail)
	}
	size, err := st.Size(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if size > 2<<20 {
		t.Errorf("a 500-step run takes %d bytes, want under 2 MB", size)
	}
	t.Logf("500-step run with 400-character thoughts: %d bytes in the database", size)
}
