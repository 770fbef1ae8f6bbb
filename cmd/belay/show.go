package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/store"
)

const showUsage = `usage: belay show RUN [--db PATH] [--json]

Shows one run: status, cost, plan, the conversation and the side effects.`

func runShow(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("show", showUsage, stdout)
	db := dbFlag(fs)
	asJSON := jsonFlag(fs, "the whole checkpoint, one object")
	id, err := fs.parseRunArg(args)
	if err != nil {
		return err
	}

	s, err := db.openReadOnly(ctx)
	if err != nil {
		return err
	}
	defer s.Close()

	run, err := getRun(ctx, s, db, id)
	if err != nil {
		return err
	}
	msgs, err := s.Messages(ctx, id)
	if err != nil {
		return fmt.Errorf("read messages of %s: %w", id, err)
	}
	effects, err := s.Effects(ctx, "", id)
	if err != nil {
		return fmt.Errorf("read side effects of %s: %w", id, err)
	}
	cp, err := newCheckpoint(run, msgs, effects)
	if err != nil {
		return err
	}
	if f, ok := s.(store.Forker); ok {
		if l, err := f.Lineage(ctx, "", id); err == nil {
			cp.ForkedFrom = &forkedFromJSON{RunID: l.ParentRunID, AtStep: l.AtStep, By: l.By, Reason: l.Reason, At: l.CreatedAt.UTC()}
		} else if !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("read the lineage of %s: %w", id, err)
		}
	}
	if *asJSON {
		return writeJSON(stdout, cp)
	}
	return printCheckpoint(stdout, cp)
}

// checkpoint is a run as `belay show --json` prints it: everything the store
// holds about it, in a shape any tool can read, with the values of secret
// arguments redacted by what the run recorded (belay.RedactStoredArgs).
type checkpoint struct {
	RunID           string        `json:"run_id"`
	Tenant          string        `json:"tenant"`
	User            string        `json:"user"`
	ClientRequestID string        `json:"client_request_id"`
	Agent           string        `json:"agent"`
	AgentVersion    string        `json:"agent_version"`
	Input           string        `json:"input"`
	DryRun          bool          `json:"dry_run"`
	Status          store.Status  `json:"status"`
	Step            int           `json:"step"`
	Messages        []messageJSON `json:"messages"`
	InputTokens     int64         `json:"input_tokens"`
	OutputTokens    int64         `json:"output_tokens"`
	CostUSD         float64       `json:"cost_usd"`
	CostNanoUSD     int64         `json:"cost_nano_usd"`
	// LLMCalls repeats ModelCalls under the name other tools use.
	LLMCalls     int64           `json:"llm_calls"`
	ModelCalls   int64           `json:"model_calls"`
	Plan         json.RawMessage `json:"plan"`
	Guard        json.RawMessage `json:"guard"`
	SideEffects  []effectJSON    `json:"side_effects"`
	StopReason   string          `json:"stop_reason"`
	StopDetail   string          `json:"stop_detail"`
	Escalation   json.RawMessage `json:"escalation,omitempty"`
	Final        string          `json:"final"`
	LeaseOwner   string          `json:"lease_owner"`
	LeaseExpires *time.Time      `json:"lease_expires"`
	LeaseEpoch   int64           `json:"lease_epoch"`
	ResumeAfter  *time.Time      `json:"resume_after"`
	CreatedAt    time.Time       `json:"created_at"`
	UpdatedAt    time.Time       `json:"updated_at"`
	// ForkedFrom, on a fork, is its lineage.
	ForkedFrom *forkedFromJSON `json:"forked_from,omitempty"`

	// blocks are the decoded messages, for the human view.
	blocks [][]model.Block
}

