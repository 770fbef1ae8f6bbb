package main

import (
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestShow(t *testing.T) {
	t.Parallel()
	f := newFixture(t)

	out, err := belayCmd(t, "show", f.done, "--db", f.db)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out, "\n")
	for _, want := range [][]string{
		{"run", f.done},
		{"status", "done (no_requirements)"},
		{"agent", "support@"},
		{"tenant/user", "default/alice"},
		{"step", "2"},
		{"model calls", "3"},
		{"plan", "v1: look up the order; refund it"},
		{"#0 user"},
		{"text: Refund order A1"},
		{"tool_use lookup", `"order":"A1"`},
		{"tool_result", `{"order":"A1","amount":29}`},
		{"tool_result", "ERROR", `there is no tool named "nope"`},
		{"Refunded order A1."},
		{"side effects (1)"},
		{"refund", f.done + ":refund:", "done", "1", `{"refunded":true}`},
	} {
		if !containsLine(lines, want...) {
			t.Errorf("no line has all of %q:\n%s", want, out)
		}
	}

	out, err = belayCmd(t, "show", "--db", f.db, f.failed)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "failed (model_error)") || !strings.Contains(out, "400 bad request") {
		t.Errorf("the failed run should show its status and why:\n%s", out)
	}
}

func TestShowJSON(t *testing.T) {
	t.Parallel()
	f := newFixture(t)

	out, err := belayCmd(t, "show", f.done, "--db", f.db, "--json")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(strings.TrimSpace(out), "\n"); n != 0 {
		t.Fatalf("want one JSON object on one line, got %d lines", n+1)
	}
	var cp map[string]any
	if err := json.Unmarshal([]byte(out), &cp); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"run_id", "tenant", "user", "agent", "agent_version", "status", "step",
		"messages", "input_tokens", "output_tokens", "cost_usd", "llm_calls", "model_calls", "plan", "guard",
		"side_effects", "stop_reason", "stop_detail", "final", "lease_epoch", "created_at", "updated_at"} {
		if _, ok := cp[k]; !ok {
			t.Errorf("no key %q", k)
		}
	}
	for k, want := range map[string]any{
		"run_id": f.done, "tenant": "default", "user": "alice", "agent": "support", "status": "done",
		"step": 2.0, "model_calls": 3.0, "llm_calls": 3.0, "stop_reason": "no_requirements", "stop_detail": "the agent declares no requirements, so no code checked the world: the run is done on the model's word",
		"final": "Refunded order A1.",
	} {
		if cp[k] != want {
			t.Errorf("%s = %#v, want %#v", k, cp[k], want)
		}
	}
	for _, k := range []string{"input_tokens", "output_tokens", "cost_usd", "lease_epoch"} {
		if v, _ := cp[k].(float64); v <= 0 {
			t.Errorf("%s = %v, want > 0", k, cp[k])
		}
	}
	if plan, _ := cp["plan"].(map[string]any); plan["version"] != 1.0 {
		t.Errorf("plan = %v, want version 1", cp["plan"])
	}
	if guard, _ := cp["guard"].(map[string]any); guard["calls"] != 3.0 {
		t.Errorf("guard = %v, want 3 calls", cp["guard"])
	}

	var msgs []struct {
		Role    string           `json:"role"`
		Content []map[string]any `json:"content"`
	}
	remarshal(t, cp["messages"], &msgs)
	if len(msgs) != 6 {
		t.Fatalf("want 6 messages, got %d", len(msgs))
	}
	wantBlocks := []struct {
		msg, block int
		role       string
		fields     map[string]any
	}{
		{0, 0, "user", map[string]any{"type": "text", "text": "Refund order A1"}},
		{1, 0, "assistant", map[string]any{"type": "text", "text": "PLAN: look up the order; refund it"}},
		{1, 1, "assistant", map[string]any{"type": "tool_use", "name": "lookup"}},
		{3, 1, "assistant", map[string]any{"type": "tool_use", "name": "nope"}},
		{4, 1, "user", map[string]any{"type": "tool_result", "is_error": true}},
		{5, 0, "assistant", map[string]any{"type": "text", "text": "Refunded order A1."}},
	}
	for _, w := range wantBlocks {
		m := msgs[w.msg]
		if m.Role != w.role || w.block >= len(m.Content) {
			t.Errorf("message %d: role %s with %d blocks, want role %s and block %d", w.msg, m.Role, len(m.Content), w.role, w.block)
			continue
		}
		for k, v := range w.fields {
			if got := m.Content[w.block][k]; got != v {
				t.Errorf("message %d block %d: %s = %#v, want %#v", w.msg, w.block, k, got, v)
			}
		}
	}
	use := msgs[1].Content[1]
	if input, _ := use["input"].(map[string]any); input["order"] != "A1" || use["id"] == "" {
		t.Errorf("tool_use block %v: want its id and input as an object", use)
	}
	if result := msgs[2].Content[0]; result["tool_use_id"] != use["id"] || result["is_error"] != false {
		t.Errorf("tool_result block %v does not answer %v", result, use["id"])
	}

	var effects []map[string]any
	remarshal(t, cp["side_effects"], &effects)
	if len(effects) != 1 {
		t.Fatalf("want 1 side effect, got %v", effects)
	}
	e := effects[0]
	if e["tool"] != "refund" || e["state"] != "done" || e["attempts"] != 1.0 || !strings.HasPrefix(e["key"].(string), f.done+":refund:") {
		t.Errorf("side effect %v: want refund, done, 1 attempt, keyed by the run", e)
	}
	if result, _ := e["result"].(map[string]any); result["refunded"] != true {
		t.Errorf("side effect result = %v, want the tool's JSON", e["result"])
	}
}

func TestShowUnknownRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, cmd := range []string{"show", "trace"} {
		_, err := belayCmd(t, cmd, "run_nope", "--db", f.db)
		want := "run run_nope not found in " + f.db + " (list runs with: belay runs --db " + f.db + ")"
		if err == nil || err.Error() != want {
			t.Errorf("%s of an unknown run: got error %v, want %q", cmd, err, want)
		}
	}
}

func TestShowUsage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, args := range [][]string{
		{"show", "--db", f.db},
		{"show", "--db", f.db, f.done, f.failed},
		{"trace", "--db", f.db},
	} {
		_, err := belayCmd(t, args...)
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("%q: got %v, want a usage error", args, err)
		}
	}
}

func remarshal(t *testing.T, v, into any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, into); err != nil {
		t.Fatal(err)
	}
}

// A run created before runs recorded which of their arguments are secret:
// the CLI, which has no agent code, cannot tell, and shows no value of its
// calls (their tools, field names and results are shown).
func TestShowRunThatRecordsNoSecrets(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	db, err := sql.Open("sqlite", f.db)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("UPDATE runs SET sensitive = NULL WHERE id = ?", f.done); err != nil {
		t.Fatal(err)
	}
	const hidden = `"order":"[hidden: this run does not record which arguments are secret]"`
	for _, args := range [][]string{{"show", f.done}, {"show", f.done, "--json"}} {
		out, err := belayCmd(t, append(args, "--db", f.db)...)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out, `lookup {"order":"A1"}`) || strings.Contains(out, `"input":{"order":"A1"}`) ||
			strings.Count(out, hidden) < 2 || !strings.Contains(out, `{"refunded":true}`) {
			t.Errorf("belay %s:\n%s\nwant the calls' values hidden, the results shown", strings.Join(args, " "), out)
		}
	}
}
