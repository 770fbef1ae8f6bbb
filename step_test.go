package belay

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

// dyingStore fails the first checkpoint that carries tool results, as if the
// worker's process died just before that write: nothing of it is written.
type dyingStore struct {
	store.Store
	mu   sync.Mutex
	died bool
}

var errDied = errors.New("the worker died before this write")

func (s *dyingStore) Checkpoint(ctx context.Context, p store.CheckpointParams) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range p.Messages {
		if !s.died && m.Role == string(model.RoleUser) && m.Seq > 0 {
			s.died = true
			return errDied
		}
	}
	return s.Store.Checkpoint(ctx, p)
}

// A turn's tool results are made durable with the next model response, one
// commit a step. A worker that dies in between loses the turn's reads and
// the response it was paying for; its successor reads again, asks again,
// and the run records each once.
func TestReadTurnIsReadAgainAfterADeathBeforeTheNextWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	raw := openStore(t)
	c := newClock()

	var mu sync.Mutex
	reads, modelCalls := 0, 0
	lookup := NewTool("lookup", "look up a record", Read, func(ctx context.Context, in lookupIn) (lookupOut, error) {
		mu.Lock()
		reads++
		mu.Unlock()
		return lookupOut{ID: in.ID, Value: "value of " + in.ID}, nil
	})
	agent := func() *Agent {
		return &Agent{Name: "a", Tools: []Tool{lookup}, Model: scripted.Func(func(req model.Request) (scripted.Reply, error) {
			mu.Lock()
			modelCalls++
			mu.Unlock()
			if len(req.Messages) == 1 {
				return scripted.Reply{Calls: []scripted.Call{{Name: "lookup", Args: map[string]string{"id": "A-1"}}}}, nil
			}
			return scripted.Reply{Text: "A-1 has value of A-1"}, nil
		})}
	}

	dying := &dyingStore{Store: raw}
	first := newRuntime(t, dying, c, agent())
	run, _, err := first.StartRun(ctx, RunRequest{Agent: "a", User: "u", ClientRequestID: "r", Input: "what is A-1?"})
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if !dying.died {
		t.Fatal("the worker never reached the write after its read: the test proves nothing")
	}
	if got := len(loadMessages(t, raw, run.ID)); got != 2 {
		t.Fatalf("after the death the store holds %d messages, want 2 (the input and the durable first response)", got)
	}

	// The lease of the dead worker expires; a successor takes the run.
	c.Advance(time.Minute)
	second := newRuntime(t, raw, c, agent())
	if err := second.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := raw.GetRun(ctx, "", run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.StatusDone || got.Final != "A-1 has value of A-1" {
		t.Fatalf("run %s %q, want done with the answer", got.Status, got.Final)
	}
	if reads != 2 || modelCalls != 3 {
		t.Errorf("%d reads and %d model calls, want 2 and 3: the dead worker's read and its answer are done again", reads, modelCalls)
	}
	// The store has each once: one response asking, one result, one answer.
	msgs := loadMessages(t, raw, run.ID)
	if len(msgs) != 4 || len(model.ToolUses(msgs[1].Content)) != 1 || msgs[2].Role != model.RoleUser || model.JoinText(msgs[3].Content) != "A-1 has value of A-1" {
		t.Errorf("messages %+v, want input, tool_use, tool_result, answer", msgs)
	}
	if got.ModelCalls != 2 {
		t.Errorf("run records %d model calls, want the 2 whose responses are durable", got.ModelCalls)
	}
}
