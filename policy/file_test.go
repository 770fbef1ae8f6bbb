package policy

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/belayrun/belay"
)

func mustParse(t testing.TB, src string) *File {
	t.Helper()
	f, err := Parse("test.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func call(tool string, args string) belay.PolicyCall {
	return belay.PolicyCall{Tool: tool, Effect: belay.Read, Args: json.RawMessage(args)}
}

func TestLoadSupport(t *testing.T) {
	t.Parallel()
	f, err := Load("testdata/support.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if f.Name() != "support-default" || f.Version() != "support-default@3" || f.Default() != DefaultByEffect {
		t.Errorf("name %q, version %q, default %q", f.Name(), f.Version(), f.Default())
	}
	rules := f.Rules()
	if len(rules) != 4 {
		t.Fatalf("%d rules, want 4", len(rules))
	}
	if r := rules[2]; r.Name != "large amounts" || r.Field != "cents" || r.Above != "5000" || r.Line != 13 ||
		r.Decision != belay.NeedsApproval || r.Reason != "large amounts" || r.Category != "refund_large" {
		t.Errorf("rule 2: %+v", r)
	}
	want := []string{
		"deleting an account cannot be undone: tool delete_account -> needs_approval [delete_account]",
		"reaches a customer: external -> needs_approval [external]",
		"large amounts: cents > 5000 -> needs_approval [refund_large]",
		"bulk operations: bulk > 50 -> needs_approval [bulk]",
	}
	for i, r := range rules {
		if r.String() != want[i] {
			t.Errorf("rule %d: %s, want %s", i, r, want[i])
		}
	}
	rules[0].Tools[0] = "changed"
	if f.Rules()[0].Tools[0] != "delete_account" {
		t.Error("Rules returned the file's own slices")
	}
	if _, err := Load("testdata/nope.yaml"); err == nil || !strings.Contains(err.Error(), "testdata/nope.yaml") {
		t.Errorf("Load of a missing file: %v", err)
	}
}

func TestRuleConditions(t *testing.T) {
	t.Parallel()
	f := mustParse(t, `
name: conditions
default: allow
rules:
  - name: first match wins
    tool: refund
    field: cents
    above: 5000.00
    decision: needs_approval
    reason: refunds above 50 USD need approval
    category: refund_large
  - name: refunds at the line
    tool: refund
    field: cents
    at_least: 5000
    decision: deny
  - name: shadowed by the first rule
    tool: refund
    field: cents
    above: 6000
    decision: deny
  - name: tiny
    tools: [refund, credit]
    field: cents
    below: 0.5
    decision: deny
  - name: in a range
    tool: discount
    field: percent
    at_least: 10
    below: 20
    decision: needs_approval
  - name: irreversible
    effect: irreversible
    decision: needs_approval
  - name: writes that reach a customer
    effect: write
    external: true
    decision: needs_approval
  - name: internal writes
    effect: write
    external: false
    decision: deny
`)
	for _, c := range []struct {
		name string
		call belay.PolicyCall
		want belay.Decision
	}{
		{"above", call("refund", `{"cents": 24000}`),
			belay.Decision{Verdict: belay.NeedsApproval, Reason: "refunds above 50 USD need approval", Category: "refund_large"}},
		{"above by a fraction", call("refund", `{"cents": 5000.0000000000000001}`),
			belay.Decision{Verdict: belay.NeedsApproval, Reason: "refunds above 50 USD need approval", Category: "refund_large"}},
		{"exactly the threshold is not above it", call("refund", `{"cents": 5000}`),
			belay.Decision{Verdict: belay.Deny, Reason: "refunds at the line", Category: "refund"}},
		{"exactly, written another way", call("refund", `{"cents": 5.000e3}`),
			belay.Decision{Verdict: belay.Deny, Reason: "refunds at the line", Category: "refund"}},
		{"below at_least", call("refund", `{"cents": 4999.99}`),
			belay.Decision{Verdict: belay.Allow}},
		{"below", call("credit", `{"cents": 0.25}`),
			belay.Decision{Verdict: belay.Deny, Reason: "tiny", Category: "credit"}},
		{"below is strict", call("credit", `{"cents": 0.5}`),
			belay.Decision{Verdict: belay.Allow}},
		{"tools list, other tool", call("payout", `{"cents": 0.25}`),
			belay.Decision{Verdict: belay.Allow}},
		{"missing field", call("refund", `{"amount": 24000}`),
			belay.Decision{Verdict: belay.NeedsApproval, Reason: `refunds above 50 USD need approval (the call has no number "cents", so this rule cannot judge it and applies)`, Category: "refund_large"}},
		{"string is not a number", call("refund", `{"cents": "24000"}`),
			belay.Decision{Verdict: belay.NeedsApproval, Reason: `refunds above 50 USD need approval (the call has no number "cents", so this rule cannot judge it and applies)`, Category: "refund_large"}},
		{"null is not a number", call("refund", `{"cents": null}`),
			belay.Decision{Verdict: belay.NeedsApproval, Reason: `refunds above 50 USD need approval (the call has no number "cents", so this rule cannot judge it and applies)`, Category: "refund_large"}},
		{"nested field is not top-level", call("refund", `{"order": {"cents": 24000}}`),
			belay.Decision{Verdict: belay.NeedsApproval, Reason: `refunds above 50 USD need approval (the call has no number "cents", so this rule cannot judge it and applies)`, Category: "refund_large"}},
		{"arguments not an object", call("refund", `[24000]`),
			belay.Decision{Verdict: belay.NeedsApproval, Reason: `refunds above 50 USD need approval (the call has no number "cents", so this rule cannot judge it and applies)`, Category: "refund_large"}},
		{"arguments not JSON", call("refund", `cents=24000`),
			belay.Decision{Verdict: belay.NeedsApproval, Reason: `refunds above 50 USD need approval (the call has no number "cents", so this rule cannot judge it and applies)`, Category: "refund_large"}},
		{"no arguments", call("refund", ``),
			belay.Decision{Verdict: belay.NeedsApproval, Reason: `refunds above 50 USD need approval (the call has no number "cents", so this rule cannot judge it and applies)`, Category: "refund_large"}},
		{"range inside", call("discount", `{"percent": 10}`),
			belay.Decision{Verdict: belay.NeedsApproval, Reason: "in a range", Category: "discount"}},
		{"range above", call("discount", `{"percent": 20}`),
			belay.Decision{Verdict: belay.Allow}},
		{"effect", belay.PolicyCall{Tool: "wipe", Effect: belay.Irreversible},
			belay.Decision{Verdict: belay.NeedsApproval, Reason: "irreversible", Category: "wipe"}},
		{"effect and external", belay.PolicyCall{Tool: "email", Effect: belay.Write, External: true},
			belay.Decision{Verdict: belay.NeedsApproval, Reason: "writes that reach a customer", Category: "email"}},
		{"effect and not external", belay.PolicyCall{Tool: "note", Effect: belay.Write},
			belay.Decision{Verdict: belay.Deny, Reason: "internal writes", Category: "note"}},
		{"external read", belay.PolicyCall{Tool: "peek", Effect: belay.Read, External: true},
			belay.Decision{Verdict: belay.Allow}},
	} {
		if got := f.Decide(c.call); got != c.want {
			t.Errorf("%s: Decide = %+v, want %+v", c.name, got, c.want)
		}
		got, err := f.Policy()(t.Context(), c.call)
		if err != nil || got != c.want {
			t.Errorf("%s: Policy = %+v, %v, want %+v", c.name, got, err, c.want)
		}
	}
}

// A call with no effect class is a read, as a tool with none is.
func TestRuleEffectDefaultsToRead(t *testing.T) {
	t.Parallel()
	f := mustParse(t, "name: p\ndefault: deny\nrules:\n  - {name: reads, effect: read, decision: allow}\n")
	if got := f.Decide(belay.PolicyCall{Tool: "look"}); got.Verdict != belay.Allow {
		t.Errorf("Decide = %+v, want allow", got)
	}
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	calls := []belay.PolicyCall{
		{Tool: "search", Effect: belay.Read},
		{Tool: "note", Effect: belay.Write},
		{Tool: "delete", Effect: belay.Irreversible},
		{Tool: "email", Effect: belay.Write, External: true},
		{Tool: "peek", Effect: belay.Read, External: true},
	}
	for _, c := range []struct {
		def  string
		want func(belay.PolicyCall) belay.Decision
	}{
		{"allow", func(belay.PolicyCall) belay.Decision { return belay.Decision{Verdict: belay.Allow} }},
		{"deny", func(c belay.PolicyCall) belay.Decision {
			return belay.Decision{Verdict: belay.Deny, Reason: "no rule of p@1 allows " + c.Tool, Category: c.Tool}
		}},
		{"needs_approval", func(c belay.PolicyCall) belay.Decision {
			return belay.Decision{Verdict: belay.NeedsApproval, Reason: "no rule of p@1 covers " + c.Tool, Category: c.Tool}
		}},
		{"by_effect", func(c belay.PolicyCall) belay.Decision {
			d, _ := belay.DefaultPolicy(context.Background(), c)
			return d
		}},
		{"", func(c belay.PolicyCall) belay.Decision { // absent: by_effect
			d, _ := belay.DefaultPolicy(context.Background(), c)
			return d
		}},
	} {
		src := "name: p\nversion: 1\n"
		if c.def != "" {
			src += "default: " + c.def + "\n"
		}
		f := mustParse(t, src+"rules:\n  - {name: searches, tool: search, decision: allow}\n")
		for _, call := range calls[1:] {
			if got, want := f.Decide(call), c.want(call); got != want {
				t.Errorf("default %q, %s: %+v, want %+v", c.def, call.Tool, got, want)
			}
		}
		if got := f.Decide(calls[0]); got != (belay.Decision{Verdict: belay.Allow, Reason: "searches", Category: "search"}) {
			t.Errorf("default %q: a matching rule lost to the default: %+v", c.def, got)
		}
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, src string
		want      []string // each line of the error
		line      int
		field     string
	}{
		{"bad decision", `name: support
version: 3
rules:
  - name: one
    tool: a
    decision: allow
  - name: two
    tool: b
    decision: maybe
`, []string{`support.yaml:9: rules[1].decision: "maybe" is not one of allow, deny, needs_approval`}, 9, "rules[1].decision"},
		{"unknown rule field", "name: p\nrules:\n  - name: r\n    tool: a\n    tols: [b]\n    decision: deny\n",
			[]string{"support.yaml:5: rules[0].tols: unknown field; want one of name, tool, tools, effect, external, field, over, window, key, above, at_least, below, decision, reason, category, self_approval"}, 5, "rules[0].tols"},
		{"unknown top field", "name: p\ndefualt: deny\n",
			[]string{"support.yaml:2: defualt: unknown field; want one of name, version, default, rules"}, 2, "defualt"},
		{"bad effect", "name: p\nrules:\n  - {name: r, effect: destructive, decision: deny}\n",
			[]string{`support.yaml:3: rules[0].effect: "destructive" is not one of read, write, irreversible`}, 3, "rules[0].effect"},
		{"bad default", "name: p\ndefault: ask\n",
			[]string{`support.yaml:2: default: "ask" is not one of allow, deny, needs_approval, by_effect`}, 2, "default"},
		{"rule without conditions", "name: p\nrules:\n  - name: everything\n    decision: allow\n  - name: never reached\n    tool: a\n    decision: deny\n",
			[]string{"support.yaml:3: rules[0]: has no condition, so it matches every call and the rules after it never apply; add a condition or make it the last rule"}, 3, "rules[0]"},
		{"missing decision and name", "name: p\nrules:\n  - tool: a\n",
			[]string{"support.yaml:3: rules[0].name: missing; a rule has a name, which is its reason unless it sets one",
				"support.yaml:3: rules[0].decision: missing; want one of allow, deny, needs_approval"}, 3, "rules[0].name"},
		{"missing policy name", "version: 2\n",
			[]string{"support.yaml:1: name: missing; a policy has a name, and its version is name@version"}, 1, "name"},
		{"tool and tools", "name: p\nrules:\n  - name: r\n    tool: a\n    tools: [b]\n    decision: deny\n",
			[]string{"support.yaml:5: rules[0].tools: set tool or tools, not both"}, 5, "rules[0].tools"},
		{"empty tools", "name: p\nrules:\n  - {name: r, tools: [], decision: deny}\n",
			[]string{"support.yaml:3: rules[0].tools: is an empty list; name at least one tool"}, 3, "rules[0].tools"},
		{"field without comparison", "name: p\nrules:\n  - name: r\n    field: cents\n    decision: deny\n",
			[]string{"support.yaml:4: rules[0].field: needs above, at_least or below"}, 4, "rules[0].field"},
		{"comparison without field", "name: p\nrules:\n  - name: r\n    tool: a\n    above: 5\n    decision: deny\n",
			[]string{"support.yaml:5: rules[0].above: needs field: the argument to compare"}, 5, "rules[0].above"},
		{"quoted number", "name: p\nrules:\n  - name: r\n    field: cents\n    above: \"5000\"\n    decision: deny\n",
			[]string{`support.yaml:5: rules[0].above: must be a decimal number such as 5000 or 49.99, not "5000"`}, 5, "rules[0].above"},
		{"hex number", "name: p\nrules:\n  - {name: r, field: cents, below: 0x10, decision: deny}\n",
			[]string{`support.yaml:3: rules[0].below: must be a decimal number such as 5000 or 49.99, not 0x10`}, 3, "rules[0].below"},
		{"infinite number", "name: p\nrules:\n  - {name: r, field: cents, below: .inf, decision: deny}\n",
			[]string{`support.yaml:3: rules[0].below: must be a decimal number such as 5000 or 49.99, not .inf`}, 3, "rules[0].below"},
		{"yes is not a bool", "name: p\nrules:\n  - {name: r, external: yes, decision: deny}\n",
			[]string{`support.yaml:3: rules[0].external: must be true or false, not "yes"`}, 3, "rules[0].external"},
		{"tool is a number", "name: p\nrules:\n  - {name: r, tool: 7, decision: deny}\n",
			[]string{`support.yaml:3: rules[0].tool: must be a string, not 7`}, 3, "rules[0].tool"},
		{"null value", "name: p\nrules:\n  - name: r\n    tool:\n    decision: deny\n",
			[]string{"support.yaml:4: rules[0].tool: has no value"}, 4, "rules[0].tool"},
		{"rules not a list", "name: p\nrules:\n  name: r\n",
			[]string{"support.yaml:3: rules: must be a list, not a mapping"}, 3, "rules"},
		{"rule not a mapping", "name: p\nrules:\n  - delete_account\n",
			[]string{`support.yaml:3: rules[0]: must be a mapping of name, tool, tools, effect, external, field, over, window, key, above, at_least, below, decision, reason, category, self_approval, not "delete_account"`}, 3, "rules[0]"},
		{"not a mapping", "- a\n- b\n",
			[]string{"support.yaml:1: must be a mapping of name, version, default, rules, not a list"}, 1, ""},
		{"version with a space", "name: p\nversion: two words\n",
			[]string{`support.yaml:2: version: "two words" has a space or an @; a version is one word`}, 2, "version"},
		{"anchor", "name: p\nrules:\n  - &r {name: r, tool: a, decision: deny}\n",
			[]string{"support.yaml:3: rules[0]: anchors, aliases, merge keys and tags are not supported"}, 3, "rules[0]"},
		{"duplicate key", "name: p\nname: q\n",
			[]string{`support.yaml:2: mapping key "name" already defined at [1:1]`}, 2, ""},
		{"syntax", "name: p\nrules: [\n",
			nil, 2, ""},
		{"empty", "# nothing\n",
			[]string{"support.yaml: the file is empty"}, 0, ""},
		{"two documents", "name: p\n---\nname: q\n",
			[]string{"support.yaml:3: a second YAML document; the file must hold one"}, 3, ""},
		{"json", `{"name": "p", "rules": [{"name": "r", "tool": "a", "decision": "perhaps"}]}`,
			[]string{`support.yaml:1: rules[0].decision: "perhaps" is not one of allow, deny, needs_approval`}, 1, "rules[0].decision"},
	} {
		_, err := Parse("support.yaml", []byte(c.src))
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if c.want != nil {
			if got := strings.Split(err.Error(), "\n"); strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("%s:\n got %s\nwant %s", c.name, err, strings.Join(c.want, "\n"))
			}
		}
		var pe *Error
		if !errors.As(err, &pe) {
			t.Errorf("%s: %v is not an *Error", c.name, err)
			continue
		}
		if pe.File != "support.yaml" || pe.Line != c.line || pe.Field != c.field {
			t.Errorf("%s: file %q line %d field %q, want line %d field %q", c.name, pe.File, pe.Line, pe.Field, c.line, c.field)
		}
	}
}