// forkedFromJSON is where a fork came from.
type forkedFromJSON struct {
	RunID  string    `json:"run_id"`
	AtStep int       `json:"at_step"`
	By     string    `json:"by"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
}

type messageJSON struct {
	Seq       int       `json:"seq"`
	Step      int       `json:"step"`
	Role      string    `json:"role"`
	Content   []any     `json:"content"`
	CreatedAt time.Time `json:"created_at"`
}

type effectJSON struct {
	Key       string            `json:"key"`
	Tool      string            `json:"tool"`
	State     store.EffectState `json:"state"`
	Attempts  int               `json:"attempts"`
	Step      int               `json:"step"`
	ArgsHash  string            `json:"args_hash"`
	Args      json.RawMessage   `json:"args"`
	Result    json.RawMessage   `json:"result"`
	CreatedAt time.Time         `json:"created_at"`
	UpdatedAt time.Time         `json:"updated_at"`
}

func newCheckpoint(run store.Run, msgs []store.Message, effects []store.Effect) (checkpoint, error) {
	cp := checkpoint{
		RunID: run.ID, Tenant: run.Tenant, User: run.User, ClientRequestID: run.ClientRequestID,
		Agent: run.Agent, AgentVersion: run.AgentVersion, Input: run.Input, DryRun: run.DryRun,
		Status: run.Status, Step: run.Step,
		Messages:    make([]messageJSON, 0, len(msgs)),
		InputTokens: run.InputTokens, OutputTokens: run.OutputTokens,
		CostUSD: model.Nanodollars(run.CostNanoUSD).Dollars(), CostNanoUSD: run.CostNanoUSD,
		LLMCalls: run.ModelCalls, ModelCalls: run.ModelCalls,
		Plan: jsonObject(run.Plan), Guard: jsonObject(run.Guard),
		SideEffects: make([]effectJSON, 0, len(effects)),
		StopReason:  run.StopReason, StopDetail: run.StopDetail, Final: run.Final, Escalation: run.Escalation,
		LeaseOwner: run.LeaseOwner, LeaseExpires: optionalTime(run.LeaseExpires), LeaseEpoch: run.LeaseEpoch,
		ResumeAfter: optionalTime(run.ResumeAfter),
		CreatedAt:   run.CreatedAt.UTC(), UpdatedAt: run.UpdatedAt.UTC(),
	}
	for _, m := range msgs {
		blocks, err := model.DecodeBlocks(m.Content)
		if err != nil {
			return checkpoint{}, fmt.Errorf("message %d of %s: %w", m.Seq, run.ID, err)
		}
		blocks = belay.RedactStoredBlocks(run, blocks)
		content := make([]any, len(blocks))
		for i, b := range blocks {
			content[i] = blockJSON(b)
		}
		cp.blocks = append(cp.blocks, blocks)
		cp.Messages = append(cp.Messages, messageJSON{Seq: m.Seq, Step: m.Step, Role: m.Role,
			Content: content, CreatedAt: m.CreatedAt.UTC()})
	}
	for _, e := range effects {
		cp.SideEffects = append(cp.SideEffects, effectJSON{
			Key: e.Key, Tool: e.Tool, State: e.State, Attempts: e.Attempts, Step: e.Step,
			ArgsHash: e.ArgsHash, Args: jsonValue(belay.RedactStoredArgs(run, e.Tool, e.Args)), Result: jsonValue(e.Result),
			CreatedAt: e.CreatedAt.UTC(), UpdatedAt: e.UpdatedAt.UTC(),
		})
	}
	return cp, nil
}

// blockJSON is a content block as the providers write it. A provider's own
// block is its JSON object, unchanged.
func blockJSON(b model.Block) any {
	switch b.Type {
	case model.TypeText:
		return struct {
			Type model.BlockType `json:"type"`
			Text string          `json:"text"`
		}{b.Type, b.Text}
	case model.TypeToolUse:
		return struct {
			Type  model.BlockType `json:"type"`
			ID    string          `json:"id"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		}{b.Type, b.ID, b.Name, jsonObject(b.Input)}
	case model.TypeToolResult:
		return struct {
			Type      model.BlockType `json:"type"`
			ToolUseID string          `json:"tool_use_id"`
			Content   string          `json:"content"`
			IsError   bool            `json:"is_error"`
		}{b.Type, b.ToolUseID, b.Content, b.IsError}
	case model.TypeThinking:
		return struct {
			Type      model.BlockType `json:"type"`
			Thinking  string          `json:"thinking"`
			Signature string          `json:"signature"`
		}{b.Type, b.Thinking, b.Signature}
	}
	if json.Valid(b.Raw) {
		return json.RawMessage(b.Raw)
	}
	return struct {
		Type model.BlockType `json:"type"`
	}{b.Type}
}

// jsonObject returns stored JSON as is, or {} when there is none yet (a run
// that has not checkpointed has no plan).
func jsonObject(b []byte) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("{}")
	}
	return jsonValue(b)
}

// jsonValue returns stored JSON as is, null when absent, and bytes that are
// not JSON as a string, so one bad row cannot make the output unreadable.
func jsonValue(b []byte) json.RawMessage {
	switch {
	case len(b) == 0:
		return json.RawMessage("null")
	case json.Valid(b):
		return json.RawMessage(b)
	}
	s, _ := json.Marshal(string(b))
	return s
}

func optionalTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// previewLen bounds tool arguments and results in the human view; the JSON
// view has them whole.
const previewLen = 200

