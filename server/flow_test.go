package server

import (
	"net/http"
	"testing"

	"github.com/belayrun/belay/store"
)

// A run started through the API with a concurrency key and a priority keeps
// them: the store holds them, and the API shows them back.
func TestCreateRunWithConcurrencyKeyAndPriority(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	op := f.key("acme", "ops", store.RoleOperator)
	res := f.do("POST", "/v1/runs", op, map[string]any{"agent": "support", "user": "ada", "input": demoInput,
		"concurrency_key": "customer-ada", "concurrency_limit": 2, "priority": 7}, "Idempotency-Key", "T-1")
	if res.status != http.StatusCreated {
		t.Fatalf("POST /v1/runs: %d %s", res.status, res.body)
	}
	var run runView
	res.json(t, &run)
	if run.ConcurrencyKey != "customer-ada" || run.ConcurrencyLimit != 2 || run.Priority != 7 {
		t.Errorf("created run shows key %q, limit %d, priority %d; want customer-ada, 2, 7",
			run.ConcurrencyKey, run.ConcurrencyLimit, run.Priority)
	}
	stored, err := f.st.GetRun(t.Context(), "acme", run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.ConcurrencyKey != "customer-ada" || stored.ConcurrencyLimit != 2 || stored.Priority != 7 {
		t.Errorf("stored run: key %q, limit %d, priority %d", stored.ConcurrencyKey, stored.ConcurrencyLimit, stored.Priority)
	}
}
