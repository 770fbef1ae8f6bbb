package sqlrow

import "github.com/belayrun/belay/store"

type effectRaw struct {
	inFlight, created, updated int64
}

func effectColumns(e *store.Effect, x *effectRaw, c *columns) {
	c.add("tenant", &e.Tenant)
	c.add("key", &e.Key)
	c.add("run_id", &e.RunID)
	c.add("tool", &e.Tool)
	c.add("args_hash", &e.ArgsHash)
	c.add("args", (*[]byte)(&e.Args))
	c.add("state", (*string)(&e.State))
	c.add("result", (*[]byte)(&e.Result))
	c.add("step", &e.Step)
	c.add("attempts", &e.Attempts)
	c.add("epoch", &e.Epoch)
	c.add("in_flight_until", &x.inFlight)
	c.add("created_at", &x.created)
	c.add("updated_at", &x.updated)
}

func decodeEffect(e *store.Effect, x *effectRaw) error {
	e.InFlightUntil, e.CreatedAt, e.UpdatedAt = Time(x.inFlight), Time(x.created), Time(x.updated)
	return nil
}

// Effect reads the columns of a "-- columns: effect" query.
func Effect(row Scanner) (store.Effect, error) {
	return scanRow(row, new(effectRaw), effectColumns, decodeEffect)
}

type customerEffectRaw struct {
	effectRaw
	sensitive []byte
}

// customerEffectColumns are an effect's, then its run's agent and
// sensitive arguments.
func customerEffectColumns(e *store.CustomerEffect, x *customerEffectRaw, c *columns) {
	effectColumns(&e.Effect, &x.effectRaw, c)
	c.add("agent", &e.Agent)
	c.add("sensitive", &x.sensitive)
}

func decodeCustomerEffect(e *store.CustomerEffect, x *customerEffectRaw) (err error) {
	if err := decodeEffect(&e.Effect, &x.effectRaw); err != nil {
		return err
	}
	e.Sensitive, err = DecodeSensitive(x.sensitive)
	return err
}

// CustomerEffect reads the columns of a "-- columns: customer_effect"
// query.
func CustomerEffect(row Scanner) (store.CustomerEffect, error) {
	return scanRow(row, new(customerEffectRaw), customerEffectColumns, decodeCustomerEffect)
}

type recentEffectRaw struct{ created int64 }

func recentEffectColumns(e *store.RecentEffect, x *recentEffectRaw, c *columns) {
	c.add("run_id", &e.RunID)
	c.add("user_id", &e.User)
	c.add("args", (*[]byte)(&e.Args))
	c.add("state", (*string)(&e.State))
	c.add("created_at", &x.created)
}

// RecentEffect reads the columns of a "-- columns: recent_effect" query.
func RecentEffect(row Scanner) (store.RecentEffect, error) {
	return scanRow(row, new(recentEffectRaw), recentEffectColumns, func(e *store.RecentEffect, x *recentEffectRaw) error {
		e.CreatedAt = Time(x.created)
		return nil
	})
}
