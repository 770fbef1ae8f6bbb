package sqlrow

import "github.com/belayrun/belay/store"

type breakerRaw struct {
	state                                         string
	windowStart, openUntil, probeUntil, changedAt int64
}

func breakerColumns(b *store.Breaker, x *breakerRaw, c *columns) {
	c.add("name", &b.Name)
	c.add("state", &x.state)
	c.add("failures", &b.Failures)
	c.add("window_start", &x.windowStart)
	c.add("open_until", &x.openUntil)
	c.add("probe_owner", &b.ProbeOwner)
	c.add("probe_until", &x.probeUntil)
	c.add("changed_at", &x.changedAt)
}

func decodeBreaker(b *store.Breaker, x *breakerRaw) error {
	b.State = store.BreakerState(x.state)
	b.WindowStart, b.OpenUntil, b.ProbeUntil, b.Changed = Time(x.windowStart), Time(x.openUntil), Time(x.probeUntil), Time(x.changedAt)
	return nil
}

// Breaker reads the columns of a "-- columns: breaker" query.
func Breaker(row Scanner) (store.Breaker, error) {
	return scanRow(row, new(breakerRaw), breakerColumns, decodeBreaker)
}

// BreakerArgs are the arguments of a query writing b, by column name.
func BreakerArgs(b store.Breaker) map[string]any {
	return map[string]any{"name": b.Name, "state": string(b.State), "failures": b.Failures,
		"window_start": Nanos(b.WindowStart), "open_until": Nanos(b.OpenUntil), "probe_owner": b.ProbeOwner,
		"probe_until": Nanos(b.ProbeUntil), "changed_at": Nanos(b.Changed)}
}
