package client_test

import (
	"errors"
	"testing"

	"github.com/belayrun/belay/client"
	"github.com/belayrun/belay/store"
)

// Replay answers each run replayed, compared with its recording, and the
// totals; an agent the server does not serve is ErrUnknownAgent.
func TestReplay(t *testing.T) {
	t.Parallel()
	ts := newServer(t)
	ctx := t.Context()
	sam := newClient(t, ts, ts.key("sam", store.RoleOperator, store.RoleApprover))
	run, _ := waitingRun(t, ts, sam, "")
	r, err := sam.Replay(ctx, client.ReplayRequest{Agent: "support", Runs: []string{run.ID}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Runs) != 1 || r.Runs[0].RunID != run.ID || r.Total.Runs != 1 || r.Model != "primary" {
		t.Fatalf("replay: %+v", r)
	}
	if got := r.Runs[0]; got.Extra == 0 || got.WouldHaveDone == 0 || got.Approvals == 0 || r.Total.Extra != got.Extra {
		t.Errorf("the replay of a run waiting on its refund: %+v; want the refund extra, would have done, after an approval", got)
	}
	if _, err := sam.Replay(ctx, client.ReplayRequest{Agent: "nobody"}); !errors.Is(err, client.ErrUnknownAgent) {
		t.Errorf("replay of an unknown agent: %v, want ErrUnknownAgent", err)
	}
}
