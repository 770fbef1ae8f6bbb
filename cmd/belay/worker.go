package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/examples/support"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/policy"
	"github.com/belayrun/belay/store"
)

// crashMarker is what a worker started with --crash-after prints when it
// reaches its crash point; it then waits to be killed.
const crashMarker = "CRASHPOINT"

const workerUsage = `usage: belay worker [--db PATH] [--world PATH] [--crash-after KIND | --crash-at-unknown | --crash-at-wait] [--conversation] [--clock-ahead D]

Executes the due runs of the support agent until none is due; belay demo
starts it as a process of its own so that it can kill it.`

// runWorker executes the due runs of the support agent until none is due.
// The demo starts it as a separate process so that it can kill it.
func runWorker(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("worker", workerUsage, stdout)
	db := dbFlag(fs)
	worldPath := fs.String("world", "", "path of the support world's database (default: DB + .world)")
	crashAfter := fs.String("crash-after", "", "after this kind of side effect lands (refund, email, note), stop and wait to be killed")
	crashAtUnknown := fs.Bool("crash-at-unknown", false, "once an unknown outcome is recorded, stop and wait to be killed")
	crashAtWait := fs.Bool("crash-at-wait", false, "once a run waits for its user's reply, stop and wait to be killed")
	conversation := fs.Bool("conversation", false, "the support agent asks the customer how to refund (belay demo --scenario conversation)")
	ahead := fs.Duration("clock-ahead", 0, "run the runtime's clock this far ahead of the real one, as belay demo does to show a reply that comes the next day")
	leaseTTL := fs.Duration("lease-ttl", 30*time.Second, "lease time-to-live")
	policyPath := fs.String("policy", "", "approval policy file (YAML or JSON) instead of the support desk's")
	if err := fs.parseNone(args); err != nil {
		return err
	}
	st, err := db.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	world, agent, err := openSupport(ctx, "worker", db, *worldPath, *policyPath)
	if err != nil {
		return err
	}
	defer world.Close()
	if *conversation {
		conversationAgent(agent)
	}
	if *crashAfter != "" {
		world.AfterEffect = func(kind string) {
			if kind != *crashAfter {
				return
			}
			// The effect has landed downstream and Belay has not recorded
			// it: the worst moment to die.
			hang(ctx, stdout, kind)
		}
	}
	var runStore store.Store = st
	if *crashAtUnknown {
		runStore = &crashAtUnknownStore{Store: st, crash: func() { hang(ctx, stdout, "unknown-outcome") }}
	}
	if *crashAtWait {
		ws, ok := st.(store.Waiter)
		if !ok {
			return usageError{"worker: --crash-at-wait needs a store that keeps waits"}
		}
		runStore = &crashAtWaitStore{Store: st, Waiter: ws, crash: func() { hang(ctx, stdout, "waiting-input") }}
	}
	rt, err := belay.New(belay.Config{
		Store:    runStore,
		Agents:   []*belay.Agent{agent},
		LeaseTTL: *leaseTTL,
		Clock:    clockAhead(*ahead),
		// The demo decides approvals in its own process.
		HumanApproval: true,
	})
	if err != nil {
		return err
	}
	return rt.Drain(ctx)
}

// hang says that the worker reached its crash point and waits to be killed.
func hang(ctx context.Context, stdout io.Writer, point string) {
	fmt.Fprintln(stdout, crashMarker, point)
	if f, ok := stdout.(*os.File); ok {
		_ = f.Sync()
	}
	<-ctx.Done()
}

// crashAtUnknownStore hangs the worker right after it records that a side
// effect's outcome is unknown: the effect may have landed, and nothing but
// the ledger says so.
type crashAtUnknownStore struct {
	store.Store
	crash func()
}

func (s *crashAtUnknownStore) Checkpoint(ctx context.Context, p store.CheckpointParams) error {
	if err := s.Store.Checkpoint(ctx, p); err != nil {
		return err
	}
	for _, e := range p.Effects {
		if e.State == store.EffectUnknown {
			s.crash()
		}
	}
	return nil
}

// crashAtWaitStore hangs the worker right after it writes a run that waits
// for its user: the question is on disk, and the worker holds nothing more
// of it. It keeps the store's waits, which the conversation needs.
type crashAtWaitStore struct {
	store.Store
	store.Waiter
	crash func()
}

func (s *crashAtWaitStore) Checkpoint(ctx context.Context, p store.CheckpointParams) error {
	if err := s.Store.Checkpoint(ctx, p); err != nil {
		return err
	}
	if p.Run.Status == store.StatusWaitingInput {
		s.crash()
	}
	return nil
}

// clockAhead is a clock d ahead of the real one; nil (the runtime's
// default) for none.
func clockAhead(d time.Duration) func() time.Time {
	if d == 0 {
		return nil
	}
	return func() time.Time { return time.Now().Add(d) }
}

// conversationAgent makes the support agent ask the customer how to
// refund, and wait for the answer up to a day.
func conversationAgent(agent *belay.Agent) {
	agent.Model = scripted.Func(support.ScriptConversation())
	agent.Conversation = &belay.Conversation{IdleTimeout: 24 * time.Hour}
}

// openSupport opens the support desk's world (DB + .world unless given) and
// its agent, with the policy file if one is given.
func openSupport(ctx context.Context, cmd string, db *storeTarget, worldPath, policyPath string) (*support.World, *belay.Agent, error) {
	if err := db.check(); err != nil {
		return nil, nil, usageError{cmd + ": " + err.Error()}
	}
	if worldPath == "" {
		if db.url != "" {
			return nil, nil, usageError{cmd + ": with --database-url, pass --world PATH for the support world's database"}
		}
		worldPath = db.path + ".world"
	}
	world, err := support.OpenWorld(ctx, worldPath)
	if err != nil {
		return nil, nil, err
	}
	agent := support.NewAgent(world, scripted.Func(support.Script()))
	if err := usePolicyFile(agent, policyPath); err != nil {
		world.Close()
		return nil, nil, err
	}
	return world, agent, nil
}

// usePolicyFile replaces an agent's policy with the one in path, if any.
func usePolicyFile(agent *belay.Agent, path string) error {
	if path == "" {
		return nil
	}
	f, err := policy.Load(path)
	if err != nil {
		return err
	}
	agent.Policy, agent.PolicyVersion = f.Policy(), f.Version()
	return nil
}
