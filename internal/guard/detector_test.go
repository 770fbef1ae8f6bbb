package guard

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func call(tool, args string) Call { return Call{Tool: tool, Args: json.RawMessage(args)} }

func fact(tool, args string) Call {
	c := call(tool, args)
	c.NewFact = true
	return c
}

// firings observes calls in order on a fresh state and returns, for each,
// whether the detector fired.
func firings(d Detector, calls ...Call) []bool {
	var s State
	out := make([]bool, len(calls))
	for i, c := range calls {
		out[i] = d.Observe(&s, c)
	}
	return out
}

func fmtFirings(f []bool) string {
	var b strings.Builder
	for _, x := range f {
		if x {
			b.WriteByte('X')
		} else {
			b.WriteByte('.')
		}
	}
	return b.String()
}

func TestDetectorsOnHandWrittenRuns(t *testing.T) {
	t.Parallel()
	refund := call("search", `{"q":"refund policy"}`)
	tests := []struct {
		name  string
		d     Detector
		calls []Call
		want  string // one mark per call: X fires, . does not
	}{
		{"exact fires on the third identical call", Detector{Mode: Exact}, []Call{refund, refund, refund, refund}, "..XX"},
		{"exact restarts after another call", Detector{Mode: Exact},
			[]Call{refund, refund, call("read_doc", `{"id":"POL-14"}`), refund, refund}, "....."},
		{"exact tells tools apart", Detector{Mode: Exact},
			[]Call{call("a", `{"id":1}`), call("b", `{"id":1}`), call("a", `{"id":1}`)}, "..."},
		{"exact with repeats 1", Detector{Mode: Exact, Repeats: 1}, []Call{refund, refund}, ".X"},
		{"exact misses rewording", Detector{Mode: Exact},
			[]Call{refund, call("search", `{"q":"Refund Policy"}`), call("search", `{"q":"policy refund"}`)}, "..."},
		{"canonical catches rewording", Detector{Mode: Canonical},
			[]Call{refund, call("search", `{"q":"Refund  Policy"}`), call("search", `{"q":" policy\trefund"}`)}, "..X"},
		{"canonical ignores field names and order", Detector{Mode: Canonical},
			[]Call{call("s", `{"a":"x","b":"y"}`), call("s", `{"a":"y","b":"x"}`), call("s", `{"c":"Y","d":"X"}`)}, "..X"},
		{"canonical takes numbers and bools by their JSON", Detector{Mode: Canonical},
			[]Call{call("s", `{"n":1.0,"b":true}`), call("s", `{"n":1,"b":true}`), call("s", `{"b":true,"n":1e0}`)}, "..X"},
		{"canonical tells values apart", Detector{Mode: Canonical},
			[]Call{call("s", `{"n":1}`), call("s", `{"n":2}`), call("s", `{"n":"1 2"}`)}, "..."},
		{"canonical misses a cycle", Detector{Mode: Canonical},
			[]Call{refund, call("read_doc", `{"id":"POL-14"}`), refund, call("read_doc", `{"id":"POL-14"}`)}, "...."},
		{"window catches a cycle", Detector{Mode: Window},
			[]Call{refund, call("read_doc", `{"id":"POL-14"}`), refund}, "..X"},
		{"window forgets beyond its length", Detector{Mode: Window, Window: 2},
			[]Call{call("a", `{}`), call("b", `{}`), call("c", `{}`), call("a", `{}`), call("c", `{}`)}, "....X"},
		{"window misses drift", Detector{Mode: Window},
			[]Call{call("search", `{"q":"refund 1"}`), call("search", `{"q":"refund 2"}`), call("search", `{"q":"refund 3"}`)}, "..."},
		{"window flags a legitimate retry", Detector{Mode: Window},
			[]Call{fact("get_order", `{"id":"A-1"}`), call("get_order", `{"id":"A-1"}`)}, ".X"},
		{"progress fires after patience calls without a fact", Detector{Mode: Progress},
			[]Call{fact("a", `{}`), call("b", `{"q":1}`), call("b", `{"q":2}`), call("b", `{"q":3}`), call("b", `{"q":4}`), call("b", `{"q":5}`)}, "....XX"},
		{"progress restarts on a new fact", Detector{},
			[]Call{call("b", `{}`), call("b", `{}`), call("b", `{}`), fact("b", `{}`), call("b", `{}`), call("b", `{}`), call("b", `{}`)}, "......."},
		{"progress ignores a retry that learns nothing once", Detector{Mode: Progress},
			[]Call{fact("get_order", `{"id":"A-1"}`), call("get_order", `{"id":"A-1"}`), fact("get_order", `{"id":"A-2"}`)}, "..."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := fmtFirings(firings(tt.d, tt.calls...)); got != tt.want {
				t.Errorf("fired %s, want %s", got, tt.want)
			}
		})
	}
}

