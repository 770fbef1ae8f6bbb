package sqlrow

import "github.com/belayrun/belay/store"

type signalRaw struct {
	created int64
}

func signalColumns(s *store.Signal, x *signalRaw, c *columns) {
	c.add("id", &s.ID)
	c.add("tenant", &s.Tenant)
	c.add("run_id", &s.RunID)
	c.add("name", &s.Name)
	c.add("key", &s.Key)
	c.add("payload", (*[]byte)(&s.Payload))
	c.add("created_at", &x.created)
	c.add("consumed_by", &s.ConsumedBy)
}

func decodeSignal(s *store.Signal, x *signalRaw) error {
	s.CreatedAt = Time(x.created)
	return nil
}

// Signal reads the columns of a "-- columns: signal" query.
func Signal(row Scanner) (store.Signal, error) {
	return scanRow(row, new(signalRaw), signalColumns, decodeSignal)
}
