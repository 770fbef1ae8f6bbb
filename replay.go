package belay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/belayrun/belay/internal/ledger"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/store"
)

// Replay as evaluation: recorded runs are run again, on another model,
// version or policy, in a sandbox store, without touching the world. A read
// is answered with the result the recorded run got for the same arguments;
// a side effect is never executed: one the recorded run's ledger holds is
// answered with its recorded result, any other is recorded as "would have
// done". Each replay is then compared with its recording.

// ReplayOptions configures Replay.
type ReplayOptions struct {
	// Agent is what the runs are replayed with: the recorded runs' agent
	// with another model, instructions, version or policy. Required. Its
	// tools' calls are answered as above; its requirements check the world
	// as it is, read only.
	Agent *Agent
	// Sandbox is the store the replays run in, never the recorded runs'.
	// Required. A run replayed twice in one sandbox is the same replay:
	// use a new sandbox for each evaluation.
	Sandbox store.Store
	// LiveReads names read tools called for real when no recorded call
	// had the same arguments. Otherwise such a call answers an error that
	// says no recording has it.
	LiveReads []string
	// MaxRounds bounds the rounds of work and approvals of one replay.
	// Default 20.
	MaxRounds int
}

// Effect comparisons of a replay with its recording.
const (
	EffectSame          = "same"
	EffectMissing       = "missing"
	EffectExtra         = "extra"
	EffectDifferentArgs = "different_args"
)

// ReplayedEffect is one side effect of a replay or of its recording,
// compared.
type ReplayedEffect struct {
	Tool string `json:"tool"`
	// Comparison is same, missing (the recording did it, the replay not),
	// extra (the replay would have, the recording did not) or
	// different_args (both, with other arguments).
	Comparison string `json:"comparison"`
	// Args are the replay's arguments (the recording's for missing), and
	// RecordedArgs the recording's for different_args; redacted as the
	// tool declares.
	Args         json.RawMessage `json:"args,omitempty"`
	RecordedArgs json.RawMessage `json:"recorded_args,omitempty"`
}

// ReplayResult is one run replayed.
type ReplayResult struct {
	RunID    string `json:"run_id"`
	ReplayID string `json:"replay_id"`
	// Status and StopReason are the replay's end; Verified says its
	// requirements held (stop reason verified).
	Status     store.Status `json:"status"`
	StopReason string       `json:"stop_reason"`
	Verified   bool         `json:"verified"`
	// Effects compare the replay's side effects with the recording's.
	Effects       []ReplayedEffect `json:"effects"`
	Same          int              `json:"same"`
	Missing       int              `json:"missing"`
	Extra         int              `json:"extra"`
	DifferentArgs int              `json:"different_args"`
	// WouldHaveDone counts the replay's side effects the recording's
	// ledger did not answer: nothing was executed for them.
	WouldHaveDone int `json:"would_have_done"`
	// Approvals counts the approvals the replay would have asked for.
	Approvals    int   `json:"approvals"`
	Turns        int64 `json:"turns"`
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	// CostNanoUSD is the replay's model cost.
	CostNanoUSD int64 `json:"cost_nano_usd"`
}

// ReplayDecider approves, in a sandbox, whatever a replay asks for, so the
// replay goes on; the approvals are counted, not decided by anyone.
const ReplayDecider = "policy:replay"

// Replay replays each of runs, read from src, as o says, and compares it
// with its recording. Nothing it does reaches the world through the
// agent's tools.
func Replay(ctx context.Context, src store.Store, runs []store.Run, o ReplayOptions) ([]ReplayResult, error) {
	if o.Agent == nil || o.Sandbox == nil {
		return nil, errors.New("replay: an agent and a sandbox store are required")
	}
	if o.Sandbox == src {
		return nil, errors.New("replay: the sandbox must be another store than the recorded runs'")
	}
	if o.MaxRounds <= 0 {
		o.MaxRounds = 20
	}
	out := make([]ReplayResult, 0, len(runs))
	for _, run := range runs {
		res, err := replayOne(ctx, src, run, o)
		if err != nil {
			return out, fmt.Errorf("replay run %s: %w", run.ID, err)
		}
		out = append(out, res)
	}
	return out, nil
}

// recording is what a recorded run's tools answered: reads by tool and
// canonical arguments, in order, and the side effects of its ledger by
// intent (tool and business arguments' hash).
type recording struct {
	mu      sync.Mutex
	reads   map[string][]model.Block
	effects map[string]store.Effect
	order   []store.Effect
	// did are the replay's side effects, as called.
	did []replayCall
}

type replayCall struct {
	tool     string
	args     json.RawMessage
	argsHash string
	answered bool
}

