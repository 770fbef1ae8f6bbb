package sqlrow

import "github.com/belayrun/belay/store"

type scheduleRaw struct {
	overlap, missed                string
	nextAt, lastFiredAt, createdAt int64
}

func scheduleColumns(s *store.Schedule, x *scheduleRaw, c *columns) {
	c.add("tenant", &s.Tenant)
	c.add("name", &s.Name)
	c.add("agent", &s.Agent)
	c.add("spec", &s.Spec)
	c.add("input", &s.Input)
	c.add("overlap", &x.overlap)
	c.add("missed", &x.missed)
	c.add("next_at", &x.nextAt)
	c.add("last_run_id", &s.LastRunID)
	c.add("last_fired_at", &x.lastFiredAt)
	c.add("created_by", &s.CreatedBy)
	c.add("created_at", &x.createdAt)
}

func decodeSchedule(s *store.Schedule, x *scheduleRaw) error {
	s.Overlap = store.OverlapPolicy(x.overlap)
	s.Missed = store.MissedPolicy(x.missed)
	s.NextAt = Time(x.nextAt)
	s.LastFiredAt = Time(x.lastFiredAt)
	s.CreatedAt = Time(x.createdAt)
	return nil
}

// Schedule reads the columns of a "-- columns: schedule" query.
func Schedule(row Scanner) (store.Schedule, error) {
	return scanRow(row, new(scheduleRaw), scheduleColumns, decodeSchedule)
}
