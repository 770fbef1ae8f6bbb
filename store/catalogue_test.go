package store

import (
	"encoding/json"
	"testing"
	"time"
)

// TestCatalogueEncodesAsTheMapsItReplaced holds every kind of the catalogue
// to the bytes the maps the engine wrote before gave, so traces written
// before and after read the same: same names, same order, same omissions.
func TestCatalogueEncodesAsTheMapsItReplaced(t *testing.T) {
	args := json.RawMessage(`{"amount": 12.5, "to": "a<b>@example.com"}`)
	at := time.Date(2026, 12, 1, 12, 0, 0, 5, time.UTC)
	used, next, limit := 0.12, 0.05, 0.15
	for _, c := range []struct {
		name  string
		typed any
		asMap map[string]any
	}{
		{EventRunCreated, RunCreatedData{Agent: "a", Version: "v1", User: "u", DryRun: true},
			map[string]any{"agent": "a", "version": "v1", "user": "u", "dry_run": true}},
		{EventClaimed, ClaimedData{Epoch: 3, Owner: "host/1", Resumed: true},
			map[string]any{"epoch": int64(3), "owner": "host/1", "resumed": true}},
		{EventReleased, ReleasedData{Epoch: 3}, map[string]any{"epoch": int64(3)}},
		{EventModelCall, ModelCallData{
			CostUSD: 0.00123, InputTokens: 1514, LatencyMS: 12.345, Model: "scripted", OutputTokens: 49,
			Plan: []string{"look up", "refund"}, PlanVersion: 2, StopReason: "tool_use",
			Thought: "refund <now> & \"say\" so", ToolCalls: []ToolCallBrief{{Args: args, ID: "toolu_1", Name: "refund"}},
		}, map[string]any{
			"cost_usd": 0.00123, "input_tokens": int64(1514), "latency_ms": 12.345, "model": "scripted", "output_tokens": int64(49),
			"plan": []string{"look up", "refund"}, "plan_version": 2, "stop_reason": "tool_use",
			"thought":    "refund <now> & \"say\" so",
			"tool_calls": []map[string]any{{"id": "toolu_1", "name": "refund", "args": args}},
		}},
		{"model_call without plan or calls", ModelCallData{Model: "m", ToolCalls: []ToolCallBrief{}},
			map[string]any{"cost_usd": 0.0, "input_tokens": int64(0), "latency_ms": 0.0, "model": "m", "output_tokens": int64(0),
				"stop_reason": "", "thought": "", "tool_calls": []map[string]any{}}},
		{EventModelFallback, ModelFallbackData{From: "a", To: "b", Error: "529"},
			map[string]any{"from": "a", "to": "b", "error": "529"}},
		{EventToolCall, ToolCallData{Args: args, Effect: "irreversible", ID: "toolu_1", Tool: "refund"},
			map[string]any{"id": "toolu_1", "tool": "refund", "args": args, "effect": "irreversible"}},
		{"tool_call of an unknown tool", ToolCallData{Args: nil, ID: "toolu_2", Tool: "nope"},
			map[string]any{"id": "toolu_2", "tool": "nope", "args": json.RawMessage(nil)}},
		{EventToolResult, ToolResultData{ID: "toolu_1", IsError: true, Preview: `{"ok":false}`, Tool: "refund"},
			map[string]any{"id": "toolu_1", "tool": "refund", "is_error": true, "preview": `{"ok":false}`}},
		{EventToolRetry, ToolRetryData{Tool: "t", Attempt: 2, Error: "503", BackoffS: 0.25},
			map[string]any{"tool": "t", "attempt": 2, "error": "503", "backoff_s": 0.25}},
		{EventBreaker, BreakerData{Tool: "t", From: "closed", To: "open"},
			map[string]any{"tool": "t", "from": "closed", "to": "open"}},
		{EventIntent, IntentData{Tool: "t", Key: "k", Effect: "write"},
			map[string]any{"tool": "t", "key": "k", "effect": "write"}},
		{EventEffectReused, EffectData{Tool: "t", Key: "k"}, map[string]any{"tool": "t", "key": "k"}},
		{EventEffectUnknown, EffectUnknownData{Tool: "t", Key: "k", Error: "timeout", Attempt: 1},
			map[string]any{"tool": "t", "key": "k", "error": "timeout", "attempt": 1}},
		{EventEffectInFlight, EffectInFlightData{Tool: "t", Key: "k", Epoch: 2, Until: at},
			map[string]any{"tool": "t", "key": "k", "epoch": int64(2), "until": at}},
		{EventReconcile, ReconcileData{Tool: "t", Key: "k", Found: true, Error: ""},
			map[string]any{"tool": "t", "key": "k", "found": true, "error": ""}},
		{EventCheckpoint, CheckpointData{CostUSD: 0.001633, Messages: 15},
			map[string]any{"messages": 15, "cost_usd": 0.001633}},
		{EventLoopDetected, LoopDetectedData{Detector: "progress", Fired: 1, Action: "replan"},
			map[string]any{"detector": "progress", "fired": 1, "action": "replan"}},
		{EventApprovalRequested, ApprovalRequestedData{ApprovalID: "ap_1", Tool: "t", Args: args, Category: "refund_large",
			Reason: "large", Summary: "Refund", ExpiresAt: at},
			map[string]any{"approval_id": "ap_1", "tool": "t", "args": args, "category": "refund_large", "reason": "large",
				"summary": "Refund", "expires_at": at}},
		{EventApprovalDecided, ApprovalDecidedData{ApprovalID: "ap_1", Tool: "t", Category: "c", Status: ApprovalEdited,
			By: "human:maya", Note: "n", EditedArgs: args, DecisionS: 12.5},
			map[string]any{"approval_id": "ap_1", "tool": "t", "category": "c", "status": ApprovalEdited, "by": "human:maya",
				"note": "n", "edited_args": args, "decision_s": 12.5}},
		{EventApprovalApplied, ApprovalAppliedData{ApprovalID: "ap_1", Status: ApprovalApproved, By: "human:maya"},
			map[string]any{"approval_id": "ap_1", "status": ApprovalApproved, "by": "human:maya"}},
		{EventVerify, VerifyData{Requirement: "r", OK: false, Error: "down"},
			map[string]any{"requirement": "r", "ok": false, "error": "down"}},
		{"verify without an error", VerifyData{Requirement: "r", OK: true}, map[string]any{"requirement": "r", "ok": true}},
		{EventStop, StopData{Status: StatusDone, Reason: "verified"}, map[string]any{"status": StatusDone, "reason": "verified"}},
		{"stop paused until a time", StopData{Status: StatusPaused, Reason: "overloaded", Detail: "529", ResumeAfter: &at},
			map[string]any{"status": StatusPaused, "reason": "overloaded", "detail": "529", "resume_after": at}},
		{"stop by the budget", StopData{Status: StatusPaused, Reason: "budget_usd", Detail: "over", Used: &used, NextCall: &next, Limit: &limit, Unit: "usd"},
			map[string]any{"status": StatusPaused, "reason": "budget_usd", "detail": "over", "used": used, "next_call": next, "limit": limit, "unit": "usd"}},
		{EventResumed, ResumedData{By: "human:o", StopReason: "budget_usd", AddTurns: 5, AddUSD: 0.05, AddInputTokens: 1, AddOutputTokens: 2, AddTimeS: 60},
			map[string]any{"by": "human:o", "stop_reason": "budget_usd", "add_turns": 5, "add_usd": 0.05,
				"add_input_tokens": int64(1), "add_output_tokens": int64(2), "add_time_s": 60.0}},
		{EventMigrated, MigratedData{By: "human:o", Agent: "a", From: "v1", To: "v2"},
			map[string]any{"by": "human:o", "agent": "a", "from": "v1", "to": "v2"}},
		{EventOutcomeResolved, OutcomeResolvedData{Key: "k", Tool: "t", Applied: true, By: "human:o"},
			map[string]any{"key": "k", "tool": "t", "applied": true, "by": "human:o"}},
		{EventCanceled, CanceledData{By: "human:o", Note: "n", Was: StatusRunning},
			map[string]any{"by": "human:o", "note": "n", "was": StatusRunning}},
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

// An event of an older trace, or a newer field, decodes into its type.
func TestDecodeEvent(t *testing.T) {
	got, err := DecodeEvent[ClaimedData](Event{Type: EventClaimed, Data: json.RawMessage(`{"epoch":4,"owner":"w","extra":1}`)})
	if err != nil || got != (ClaimedData{Epoch: 4, Owner: "w"}) {
		t.Errorf("DecodeEvent: %+v, %v", got, err)
	}
	if _, err := DecodeEvent[ClaimedData](Event{Data: json.RawMessage(`{"epoch":"four"}`)}); err == nil {
		t.Error("DecodeEvent of a malformed event: no error")
	}
}