func readRecording(ctx context.Context, src store.Store, run store.Run) (*recording, error) {
	rows, err := src.Messages(ctx, run.ID)
	if err != nil {
		return nil, err
	}
	rec := &recording{reads: map[string][]model.Block{}, effects: map[string]store.Effect{}}
	uses := map[string]model.Block{}
	for _, row := range rows {
		blocks, err := model.DecodeBlocks(row.Content)
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", row.Seq, err)
		}
		for _, b := range blocks {
			switch b.Type {
			case model.TypeToolUse:
				uses[b.ID] = b
			case model.TypeToolResult:
				if use, ok := uses[b.ToolUseID]; ok {
					k := readKey(use.Name, use.Input)
					rec.reads[k] = append(rec.reads[k], b)
				}
			}
		}
	}
	effects, err := src.Effects(ctx, run.Tenant, run.ID)
	if err != nil {
		return nil, err
	}
	for _, e := range effects {
		if e.State == store.EffectFailed {
			continue // it did not happen
		}
		rec.effects[strings.TrimPrefix(e.Key, run.ID+":")] = e
		rec.order = append(rec.order, e)
	}
	return rec, nil
}

func readKey(tool string, args json.RawMessage) string {
	c, err := ledger.Canonical(args, nil)
	if err != nil {
		c = args
	}
	return tool + "\x00" + string(c)
}

// errNotRecorded answers a read the recording has no result for.
var errNotRecorded = errors.New("replay: no recorded call of this tool had these arguments, and the tool is not read live in a replay")

// sandboxAgent is a copy of a with its tools answered from rec.
func sandboxAgent(a *Agent, rec *recording, live []string) *Agent {
	c := *a
	c.Tools = make([]Tool, len(a.Tools))
	for i, t := range a.Tools {
		orig := t
		t.Reconcile, t.HonorsKey = nil, false
		if !orig.Effect.SideEffecting() {
			t.Call = func(ctx context.Context, in json.RawMessage) (json.RawMessage, error) {
				rec.mu.Lock()
				k := readKey(orig.Name, in)
				q := rec.reads[k]
				var got *model.Block
				if len(q) > 0 {
					got, rec.reads[k] = &q[0], q[1:]
				}
				rec.mu.Unlock()
				switch {
				case got != nil && got.IsError:
					return nil, errors.New(got.Content)
				case got != nil:
					return json.RawMessage(got.Content), nil
				case slices.Contains(live, orig.Name):
					return orig.Call(ctx, in)
				}
				return nil, errNotRecorded
			}
		} else {
			t.Call = func(ctx context.Context, in json.RawMessage) (json.RawMessage, error) {
				keyArgs, err := ledger.Canonical(in, orig.KeyFields)
				if err != nil {
					return nil, err
				}
				all, err := ledger.Canonical(in, nil)
				if err != nil {
					return nil, err
				}
				rec.mu.Lock()
				defer rec.mu.Unlock()
				e, ok := rec.effects[orig.Name+":"+ledger.Hash(keyArgs)[:24]]
				call := replayCall{tool: orig.Name, args: orig.redact(all), argsHash: ledger.Hash(all), answered: ok && e.State == store.EffectDone}
				rec.did = append(rec.did, call)
				if call.answered {
					return e.Result, nil
				}
				return json.Marshal(map[string]any{"ok": true, "replay": "would have done; nothing was executed"})
			}
		}
		c.Tools[i] = t
	}
	return &c
}