func TestExactIgnoresKeyOrderAndWhitespace(t *testing.T) {
	t.Parallel()
	for _, mode := range []Mode{Exact, Window} {
		got := firings(Detector{Mode: mode, Repeats: 1},
			call("refund", `{"order_id":"A-1","cents":2900}`),
			call("refund", "{ \"cents\": 29.00e2,\n  \"order_id\": \"A-1\" }"))
		if !got[1] {
			t.Errorf("%s: the same refund with its keys reordered and respaced was not recognised", mode)
		}
		got = firings(Detector{Mode: mode, Repeats: 1},
			call("refund", `{"order_id":"A-1","cents":2900}`),
			call("refund", `{"order_id":"a-1","cents":2900}`))
		if got[1] {
			t.Errorf("%s: an order id differing in case counted as the same call", mode)
		}
	}
}

func TestArgumentsThatAreNotAnObject(t *testing.T) {
	t.Parallel()
	for _, mode := range []Mode{Exact, Canonical} {
		for _, args := range []string{``, `not json`, `["b a"]`, `"x"`, `null`} {
			if got := firings(Detector{Mode: mode}, call("t", args), call("t", args), call("t", args)); !got[2] {
				t.Errorf("%s: three calls with arguments %q did not fire", mode, args)
			}
		}
	}
	if got := firings(Detector{Mode: Exact}, call("t", `not json`), call("t", `not json`), call("t", `not jsom`)); got[2] {
		t.Errorf("exact: different non-JSON arguments counted as the same")
	}
}

func TestPolling(t *testing.T) {
	t.Parallel()
	d := Detector{Mode: Progress}
	poll := call("get_job", `{"id":"J-7"}`)

	// The job's status changes every time: each poll learns something.
	var s State
	for i := range 50 {
		poll.NewFact = true
		if d.Observe(&s, poll) {
			t.Fatalf("poll %d, whose status changed, fired the progress detector", i)
		}
	}

	// The status stops changing: the same answer again is no progress.
	poll.NewFact = false
	got := make([]bool, 6)
	for i := range got {
		got[i] = d.Observe(&s, poll)
	}
	if m := fmtFirings(got); m != "...XXX" {
		t.Errorf("polling a job that stopped changing fired %s, want ...XXX", m)
	}
}