func printCheckpoint(w io.Writer, cp checkpoint) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, format string, a ...any) { fmt.Fprintf(tw, "%s\t%s\n", k, fmt.Sprintf(format, a...)) }
	row("run", "%s", cp.RunID)
	if cp.StopReason != "" {
		row("status", "%s (%s)", cp.Status, cp.StopReason)
	} else {
		row("status", "%s", cp.Status)
	}
	row("agent", "%s@%s", cp.Agent, cp.AgentVersion)
	if f := cp.ForkedFrom; f != nil {
		row("forked", "from %s at its step %d, by %s%s", f.RunID, f.AtStep, f.By, map[bool]string{true: ": " + f.Reason}[f.Reason != ""])
	}
	user := cp.User
	if user == "" {
		user = "-"
	}
	row("tenant/user", "%s/%s", cp.Tenant, user)
	if cp.DryRun {
		row("dry run", "yes: writes were not executed")
	}
	row("step", "%d", cp.Step)
	row("model calls", "%d", cp.ModelCalls)
	row("tokens", "%d in, %d out", cp.InputTokens, cp.OutputTokens)
	row("cost", "$%.6f", cp.CostUSD)
	if cp.StopDetail != "" {
		row("stop detail", "%s", oneLine(cp.StopDetail, 0))
	}
	if cp.ResumeAfter != nil {
		row("resume after", "%s", cp.ResumeAfter.Local().Format(time.DateTime))
	}
	if cp.LeaseOwner != "" && cp.LeaseExpires != nil {
		row("lease", "epoch %d, %s, until %s", cp.LeaseEpoch, cp.LeaseOwner, cp.LeaseExpires.Local().Format(time.DateTime))
	}
	row("plan", "%s", planText(cp.Plan))
	row("guard", "%s", compact(cp.Guard))
	row("created", "%s", cp.CreatedAt.Local().Format(time.DateTime))
	row("updated", "%s", cp.UpdatedAt.Local().Format(time.DateTime))
	if err := tw.Flush(); err != nil {
		return err
	}
	if cp.Final != "" {
		fmt.Fprintf(w, "\nfinal answer:\n%s\n", indent(cp.Final, "  "))
	}

	if len(cp.Escalation) > 0 {
		printEscalation(w, cp.Escalation)
	}

	fmt.Fprintf(w, "\nmessages (%d):\n", len(cp.Messages))
	for i, m := range cp.Messages {
		fmt.Fprintf(w, "  #%d %s (step %d)\n", m.Seq, m.Role, m.Step)
		for _, b := range cp.blocks[i] {
			fmt.Fprintln(w, indent(blockText(b), "      "))
		}
	}

	fmt.Fprintf(w, "\nside effects (%d):\n", len(cp.SideEffects))
	if len(cp.SideEffects) == 0 {
		return nil
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  TOOL\tKEY\tSTATE\tATTEMPTS\tRESULT")
	for _, e := range cp.SideEffects {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%s\n", e.Tool, e.Key, e.State, e.Attempts, oneLine(string(e.Result), 80))
	}
	return tw.Flush()
}

// blockText renders one block for a person.
func blockText(b model.Block) string {
	switch b.Type {
	case model.TypeText:
		return "text: " + b.Text
	case model.TypeToolUse:
		return fmt.Sprintf("tool_use %s %s [%s]", b.Name, oneLine(string(b.Input), previewLen), b.ID)
	case model.TypeToolResult:
		mark := ""
		if b.IsError {
			mark = " ERROR"
		}
		return fmt.Sprintf("tool_result [%s]%s: %s", b.ToolUseID, mark, oneLine(b.Content, previewLen))
	case model.TypeThinking:
		return "thinking: " + oneLine(b.Thinking, previewLen)
	}
	return fmt.Sprintf("%s (provider block): %s", b.Type, oneLine(string(b.Raw), previewLen))
}

func planText(raw json.RawMessage) string {
	var p struct {
		Steps   []string `json:"steps"`
		Version int      `json:"version"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return compact(raw)
	}
	if len(p.Steps) == 0 {
		return "-"
	}
	return fmt.Sprintf("v%d: %s", p.Version, strings.Join(p.Steps, "; "))
}

func compact(raw json.RawMessage) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return string(raw)
	}
	return buf.String()
}

// oneLine folds s onto one line and, if n > 0, cuts it to n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if n > 0 && utf8.RuneCountInString(s) > n {
		r := []rune(s)
		s = string(r[:n]) + "…"
	}
	return s
}

func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+prefix)
}

// printEscalation renders the packet a person acts on.
func printEscalation(w io.Writer, raw json.RawMessage) {
	var e belay.Escalation
	if err := json.Unmarshal(raw, &e); err != nil {
		fmt.Fprintf(w, "\nescalation (unreadable: %v):\n  %s\n", err, compact(raw))
		return
	}
	fmt.Fprintf(w, "\nescalation: %s, %s\n", e.Status, e.Reason)
	fmt.Fprintf(w, "  why        %s\n", packetWhy(e))
	fmt.Fprintf(w, "  asked      %s\n", oneLine(e.Asked, previewLen))
	if len(e.Missing) > 0 {
		fmt.Fprintf(w, "  missing    %s\n", strings.Join(e.Missing, "; "))
	}
	fmt.Fprintf(w, "  tried      %d tool calls\n", len(e.Tried))
	for _, c := range e.Tried {
		fmt.Fprintf(w, "    step %d  %s %s -> %s\n", c.Step, c.Tool, oneLine(string(c.Args), 60), oneLine(c.Outcome, 80))
	}
	fmt.Fprintf(w, "  done       %d side effects (do not repeat them)\n", len(e.SideEffects))
	for _, se := range e.SideEffects {
		fmt.Fprintf(w, "    %s %s %s %s\n", se.Tool, se.State, se.Key, oneLine(se.Result, 60))
	}
	fmt.Fprintf(w, "  trace      %s\n", e.Trace)
	fmt.Fprintf(w, "  customer   %s\n", e.CustomerMessage)
}
