package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// belay schedules adds a schedule, lists it with its next firing, refuses
// a bad cron spec naming its field, and removes it.
func TestSchedulesCommand(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "belay.db")
	belay := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := run(t.Context(), append(args, "--db", db), &out, &errb)
		return out.String(), err
	}
	if _, err := belay("start", "--user", "ada", "--request-id", "T-1", "--input", "hi"); err != nil {
		t.Fatal(err)
	}
	if _, err := belay("schedules", "add", "weekday-check", "--agent", "support", "--cron", "0 9 * * 1-5",
		"--input", "Check the refund queue.", "--overlap", "queue", "--tenant", "acme"); err != nil {
		t.Fatal(err)
	}
	_, err := belay("schedules", "add", "bad", "--agent", "support", "--cron", "0 9 * 13 *", "--input", "x")
	if err == nil || !strings.Contains(err.Error(), "month field") || !strings.Contains(err.Error(), "0 9 * * 1-5") {
		t.Errorf("a bad month: %v; want it named, with an example", err)
	}
	out, err := belay("schedules", "list", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var s scheduleJSON
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if s.Tenant != "acme" || s.Name != "weekday-check" || s.Overlap != "queue" || s.Missed != "run_once" ||
		s.NextAt.Hour() != 9 || s.NextAt.Weekday() == 0 || s.NextAt.Weekday() == 6 || s.LastRunID != "" {
		t.Errorf("listed %+v; want acme's weekday-check, queue, run_once, next at 09:00 on a weekday, no run yet", s)
	}
	if out, _ := belay("schedules", "list"); !strings.Contains(out, "weekday-check") || !strings.Contains(out, "0 9 * * 1-5") {
		t.Errorf("schedules list:\n%s", out)
	}
	if _, err := belay("schedules", "remove", "weekday-check"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("remove from the default tenant: %v, want not found (it is acme's)", err)
	}
	if _, err := belay("schedules", "remove", "weekday-check", "--tenant", "acme"); err != nil {
		t.Fatal(err)
	}
	if out, _ := belay("schedules", "list"); !strings.Contains(out, "no schedules") {
		t.Errorf("after remove:\n%s", out)
	}
}