func replayOne(ctx context.Context, src store.Store, run store.Run, o ReplayOptions) (ReplayResult, error) {
	rec, err := readRecording(ctx, src, run)
	if err != nil {
		return ReplayResult{}, err
	}
	agent := sandboxAgent(o.Agent, rec, o.LiveReads)
	rt, err := New(Config{Store: o.Sandbox, Agents: []*Agent{agent}, HumanApproval: true, Workers: 1})
	if err != nil {
		return ReplayResult{}, err
	}
	replay, _, err := rt.StartRun(ctx, RunRequest{Agent: agent.Name, Tenant: run.Tenant, User: run.User,
		ClientRequestID: run.ClientRequestID, Input: run.Input, RequestedBy: "replay:" + run.ID})
	if err != nil {
		return ReplayResult{}, err
	}
	res := ReplayResult{RunID: run.ID, ReplayID: replay.ID}
	for range o.MaxRounds {
		if err := rt.Drain(ctx); err != nil {
			return res, err
		}
		pending, err := o.Sandbox.Approvals(ctx, store.ListApprovalsParams{Tenant: run.Tenant, RunID: replay.ID, Status: store.ApprovalPending})
		if err != nil {
			return res, err
		}
		if len(pending) == 0 {
			break
		}
		for _, a := range pending {
			res.Approvals++
			if _, err := rt.Decide(ctx, a.Tenant, a.ID, ApprovalDecision{Choice: Approve, By: ReplayDecider}); err != nil {
				return res, err
			}
		}
	}
	if replay, err = o.Sandbox.GetRun(ctx, run.Tenant, replay.ID); err != nil {
		return res, err
	}
	res.Status, res.StopReason = replay.Status, replay.StopReason
	res.Verified = replay.Status == store.StatusDone && replay.StopReason == "verified"
	res.Turns, res.InputTokens, res.OutputTokens, res.CostNanoUSD = replay.ModelCalls, replay.InputTokens, replay.OutputTokens, replay.CostNanoUSD
	res.Effects = compareEffects(rec)
	for _, e := range res.Effects {
		switch e.Comparison {
		case EffectSame:
			res.Same++
		case EffectMissing:
			res.Missing++
		case EffectExtra:
			res.Extra++
		case EffectDifferentArgs:
			res.DifferentArgs++
		}
	}
	for _, d := range rec.did {
		if !d.answered {
			res.WouldHaveDone++
		}
	}
	return res, nil
}

// compareEffects pairs the replay's side effects with the recording's:
// first those with the same tool and arguments, then, in order, those of
// the same tool with other arguments; the rest are missing or extra.
func compareEffects(rec *recording) []ReplayedEffect {
	recorded := slices.Clone(rec.order)
	used := make([]bool, len(recorded))
	out := []ReplayedEffect{}
	var unmatched []replayCall
	for _, d := range rec.did {
		i := slices.IndexFunc(recorded, func(e store.Effect) bool { return e.Tool == d.tool && e.ArgsHash == d.argsHash })
		for i >= 0 && used[i] {
			j := slices.IndexFunc(recorded[i+1:], func(e store.Effect) bool { return e.Tool == d.tool && e.ArgsHash == d.argsHash })
			if j < 0 {
				i = -1
				break
			}
			i += j + 1
		}
		if i < 0 {
			unmatched = append(unmatched, d)
			continue
		}
		used[i] = true
		out = append(out, ReplayedEffect{Tool: d.tool, Comparison: EffectSame, Args: d.args})
	}
	for _, d := range unmatched {
		i := -1
		for j, e := range recorded {
			if !used[j] && e.Tool == d.tool {
				i = j
				break
			}
		}
		if i < 0 {
			out = append(out, ReplayedEffect{Tool: d.tool, Comparison: EffectExtra, Args: d.args})
			continue
		}
		used[i] = true
		out = append(out, ReplayedEffect{Tool: d.tool, Comparison: EffectDifferentArgs, Args: d.args, RecordedArgs: recorded[i].Args})
	}
	for j, e := range recorded {
		if !used[j] {
			out = append(out, ReplayedEffect{Tool: e.Tool, Comparison: EffectMissing, Args: e.Args})
		}
	}
	return out
}

// ReplaySummary is the aggregate of a set of replays.
type ReplaySummary struct {
	Runs          int   `json:"runs"`
	Verified      int   `json:"verified"`
	Same          int   `json:"same"`
	Missing       int   `json:"missing"`
	Extra         int   `json:"extra"`
	DifferentArgs int   `json:"different_args"`
	WouldHaveDone int   `json:"would_have_done"`
	Approvals     int   `json:"approvals"`
	Turns         int64 `json:"turns"`
	InputTokens   int64 `json:"input_tokens"`
	OutputTokens  int64 `json:"output_tokens"`
	CostNanoUSD   int64 `json:"cost_nano_usd"`
	// Unchanged counts the replays that made every side effect of their
	// recording with the same arguments and no other.
	Unchanged int `json:"unchanged"`
}

// SummarizeReplays adds up results.
func SummarizeReplays(results []ReplayResult) ReplaySummary {
	s := ReplaySummary{Runs: len(results)}
	for _, r := range results {
		if r.Verified {
			s.Verified++
		}
		if r.Missing == 0 && r.Extra == 0 && r.DifferentArgs == 0 {
			s.Unchanged++
		}
		s.Same += r.Same
		s.Missing += r.Missing
		s.Extra += r.Extra
		s.DifferentArgs += r.DifferentArgs
		s.WouldHaveDone += r.WouldHaveDone
		s.Approvals += r.Approvals
		s.Turns += r.Turns
		s.InputTokens += r.InputTokens
		s.OutputTokens += r.OutputTokens
		s.CostNanoUSD += r.CostNanoUSD
	}
	return s
}
