package client

import (
	"context"
	"net/http"
	"time"
)

// Schedule starts a run of an agent at each firing of a cron spec.
type Schedule struct {
	Name  string `json:"name"`
	Agent string `json:"agent"`
	// Cron is five fields (minute hour day-of-month month day-of-week) in
	// UTC, or a descriptor such as @hourly.
	Cron  string `json:"cron"`
	Input string `json:"input"`
	// Overlap is what a firing does while the previous firing's run has
	// not ended: "skip", "queue" or "allow".
	Overlap string `json:"overlap"`
	// Missed is what becomes of firings missed while no worker ran:
	// "skip" or "run_once".
	Missed string `json:"missed"`
	// NextAt is the earliest firing not yet handled.
	NextAt time.Time `json:"next_at"`
	// LastRunID is the run of the latest firing that started one, fired
	// at LastFiredAt; empty before any.
	LastRunID   string     `json:"last_run_id,omitempty"`
	LastFiredAt *time.Time `json:"last_fired_at,omitempty"`
	CreatedBy   string     `json:"created_by"`
	CreatedAt   time.Time  `json:"created_at"`
}

// ScheduleRequest is a schedule to create or replace. Overlap and Missed
// may be empty for their defaults, skip and run_once.
type ScheduleRequest struct {
	Agent   string `json:"agent"`
	Cron    string `json:"cron"`
	Input   string `json:"input"`
	Overlap string `json:"overlap,omitempty"`
	Missed  string `json:"missed,omitempty"`
}

// PutSchedule creates the schedule name of the key's tenant, or replaces
// it. A bad cron spec answers ErrInvalidField, its message naming the
// field. Sending it again is sending it once.
func (c *Client) PutSchedule(ctx context.Context, name string, req ScheduleRequest) (Schedule, error) {
	var out Schedule
	r := request{method: http.MethodPut, path: "/v1/schedules/" + escape(name), body: req, retry: idempotent}
	if err := c.call(ctx, r, &out); err != nil {
		return Schedule{}, err
	}
	return out, nil
}

// ListSchedules lists the schedules of the key's tenant, by name.
func (c *Client) ListSchedules(ctx context.Context) ([]Schedule, error) {
	var out struct {
		Schedules []Schedule `json:"schedules"`
	}
	if err := c.call(ctx, get("/v1/schedules", nil), &out); err != nil {
		return nil, err
	}
	return out.Schedules, nil
}

// DeleteSchedule removes a schedule; the runs it started stay. One the
// tenant does not have answers ErrNotFound.
func (c *Client) DeleteSchedule(ctx context.Context, name string) error {
	r := request{method: http.MethodDelete, path: "/v1/schedules/" + escape(name), retry: once}
	return c.call(ctx, r, nil)
}
