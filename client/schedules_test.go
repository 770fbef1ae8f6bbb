package client_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/belayrun/belay/client"
	"github.com/belayrun/belay/store"
)

func TestSchedules(t *testing.T) {
	t.Parallel()
	ts := newServer(t)
	ctx := t.Context()
	c := newClient(t, ts, ts.key("ops", store.RoleOperator))
	s, err := c.PutSchedule(ctx, "weekday-check", client.ScheduleRequest{Agent: "support", Cron: "0 9 * * 1-5", Input: "Check the refund queue."})
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "weekday-check" || s.Overlap != "skip" || s.Missed != "run_once" || s.NextAt.Hour() != 9 {
		t.Errorf("put: %+v; want weekday-check at 09:00 with its default policies", s)
	}
	_, err = c.PutSchedule(ctx, "bad", client.ScheduleRequest{Agent: "support", Cron: "61 * * * *", Input: "x"})
	if !errors.Is(err, client.ErrInvalidField) || !strings.Contains(err.Error(), "minute field") {
		t.Errorf("a bad minute: %v; want ErrInvalidField naming the field", err)
	}
	list, err := c.ListSchedules(ctx)
	if err != nil || len(list) != 1 || list[0].Cron != "0 9 * * 1-5" {
		t.Fatalf("list: %+v, %v; want the schedule", list, err)
	}
	if err := c.DeleteSchedule(ctx, "weekday-check"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteSchedule(ctx, "weekday-check"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("delete again: %v, want ErrNotFound", err)
	}
}