// The last rule may match everything: it is how a file says "otherwise".
func TestCatchAllLastRule(t *testing.T) {
	t.Parallel()
	f := mustParse(t, "name: p\ndefault: allow\nrules:\n  - {name: reads, effect: read, decision: allow}\n  - {name: everything else waits, decision: needs_approval}\n")
	if got := f.Decide(belay.PolicyCall{Tool: "x", Effect: belay.Write}); got.Verdict != belay.NeedsApproval || got.Reason != "everything else waits" {
		t.Errorf("Decide = %+v", got)
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	base := `name: p
default: allow
rules:
  - name: large
    tools: [refund, credit]
    field: cents
    above: 5000
    decision: needs_approval
`
	v := mustParse(t, base).Version()
	if !strings.HasPrefix(v, "p@") || len(v) != len("p@")+12 {
		t.Fatalf("Version %q, want p@ and a 12-digit hash", v)
	}
	for name, src := range map[string]string{
		"again": base,
		"written differently": `# same rules
name: p
default: allow
rules:
  - {name: large, tools: [credit, refund], field: cents, above: 5000.00, decision: needs_approval, reason: large}
`,
		"json": `{"name": "p", "default": "allow", "rules": [
  {"name": "large", "tools": ["refund", "credit"], "field": "cents", "above": 5e3, "decision": "needs_approval"}]}`,
	} {
		if got := mustParse(t, src).Version(); got != v {
			t.Errorf("%s: Version %q, want %q", name, got, v)
		}
	}
	for name, src := range map[string]string{
		"threshold":  strings.Replace(base, "5000", "5001", 1),
		"decision":   strings.Replace(base, "needs_approval", "deny", 1),
		"tools":      strings.Replace(base, "[refund, credit]", "[refund]", 1),
		"default":    strings.Replace(base, "default: allow", "default: deny", 1),
		"reason":     base + "    reason: refunds over 50 USD\n",
		"category":   base + "    category: money\n",
		"comparison": strings.Replace(base, "above", "at_least", 1),
		"a rule":     base + "  - {name: wipe, effect: irreversible, decision: deny}\n",
	} {
		f := mustParse(t, src)
		if f.Version() == v {
			t.Errorf("changing the %s left the version at %q", name, v)
		}
	}
	// A version written in the file is used as it is; Digest still moves.
	a := mustParse(t, base+"version: 7\n")
	b := mustParse(t, strings.Replace(base, "5000", "9000", 1)+"version: 7\n")
	if a.Version() != "p@7" || b.Version() != "p@7" {
		t.Errorf("versions %q and %q, want p@7", a.Version(), b.Version())
	}
	if a.Digest() == b.Digest() {
		t.Error("Digest did not change with the rules")
	}
	if s := mustParse(t, "name: p\nversion: \"2024-06\"\n").Version(); s != "p@2024-06" {
		t.Errorf("string version: %q", s)
	}
}

func TestPolicyConcurrent(t *testing.T) {
	t.Parallel()
	f, err := Load("testdata/support.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := f.Policy()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				d, err := p(t.Context(), call("refund", `{"cents": 24000}`))
				if err != nil || d.Verdict != belay.NeedsApproval || d.Category != "refund_large" {
					t.Errorf("Decide = %+v, %v", d, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"", "name: p\n", "name: p\nrules: []\n", "- 1\n", "{", "name: [\n",
		"name: p\nrules:\n  - {name: r, field: cents, above: 1e999999999, decision: deny}\n",
		"name: p\nrules:\n  - &a {name: r, tool: x, decision: deny}\n  - *a\n",
		"name: p\nrules:\n  - <<: {name: r}\n    decision: deny\n",
		`{"name": "p", "rules": [{"name": "r", "tools": ["a", 1], "decision": "allow"}]}`,
	} {
		f.Add([]byte(s))
	}
	for _, path := range []string{"testdata/support.yaml", "testdata/rule.yaml", "testdata/traffic.json"} {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse("fuzz.yaml", data)
		if err != nil {
			if p != nil {
				t.Fatal("a file and an error")
			}
			return
		}
		if p.Version() == "" || p.Digest() == "" {
			t.Fatal("a file without a version")
		}
		for _, c := range []belay.PolicyCall{
			call("refund", `{"cents": 24000, "bulk": 1e999999999}`),
			{Tool: "x", Effect: belay.Irreversible, External: true},
		} {
			switch d := p.Decide(c); d.Verdict {
			case belay.Allow, belay.Deny, belay.NeedsApproval:
			default:
				t.Fatalf("verdict %q", d.Verdict)
			}
		}
	})
}

func TestRunTotals(t *testing.T) {
	f, err := Parse("totals.yaml", []byte(`
name: totals
version: 1
default: allow
rules:
  - name: refunds in one run above 300 USD need a person
    tool: issue_refund
    field: amount_usd
    over: run
    above: 300
    decision: needs_approval
    category: refund_total
`))
	if err != nil {
		t.Fatal(err)
	}
	prior := []belay.PriorEffect{
		{Tool: "issue_refund", Args: json.RawMessage(`{"amount_usd": 100.10}`)},
		{Tool: "issue_refund", Args: json.RawMessage(`{"amount_usd": 99.90}`)},
		{Tool: "reply", Args: json.RawMessage(`{"amount_usd": 5000}`)},
	}
	for _, tc := range []struct {
		amount string
		want   belay.Verdict
	}{{"100", belay.Allow}, {"100.00", belay.Allow}, {"100.01", belay.NeedsApproval}, {"1e3", belay.NeedsApproval}} {
		call := belay.PolicyCall{Tool: "issue_refund", Args: json.RawMessage(`{"amount_usd":` + tc.amount + `}`), Prior: prior}
		if got := f.Decide(call); got.Verdict != tc.want {
			t.Errorf("a refund of %s after 200.00: %s, want %s", tc.amount, got.Verdict, tc.want)
		}
	}
	if _, err := Parse("bad.yaml", []byte("name: x\nrules:\n  - name: r\n    over: run\n    decision: deny\n")); err == nil || !strings.Contains(err.Error(), "over") {
		t.Errorf("over without field: %v", err)
	}
}

// A rule whose field the call does not carry as a number (mistyped in the
// file, or sent as a string by the tool) fails closed: the rule that would
// ask a person applies instead of falling through to one that allows, and
// a rule that would allow does not apply.
func TestRuleThatCannotReadItsFieldFailsClosed(t *testing.T) {
	f, err := Parse("support.yaml", []byte(`
name: support
version: 2
default: by_effect
rules:
  - {name: big, tool: issue_refund, field: amount, above: 50, decision: needs_approval}
  - {name: small refunds are routine, tool: issue_refund, decision: allow}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range []string{`{"charge_id":"CH-1","amount_usd":5000}`, `{"charge_id":"CH-1","amount":"5000"}`} {
		if d := f.Decide(belay.PolicyCall{Tool: "issue_refund", Effect: belay.Irreversible, Args: json.RawMessage(args)}); d.Verdict != belay.NeedsApproval || !strings.Contains(d.Reason, `no number "amount"`) {
			t.Errorf("refund %s: %+v, want needs_approval saying the rule could not read amount", args, d)
		}
	}
	permissive, err := Parse("p.yaml", []byte(`
name: p
version: 1
default: by_effect
rules:
  - {name: cheap, tool: issue_refund, field: amount, below: 10, decision: allow}
`))
	if err != nil {
		t.Fatal(err)
	}
	if d := permissive.Decide(belay.PolicyCall{Tool: "issue_refund", Effect: belay.Irreversible, Args: json.RawMessage(`{"amount_usd":5}`)}); d.Verdict != belay.NeedsApproval {
		t.Errorf("an allow rule that cannot read its field: %+v, want the default (needs_approval for an irreversible call)", d)
	}
}

// A run total is exact: 0.1 + 0.025 is 0.125, below 0.13, not rounded up to
// it (the sum's eighths need three digits).
func TestRunTotalIsExact(t *testing.T) {
	f := mustParse(t, `
name: p
version: 1
default: allow
rules:
  - {name: total, tool: refund, field: amount, over: run, at_least: 0.13, decision: needs_approval}
`)
	for _, c := range []struct {
		prior, amount string
		want          belay.Verdict
	}{
		{"0.1", "0.025", belay.Allow},
		{"0.1", "0.03", belay.NeedsApproval},
		{"0.0625", "0.0625", belay.Allow},
		{"1", "2", belay.NeedsApproval},
	} {
		call := belay.PolicyCall{Tool: "refund", Effect: belay.Write, Args: json.RawMessage(`{"amount":` + c.amount + `}`),
			Prior: []belay.PriorEffect{{Tool: "refund", Args: json.RawMessage(`{"amount":` + c.prior + `}`)}}}
		if d := f.Decide(call); d.Verdict != c.want {
			t.Errorf("%s then %s: %s, want %s", c.prior, c.amount, d.Verdict, c.want)
		}
	}
}
