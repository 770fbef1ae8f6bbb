package sqlrow

// DueRun is a due run as a claim orders it (the SQLite store orders the
// runs it may claim itself, in Go).
type DueRun struct {
	ID string
	// TakenFrom is the owner of an expired lease the claim would take.
	TakenFrom string
	Tenant    string
	Agent     string
	Priority  int
	// Due is when the run became due, in unix nanoseconds.
	Due int64
	// Expired says the run is running on an expired lease.
	Expired bool
}

func dueRunColumns(r *DueRun, _ *struct{}, c *columns) {
	c.add("id", &r.ID)
	c.add("lease_owner", &r.TakenFrom)
	c.add("tenant", &r.Tenant)
	c.add("agent", &r.Agent)
	c.add("priority", &r.Priority)
	c.add("updated_at", &r.Due)
	c.add("expired", &r.Expired)
}

// ReadDueRun reads the columns of a "-- columns: due_run" query.
func ReadDueRun(row Scanner) (DueRun, error) {
	return scanRow(row, new(struct{}), dueRunColumns, func(*DueRun, *struct{}) error { return nil })
}
