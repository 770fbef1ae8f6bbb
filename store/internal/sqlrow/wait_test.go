package sqlrow

import (
	"strings"
	"testing"
)

func TestWait(t *testing.T) {
	w, err := Wait(rowOf(t, "wait"))
	if err != nil {
		t.Fatal(err)
	}
	checkStrings(t, w, map[string]string{
		"ID": "id", "Tenant": "tenant", "RunID": "run_id", "ToolUseID": "tool_use_id", "Kind": "kind", "Name": "name",
		"Binding": "binding", "Status": "status", "AnswerKey": "answer_key", "AnsweredBy": "answered_by",
	})
	if w.Step != 4 || !strings.Contains(string(w.Prompt), `"prompt"`) || !strings.Contains(string(w.Answer), `"answer"`) {
		t.Errorf("wait: %+v", w)
	}
	if w.ExpiresAt != at(t, "wait", "expires_at") || w.CreatedAt != at(t, "wait", "created_at") ||
		w.AnsweredAt != at(t, "wait", "answered_at") {
		t.Errorf("times: %v %v %v", w.ExpiresAt, w.CreatedAt, w.AnsweredAt)
	}
}

func TestSignal(t *testing.T) {
	s, err := Signal(rowOf(t, "signal"))
	if err != nil {
		t.Fatal(err)
	}
	checkStrings(t, s, map[string]string{"ID": "id", "Tenant": "tenant", "RunID": "run_id", "Name": "name", "Key": "key",
		"ConsumedBy": "consumed_by"})
	if !strings.Contains(string(s.Payload), `"payload"`) || s.CreatedAt != at(t, "signal", "created_at") {
		t.Errorf("signal: %+v", s)
	}
}
