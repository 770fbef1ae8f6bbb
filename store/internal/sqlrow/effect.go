package sqlrow

import "github.com/belayrun/belay/store"

type effectRaw struct {
	inFlight, created, updated int64
}

func effectColumns(e *store.Effect, x *effectRaw) []column {
	return []column{
		{"tenant", &e.Tenant},
		{"key", &e.Key},
		{"run_id", &e.RunID},
		{"tool", &e.Tool},
		{"args_hash", &e.ArgsHash},
		{"args", (*[]byte)(&e.Args)},
		{"state", (*string)(&e.State)},
		{"result", (*[]byte)(&e.Result)},
		{"step", &e.Step},
		{"attempts", &e.Attempts},
		{"epoch", &e.Epoch},
		{"in_flight_until", &x.inFlight},
		{"created_at", &x.created},
		{"updated_at", &x.updated},
	}
}

func (x *effectRaw) decode(e *store.Effect) {
	e.InFlightUntil, e.CreatedAt, e.UpdatedAt = Time(x.inFlight), Time(x.created), Time(x.updated)
}

// Effect reads the columns of a "-- columns: effect" query.
func Effect(row Scanner) (store.Effect, error) {
	var (
		e store.Effect
		x effectRaw
	)
	if err := scan(row, effectColumns(&e, &x)); err != nil {
		return store.Effect{}, err
	}
	x.decode(&e)
	return e, nil
}

type customerEffectRaw struct {
	effectRaw
	sensitive []byte
}

// customerEffectColumns are an effect's, then its run's agent and
// sensitive arguments.
func customerEffectColumns(e *store.CustomerEffect, x *customerEffectRaw) []column {
	return append(effectColumns(&e.Effect, &x.effectRaw),
		column{"agent", &e.Agent},
		column{"sensitive", &x.sensitive},
	)
}

// CustomerEffect reads the columns of a "-- columns: customer_effect"
// query.
func CustomerEffect(row Scanner) (store.CustomerEffect, error) {
	var (
		e store.CustomerEffect
		x customerEffectRaw
	)
	if err := scan(row, customerEffectColumns(&e, &x)); err != nil {
		return store.CustomerEffect{}, err
	}
	x.decode(&e.Effect)
	var err error
	if e.Sensitive, err = DecodeSensitive(x.sensitive); err != nil {
		return store.CustomerEffect{}, err
	}
	return e, nil
}