func TestResumedStateKeepsDetecting(t *testing.T) {
	t.Parallel()
	stuck := []Call{
		call("search", `{"q":"refund policy"}`), call("search", `{"q":"Refund Policy"}`),
		call("read_doc", `{"id":"POL-14"}`), call("search", `{"q":"policy refund"}`),
	}
	for _, mode := range modes {
		d := Detector{Mode: mode}
		var whole State
		want := make([]bool, len(stuck))
		for i, c := range stuck {
			want[i] = d.Observe(&whole, c)
		}
		for cut := range len(stuck) + 1 {
			// Run up to the cut, checkpoint, crash, resume from the checkpoint.
			var s State
			for _, c := range stuck[:cut] {
				d.Observe(&s, c)
			}
			s.Fired = 1
			b, err := json.Marshal(&s)
			if err != nil {
				t.Fatal(err)
			}
			var resumed State
			if err := json.Unmarshal(b, &resumed); err != nil {
				t.Fatal(err)
			}
			if resumed.Fired != 1 {
				t.Errorf("%s: Fired %d after a round trip, want 1", mode, resumed.Fired)
			}
			for i := cut; i < len(stuck); i++ {
				if got := d.Observe(&resumed, stuck[i]); got != want[i] {
					t.Errorf("%s resumed after %d calls (%s): call %d fired %v, want %v", mode, cut, b, i, got, want[i])
				}
			}
			if resumed.Fired != 1 {
				t.Errorf("%s: Observe changed Fired to %d", mode, resumed.Fired)
			}
		}
	}
}

func TestStateStaysBounded(t *testing.T) {
	t.Parallel()
	for _, mode := range modes {
		d := Detector{Mode: mode}
		var s State
		for i := range 10_000 {
			c := call("search", fmt.Sprintf(`{"q":"refund question %d","page":%d}`, i, i%3))
			c.NewFact = i%1000 == 999
			d.Observe(&s, c)
		}
		b, err := json.Marshal(&s)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > 160 {
			t.Errorf("%s: state is %d bytes after 10,000 calls, want at most 160: %s", mode, len(b), b)
		}
		if cap(s.Recent) > 2*d.WithDefaults().Window {
			t.Errorf("%s: window backing array holds %d signatures", mode, cap(s.Recent))
		}
	}
}

func TestReset(t *testing.T) {
	t.Parallel()
	refund := call("search", `{"q":"refund policy"}`)
	for _, mode := range modes {
		d := Detector{Mode: mode}
		s := State{Fired: 1}
		first := -1
		for i := range 10 {
			if d.Observe(&s, refund) {
				first = i
				break
			}
		}
		if first < 0 {
			t.Fatalf("%s never fired on the same search repeated", mode)
		}
		s.Reset()
		if s.Fired != 1 {
			t.Errorf("%s: Reset changed Fired to %d", mode, s.Fired)
		}
		// After a replan the detector needs as much evidence as the first time.
		for i := range first {
			if d.Observe(&s, refund) {
				t.Errorf("%s fired %d calls after a reset, first fired after %d", mode, i, first)
			}
		}
		if !d.Observe(&s, refund) {
			t.Errorf("%s did not fire again once as stuck as before the reset", mode)
		}
	}
}

func TestParseMode(t *testing.T) {
	t.Parallel()
	for _, m := range modes {
		got, err := ParseMode(string(m))
		if err != nil || got != m {
			t.Errorf("ParseMode(%q) = %q, %v", m, got, err)
		}
	}
	_, err := ParseMode("Exact")
	if err == nil || !strings.Contains(err.Error(), "exact, canonical, window, progress") {
		t.Errorf("ParseMode(\"Exact\") error = %v, want one listing the valid names", err)
	}
}

func TestDetectorDefaultsAndValidate(t *testing.T) {
	t.Parallel()
	if got, want := (Detector{}).WithDefaults(), (Detector{Mode: Progress, Window: 6, Patience: 4, Repeats: 2}); got != want {
		t.Errorf("defaults = %+v, want %+v", got, want)
	}
	if err := (Detector{}).Validate(); err != nil {
		t.Errorf("zero detector: %v", err)
	}
	for _, d := range []Detector{{Mode: "loop"}, {Window: -1}, {Patience: -1}, {Repeats: -1}} {
		if err := d.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", d)
		}
		var s State
		for range 10 {
			if d.Observe(&s, call("t", `{}`)) {
				t.Errorf("invalid detector %+v fired", d)
				break
			}
		}
	}
}
