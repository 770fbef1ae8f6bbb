package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/belayrun/belay"
)

// parseWindow reads a window: a Go duration ("24h", "90m") or a number of
// days ("1d", "7d").
func parseWindow(s string) (time.Duration, error) {
	var w time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil {
			return 0, errors.New("not a window; write a duration such as 24h, or days such as 7d")
		}
		w = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if w, err = time.ParseDuration(s); err != nil {
			return 0, errors.New("not a window; write a duration such as 24h, or days such as 7d")
		}
	}
	if w <= 0 {
		return 0, errors.New("a window must be longer than 0")
	}
	return w, nil
}

// windowKey is a window as the digest writes it: 24h and 1d are one window.
func windowKey(w time.Duration) string {
	if w == 0 {
		return ""
	}
	return strconv.FormatInt(int64(w), 10)
}

// windowTotal adds to v, this call's field, the field over the effects of
// the same tool the rule's total covers: the run's own (Prior, whatever
// their age) and the other runs' begun within the window, read through
// call.Ledger, of the tenant, of the same user, or with the same Key
// argument. ok is false when the total cannot be judged: no ledger, or no
// Key argument in the call.
func (r *Rule) windowTotal(ctx context.Context, call belay.PolicyCall, args *callArgs, v decimal) (decimal, bool, error) {
	if call.Ledger == nil {
		return v, false, nil
	}
	var group json.RawMessage
	if r.Over == "key" {
		var ok bool
		if group, ok = args.raw(r.Key); !ok {
			return v, false, nil
		}
	}
	inGroup := func(raw json.RawMessage) bool {
		if r.Over != "key" {
			return true
		}
		a := callArgs{rawArgs: raw}
		k, ok := a.raw(r.Key)
		return ok && bytes.Equal(k, group)
	}
	sum, ok := v.rat()
	if !ok {
		return v, true, nil
	}
	add := func(raw json.RawMessage) bool {
		a := callArgs{rawArgs: raw}
		x, ok := a.number(r.Field)
		if !ok {
			return true // an effect without the number adds nothing
		}
		q, ok := x.rat()
		if !ok {
			return false
		}
		sum.Add(sum, q)
		return true
	}
	for _, p := range call.Prior {
		if p.Tool == call.Tool && inGroup(p.Args) && !add(p.Args) {
			return v, false, nil
		}
	}
	es, err := call.Ledger.Recent(ctx, call.Tool, call.Now.Add(-r.Window))
	if err != nil {
		return v, false, err
	}
	for _, e := range es {
		if r.Over == "user" && e.User != call.Run.User || !inGroup(e.Args) {
			continue
		}
		if !add(e.Args) {
			return v, false, nil
		}
	}
	total, ok := parseDecimal(sum.FloatString(ratDigits(sum)))
	return total, ok, nil
}
