package belay

import (
	"encoding/json"
	"testing"

	"github.com/belayrun/belay/model"
)

// TestStepEventsEncodeAsTheirMaps holds the step's event types to the bytes
// the maps they replaced gave, so traces written before and after read the
// same: same names, same order, same omissions.
func TestStepEventsEncodeAsTheirMaps(t *testing.T) {
	args := json.RawMessage(`{"amount": 12.5, "to": "a<b>@example.com"}`)
	for _, c := range []struct {
		name  string
		typed any
		asMap map[string]any
	}{
		{"model_call", modelCallEvent{
			CostUSD: 0.00123, InputTokens: 1514, LatencyMS: 12.345, Model: "scripted", OutputTokens: 49,
			Plan: []string{"look up", "refund"}, PlanVersion: 2, StopReason: model.StopReason("tool_use"),
			Thought: "refund <now> & \"say\" so", ToolCalls: []toolCallBrief{{Args: args, ID: "toolu_1", Name: "refund"}},
		}, map[string]any{
			"cost_usd": 0.00123, "input_tokens": int64(1514), "latency_ms": 12.345, "model": "scripted", "output_tokens": int64(49),
			"plan": []string{"look up", "refund"}, "plan_version": 2, "stop_reason": model.StopReason("tool_use"),
			"thought":    "refund <now> & \"say\" so",
			"tool_calls": []map[string]any{{"id": "toolu_1", "name": "refund", "args": args}},
		}},
		{"model_call without plan or calls", modelCallEvent{Model: "m", ToolCalls: []toolCallBrief{}},
			map[string]any{"cost_usd": 0.0, "input_tokens": int64(0), "latency_ms": 0.0, "model": "m", "output_tokens": int64(0),
				"stop_reason": model.StopReason(""), "thought": "", "tool_calls": []map[string]any{}}},
		{"tool_call", toolCallEvent{Args: args, Effect: Irreversible, ID: "toolu_1", Tool: "refund"},
			map[string]any{"id": "toolu_1", "tool": "refund", "args": args, "effect": Irreversible}},
		{"tool_call of an unknown tool", toolCallEvent{Args: nil, ID: "toolu_2", Tool: "nope"},
			map[string]any{"id": "toolu_2", "tool": "nope", "args": json.RawMessage(nil)}},
		{"tool_result", toolResultEvent{ID: "toolu_1", IsError: true, Preview: `{"ok":false}`, Tool: "refund"},
			map[string]any{"id": "toolu_1", "tool": "refund", "is_error": true, "preview": `{"ok":false}`}},
		{"checkpoint", checkpointEvent{CostUSD: 0.001633, Messages: 15},
			map[string]any{"messages": 15, "cost_usd": 0.001633}},
	} {
		typed, err := json.Marshal(c.typed)
		if err != nil {
			t.Fatal(err)
		}
		asMap, err := json.Marshal(c.asMap)
		if err != nil {
			t.Fatal(err)
		}
		if string(typed) != string(asMap) {
			t.Errorf("%s:\n%s\nwant\n%s", c.name, typed, asMap)
		}
	}
}
