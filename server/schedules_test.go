package server

import (
	"strings"

	"github.com/belayrun/belay/store"
)

// driveSchedules drives the schedules: one created, replaced, listed, a bad
// cron spec refused naming its field, another tenant's key that neither
// sees nor removes it, and its removal.
func (d *driver) driveSchedules(op string) {
	t := d.t
	put := func(key, name string, body any) apiCall {
		return apiCall{method: "PUT", path: "/v1/schedules/" + name, key: key, body: body}
	}
	nightly := map[string]any{"agent": "support", "cron": "0 2 * * *", "input": "Check yesterday's refunds."}
	var s scheduleView
	d.expect(put(op, "nightly", nightly), 200, "").json(t, &s)
	if s.Name != "nightly" || s.Overlap != "skip" || s.Missed != "run_once" || s.NextAt.Hour() != 2 || s.CreatedBy == "" {
		t.Errorf("the schedule created: %+v; want nightly at 02:00 with its default policies, and who made it", s)
	}
	nightly["overlap"] = "queue"
	d.expect(put(op, "nightly", nightly), 200, "").json(t, &s)
	if s.Overlap != "queue" {
		t.Errorf("the schedule replaced: overlap %s, want queue", s.Overlap)
	}
	badCron := put(op, "nightly", map[string]any{"agent": "support", "cron": "0 2 * * 8", "input": "x"})
	badCron.stateful = "a cron spec's fields are checked by the cron parser, not by the document"
	bad := d.expect(badCron, 400, "invalid_field")
	if msg := string(bad.body); !strings.Contains(msg, "day-of-week field") || !strings.Contains(msg, "0 9 * * 1-5") {
		t.Errorf("a bad cron spec: %s; want the field named and an example", msg)
	}
	d.expect(put(op, "nightly", map[string]any{"agent": "support", "cron": "@daily", "input": "x", "overlap": "sometimes"}), 400, "invalid_field")

	other := d.f.key("globex", "ops", store.RoleOperator)
	var list struct {
		Schedules []scheduleView `json:"schedules"`
	}
	d.expect(apiCall{method: "GET", path: "/v1/schedules", key: other}, 200, "").json(t, &list)
	if len(list.Schedules) != 0 {
		t.Errorf("another tenant sees %d schedules, want none", len(list.Schedules))
	}
	d.expect(apiCall{method: "DELETE", path: "/v1/schedules/nightly", key: other}, 404, "not_found")
	d.expect(apiCall{method: "GET", path: "/v1/schedules", key: op}, 200, "").json(t, &list)
	var names []string
	for _, s := range list.Schedules {
		names = append(names, s.Name)
	}
	if !strings.Contains(strings.Join(names, " "), "nightly") {
		t.Errorf("the tenant's schedules: %v, want nightly among them", names)
	}
	d.expect(apiCall{method: "DELETE", path: "/v1/schedules/nightly", key: op}, 200, "")
	d.expect(apiCall{method: "DELETE", path: "/v1/schedules/nightly", key: op}, 404, "not_found")
}
