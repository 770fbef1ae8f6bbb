package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/store"
)

// trafficKey is what one row of traffic groups: calls of one tool with one
// effect class and the same arguments cents and bulk.
type trafficKey struct {
	kind   string
	effect belay.EffectClass
	cents  int64
	bulk   int
}

// TrafficFromStore is the traffic the store's runs recorded: their tool
// calls (tool_call trace events, a call counted once however often its step
// ran) of runs created since since (zero: every run), as Simulate weighs a
// traffic file. One action per tool, effect class and arguments "cents" and
// "bulk"; the harm, the external flag and the effect class of each kind
// come from kinds (a traffic file, whose counts are not read), where it
// lists the kind; a kind it does not list does no harm. Actions come in the
// order kinds lists them, then the others as first recorded, so that the
// same counts give the table a traffic file gives.
func TrafficFromStore(ctx context.Context, st store.Store, since time.Time, kinds []Action) ([]Action, error) {
	known := map[string]Action{}
	var order []trafficKey
	for _, k := range kinds {
		if _, dup := known[k.Kind]; !dup {
			known[k.Kind] = k
		}
	}
	counts := map[trafficKey]int{}
	recorded := map[string]belay.EffectClass{} // a tool's effect as its calls recorded it
	after := ""
	for {
		runs, err := st.ListRuns(ctx, store.ListRunsParams{Since: since, After: after, Limit: 500})
		if err != nil {
			return nil, fmt.Errorf("traffic from the store: %w", err)
		}
		for _, run := range runs {
			events, err := st.Events(ctx, run.ID)
			if err != nil {
				return nil, fmt.Errorf("traffic from the store: %w", err)
			}
			seen := map[string]bool{}
			for _, ev := range events {
				if ev.Type != store.EventToolCall {
					continue
				}
				d, err := store.DecodeEvent[store.ToolCallData](ev)
				if err != nil || seen[d.ID] {
					continue
				}
				seen[d.ID] = true
				if d.Effect != "" {
					recorded[d.Tool] = belay.EffectClass(d.Effect)
				}
				k := trafficKey{kind: d.Tool, effect: belay.EffectClass(d.Effect)}
				k.cents, k.bulk = callAmounts(d.Args)
				if counts[k] == 0 {
					order = append(order, k)
				}
				counts[k]++
			}
		}
		if len(runs) < 500 {
			break
		}
		after = runs[len(runs)-1].ID
	}
	// A call refused before it ran records no effect class: it is the
	// tool's, as kinds or its other calls say.
	merged := map[trafficKey]int{}
	var keys []trafficKey
	for _, raw := range order {
		k := raw
		switch a, ok := known[k.kind]; {
		case ok && a.Effect != "":
			k.effect = a.Effect
		case k.effect == "":
			k.effect = recorded[k.kind]
		}
		if merged[k] == 0 {
			keys = append(keys, k)
		}
		merged[k] += counts[raw]
	}
	var actions []Action
	emit := func(k trafficKey) {
		a := Action{Kind: k.kind, Count: merged[k], Cents: k.cents, Bulk: k.bulk, Effect: k.effect}
		if info, ok := known[k.kind]; ok {
			a.Harm, a.External = info.Harm, info.External
		}
		actions = append(actions, a)
	}
	done := map[trafficKey]bool{}
	for _, kind := range kinds {
		for _, k := range keys {
			if k.kind == kind.Kind && !done[k] {
				done[k] = true
				emit(k)
			}
		}
	}
	for _, k := range keys {
		if !done[k] {
			done[k] = true
			emit(k)
		}
	}
	return actions, nil
}

// callAmounts reads a call's arguments "cents" and "bulk", the ones a
// traffic row carries; absent or not whole numbers, they are 0.
func callAmounts(args json.RawMessage) (cents int64, bulk int) {
	var v struct {
		Cents json.Number `json:"cents"`
		Bulk  json.Number `json:"bulk"`
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return 0, 0
	}
	c, _ := v.Cents.Int64()
	b, _ := v.Bulk.Int64()
	return c, int(b)
}
