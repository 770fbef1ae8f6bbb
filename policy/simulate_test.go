package policy

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/belayrun/belay"
)

// goldenTable is what the Python in the approval-gates text prints, to the
// byte. "gate everything" is 15 characters in a 14-wide column, so it pushes
// its row one to the right, as Python's f-string does.
const goldenTable = `policy          approvals   harm left  harm stopped  per approval
gate nothing            0        586             0           nan
gate everything       1000          0           586          0.59
by rule                95         12           574          6.04

gated by rule: ['send_email', 'refund_large', 'bulk_close', 'delete_account']
`

func TestSimulateReproducesTheText(t *testing.T) {
	t.Parallel()
	p, err := Load("testdata/rule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, traffic := range []string{"testdata/traffic.yaml", "testdata/traffic.json", "testdata/traffic.csv"} {
		actions, err := LoadTraffic(traffic)
		if err != nil {
			t.Fatal(err)
		}
		r, err := Simulate(t.Context(), actions, p.Policy(), 0.03)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Format(); got != goldenTable {
			t.Errorf("%s: Format:\n%s\nwant:\n%s", traffic, got, goldenTable)
		}
		if r.Policy.Approvals != 95 || math.Abs(r.Policy.HarmLeft-12.15) > 1e-9 {
			t.Errorf("%s: policy row %+v, want 95 approvals and 12.15 harm left", traffic, r.Policy)
		}
	}
}

// The support policy reaches the same gates with a by_effect default, since
// the simulator's calls are reads.
func TestSimulateSupportPolicy(t *testing.T) {
	t.Parallel()
	p, err := Load("testdata/support.yaml")
	if err != nil {
		t.Fatal(err)
	}
	actions, err := LoadTraffic("testdata/traffic.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r, err := Simulate(t.Context(), actions, p.Policy(), 0.03)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Format(); got != goldenTable {
		t.Errorf("Format:\n%s\nwant:\n%s", got, goldenTable)
	}
}

func TestSimulateDenied(t *testing.T) {
	t.Parallel()
	p, err := Parse("deny.yaml", []byte(`
name: strict
default: allow
rules:
  - {name: never delete, tool: delete_account, decision: deny}
  - {name: big, field: bulk, above: 50, decision: needs_approval}
`))
	if err != nil {
		t.Fatal(err)
	}
	actions, err := LoadTraffic("testdata/traffic.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r, err := Simulate(t.Context(), actions, p.Policy(), 0.03)
	if err != nil {
		t.Fatal(err)
	}
	r.Policy.Name = "strict"
	want := `policy          approvals   harm left  harm stopped  per approval  denied
gate nothing            0        586             0           nan       0
gate everything       1000          0           586          0.59       0
strict                 14        154           432         18.00       3

gated by strict: ['bulk_close']
denied by strict: ['delete_account']
`
	if got := r.Format(); got != want {
		t.Errorf("Format:\n%s\nwant:\n%s", got, want)
	}
	if r.Policy.Denied != 3 || !slices.Equal(r.Policy.DeniedKinds, []string{"delete_account"}) {
		t.Errorf("policy row %+v", r.Policy)
	}
}

func TestSimulateCall(t *testing.T) {
	t.Parallel()
	var got []belay.PolicyCall
	p := func(_ context.Context, call belay.PolicyCall) (belay.Decision, error) {
		got = append(got, call)
		return belay.Decision{Verdict: belay.Allow}, nil
	}
	_, err := Simulate(t.Context(), []Action{
		{Kind: "refund", Count: 1, External: true, Cents: 24000, Bulk: 2},
		{Kind: "wipe", Count: 1, Effect: belay.Irreversible},
	}, p, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("policy called %d times, want once per action", len(got))
	}
	if c := got[0]; c.Tool != "refund" || c.Effect != belay.Read || !c.External || string(c.Args) != `{"bulk":2,"cents":24000}` {
		t.Errorf("call %+v (args %s)", c, c.Args)
	}
	if got[1].Effect != belay.Irreversible {
		t.Errorf("effect %q, want the action's", got[1].Effect)
	}
}

func TestSimulateErrors(t *testing.T) {
	t.Parallel()
	allow := func(context.Context, belay.PolicyCall) (belay.Decision, error) {
		return belay.Decision{Verdict: belay.Allow}, nil
	}
	boom := errors.New("boom")
	for name, c := range map[string]struct {
		traffic []Action
		p       belay.Policy
		pWrong  float64
	}{
		"p above 1":      {[]Action{{Kind: "a", Count: 1}}, allow, 1.5},
		"p NaN":          {[]Action{{Kind: "a", Count: 1}}, allow, math.NaN()},
		"no kind":        {[]Action{{Count: 1}}, allow, 0.1},
		"negative count": {[]Action{{Kind: "a", Count: -1}}, allow, 0.1},
		"infinite harm":  {[]Action{{Kind: "a", Count: 1, Harm: math.Inf(1)}}, allow, 0.1},
		"policy error": {[]Action{{Kind: "a", Count: 1}}, func(context.Context, belay.PolicyCall) (belay.Decision, error) {
			return belay.Decision{}, boom
		}, 0.1},
		"no verdict": {[]Action{{Kind: "a", Count: 1}}, func(context.Context, belay.PolicyCall) (belay.Decision, error) {
			return belay.Decision{}, nil
		}, 0.1},
	} {
		if _, err := Simulate(t.Context(), c.traffic, c.p, c.pWrong); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestPyFormatting(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		v    float64
		prec int
		want string
	}{
		{math.NaN(), 2, "nan"}, {math.Inf(1), 0, "inf"}, {math.Inf(-1), 0, "-inf"},
		{0.5, 0, "0"}, {1.5, 0, "2"}, {2.5, 0, "2"}, {585.75, 0, "586"}, {573.6 / 95, 2, "6.04"},
		{math.Copysign(0, -1), 0, "-0"}, {1e20, 0, "100000000000000000000"},
	} {
		if got := pyFixed(c.v, c.prec); got != c.want {
			t.Errorf("pyFixed(%v, %d) = %q, want %q", c.v, c.prec, got, c.want)
		}
	}
	for in, want := range map[string]string{
		"send_email": `'send_email'`,
		"it's":       `"it's"`,
		`'"`:         `'\'"'`,
		`a\b`:        `'a\\b'`,
		"tab\there":  `'tab\there'`,
		"\x00\x7f":   `'\x00\x7f'`,
		"\u00a0é":    `'\xa0é'`,
		"\u200b":     `'\u200b'`,
	} {
		if got := pyRepr(in); got != want {
			t.Errorf("pyRepr(%q) = %s, want %s", in, got, want)
		}
	}
	if got := pyList(nil); got != "[]" {
		t.Errorf("pyList(nil) = %s", got)
	}
}

// Python's sum compensates since 3.12: sum([0.1] * 10) is 1.0, not
// 0.9999999999999999.
func TestPySum(t *testing.T) {
	t.Parallel()
	var s pySum
	for range 10 {
		s.add(0.1)
	}
	if s.total() != 1.0 {
		t.Errorf("sum of ten 0.1 = %v, want 1", s.total())
	}
	var big pySum
	for _, x := range []float64{1e308, 1e308, -1e308} {
		big.add(x)
	}
	if !math.IsInf(big.total(), 1) {
		t.Errorf("overflowed sum = %v, want +Inf as Python gives", big.total())
	}
}
