package belay

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

// Two runtimes of one store: the breaker the first opens on its own
// failures refuses the second's call, which never reaches the tool; once
// the open time has passed, the second's probe finds the tool up and
// closes the breaker for both.
func TestBreakerOpenedByOneRuntimeStopsAnother(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	c := newClock()
	var healthy atomic.Bool
	track := func(calls *atomic.Int64) Tool {
		tool := NewTool("track", "track a parcel", Read, func(ctx context.Context, in struct {
			N int `json:"n"`
		}) (string, error) {
			calls.Add(1)
			if !healthy.Load() {
				return "", Transient(errors.New("courier API 503"))
			}
			return "in transit", nil
		})
		tool.Retry = RetryPolicy{MaxAttempts: 1}
		tool.Breaker = BreakerPolicy{Failures: 3, Window: time.Minute, OpenFor: 30 * time.Second}
		return tool
	}
	script := func(n int) model.Model {
		return scripted.Func(func(req model.Request) (scripted.Reply, error) {
			if len(req.Messages) == 1 {
				var cs []scripted.Call
				for i := range n {
					cs = append(cs, scripted.Call{Name: "track", Args: map[string]int{"n": i}})
				}
				return scripted.Reply{Calls: cs}, nil
			}
			return scripted.Reply{Text: "ok"}, nil
		})
	}
	var calls1, calls2 atomic.Int64
	rt1 := newRuntime(t, st, c, &Agent{Name: "a", Model: script(3), Tools: []Tool{track(&calls1)}})
	rt2 := newRuntime(t, st, c, &Agent{Name: "b", Model: script(1), Tools: []Tool{track(&calls2)}})
	startAndDrain(t, rt1, RunRequest{Agent: "a", User: "u", Input: "track"})
	if calls1.Load() != 3 {
		t.Fatalf("%d calls from the first runtime, want 3", calls1.Load())
	}
	c.Advance(time.Second) // the second runtime's breakers are read afresh
	refused := startAndDrain(t, rt2, RunRequest{Agent: "b", User: "u", Input: "track"})
	if calls2.Load() != 0 {
		t.Fatalf("the second runtime called the tool %d times while the breaker the first opened was open", calls2.Load())
	}
	if msgs := loadMessages(t, st, refused.ID); !strings.Contains(msgs[2].Content[0].Content, "temporarily unavailable") {
		t.Errorf("the second runtime's call was answered %q, want the breaker's refusal", msgs[2].Content[0].Content)
	}
	c.Advance(30 * time.Second)
	healthy.Store(true)
	startAndDrain(t, rt2, RunRequest{Agent: "b", User: "u", Input: "track again"})
	if calls2.Load() != 1 {
		t.Fatalf("%d calls after the open time, want the one probe", calls2.Load())
	}
	all, err := st.Breakers(context.Background())
	if err != nil || len(all) != 1 || all[0].State != store.BreakerClosed {
		t.Fatalf("stored breakers %+v, %v; want track closed by the probe", all, err)
	}
	c.Advance(time.Second)
	startAndDrain(t, rt1, RunRequest{Agent: "a", User: "u", Input: "track"})
	if calls1.Load() != 6 {
		t.Errorf("%d calls from the first runtime once closed, want 6", calls1.Load())
	}
}
