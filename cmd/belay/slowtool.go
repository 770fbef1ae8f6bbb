package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/belayrun/belay"
)

// slowMarker is what a tool slowed by --slow-tool prints when a call enters
// the delay, so a test knows the worker is in the middle of a step.
const slowMarker = "SLOWTOOL"

// slowTool is a fault for tests of stalled workers: every call of one tool
// waits before it runs, as a call to a slow downstream system does.
type slowTool struct {
	name  string
	delay time.Duration
}

// slowToolFlag registers --slow-tool NAME:DURATION.
func slowToolFlag(fs *flag.FlagSet) *slowTool {
	s := &slowTool{}
	fs.Var(s, "slow-tool", "testing: make every call of tool NAME wait DURATION (or until cancelled) before it runs, as NAME:DURATION")
	return s
}

func (s *slowTool) String() string {
	if s.name == "" {
		return ""
	}
	return s.name + ":" + s.delay.String()
}

func (s *slowTool) Set(v string) error {
	name, delay, ok := strings.Cut(v, ":")
	d, err := time.ParseDuration(delay)
	if !ok || name == "" || err != nil || d <= 0 {
		return fmt.Errorf("want NAME:DURATION, like add_internal_note:20s")
	}
	s.name, s.delay = name, d
	return nil
}

// apply slows the named tool of agent. Each call prints slowMarker and the
// tool's name on stdout, then waits for the delay or for its context, which
// the runtime cancels when the lease is lost: a cancelled call prints the
// cause and returns the context's error without running.
func (s *slowTool) apply(agent *belay.Agent, stdout io.Writer) error {
	if s.name == "" {
		return nil
	}
	for i := range agent.Tools {
		t := &agent.Tools[i]
		if t.Name != s.name {
			continue
		}
		call := t.Call
		t.Call = func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
			fmt.Fprintln(stdout, slowMarker, s.name)
			if f, ok := stdout.(*os.File); ok {
				_ = f.Sync()
			}
			timer := time.NewTimer(s.delay)
			defer timer.Stop()
			select {
			case <-ctx.Done():
				// Why the runtime gave up the call: a test of a stalled
				// worker reads that it lost its lease.
				fmt.Fprintln(stdout, slowMarker, s.name, "cancelled:", context.Cause(ctx))
				return nil, ctx.Err()
			case <-timer.C:
			}
			return call(ctx, args)
		}
		return nil
	}
	return fmt.Errorf("--slow-tool: the agent has no tool %q", s.name)
}
