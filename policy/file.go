package policy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/belayrun/belay"
	"github.com/goccy/go-yaml/ast"
)

// Default is what a policy decides for a call no rule matches.
type Default string

const (
	// DefaultAllow runs what no rule matches.
	DefaultAllow Default = "allow"
	// DefaultDeny refuses what no rule matches: an allowlist.
	DefaultDeny Default = "deny"
	// DefaultNeedsApproval asks a person about what no rule matches.
	DefaultNeedsApproval Default = "needs_approval"
	// DefaultByEffect decides as belay.DefaultPolicy does: irreversible and
	// external calls need approval, the rest are allowed. It is the default
	// when a file sets none.
	DefaultByEffect Default = "by_effect"
)

var (
	topFields  = []string{"name", "version", "default", "rules"}
	ruleFields = []string{"name", "tool", "tools", "effect", "external", "field", "over", "window", "key", "above", "at_least", "below", "decision", "reason", "category", "self_approval"}
	overs      = []string{"call", "run", "tenant", "user", "key"}
	defaults   = []string{string(DefaultAllow), string(DefaultDeny), string(DefaultNeedsApproval), string(DefaultByEffect)}
	verdicts   = []string{string(belay.Allow), string(belay.Deny), string(belay.NeedsApproval)}
	effects    = []string{string(belay.Read), string(belay.Write), string(belay.Irreversible)}
)

// File is a parsed policy file. It is immutable and safe for concurrent use.
type File struct {
	path    string
	name    string
	version string // as written; empty if the file sets none
	def     Default
	rules   []Rule
	digest  string
}

// Rule is one rule of a policy file. A rule matches a call when every
// condition it sets holds; a rule that sets none matches every call.
type Rule struct {
	Name string
	// Line is where the rule starts in its file.
	Line int

	// Tools the rule applies to; empty means any tool.
	Tools []string
	// Effect the call must have; empty means any.
	Effect belay.EffectClass
	// External the call must be; nil means either.
	External *bool
	// Field names a top-level numeric argument of the call, compared with
	// Above, AtLeast and Below (decimal text as written; empty when unset).
	// When the argument is missing or not a number the rule cannot judge
	// the call and fails closed: a rule that denies or asks a person
	// applies, one that allows does not.
	Field                 string
	Above, AtLeast, Below string
	// Over is what Field is taken over: "call" (default), this call's
	// argument; "run", the sum of the argument over the run's applied side
	// effects of the same tool plus this call, so that many small refunds
	// meet the gate a large one would. Across runs, over Window:
	// "tenant", the sum over the tenant's side effects of the same tool
	// begun within the window, this run's and this call included; "user",
	// over those of runs for the same user (the customer); "key", over
	// those whose argument Key equals this call's (a customer_id, an
	// order). The other runs' effects are read from the store every
	// worker shares; a call whose total cannot be read fails closed.
	Over string
	// Window is how far back a total across runs reaches ("24h", "7d").
	Window time.Duration
	// Key names the argument that groups effects for Over "key".
	Key string

	Decision belay.Verdict
	// Reason is what a person reads about the decision; the rule's name
	// unless the file sets one.
	Reason string
	// Category groups decisions for approval statistics; empty means the
	// call's tool name.
	Category string
	// SelfApproval lets the person who requested the run decide its
	// approval; by default a requester cannot approve their own run.
	SelfApproval bool

	above, atLeast, below *decimal
}

// Load reads and parses the policy file at path.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// Parse parses a policy file in YAML or JSON. name is used in errors, which
// say the line, the field and what is allowed:
//
//	support.yaml:7: rules[1].decision: "maybe" is not one of allow, deny, needs_approval
func Parse(name string, data []byte) (*File, error) {
	d := &decoder{file: name}
	body, ok := d.document(data)
	if !ok {
		return nil, d.err()
	}
	f := &File{path: name, def: DefaultByEffect}
	present, ok := d.fields(body, "", topFields, func(key string, v ast.Node, field string) {
		switch key {
		case "name":
			f.name, _ = d.str(v, field)
		case "version":
			f.version, _ = d.versionLabel(v, field)
		case "default":
			if s, ok := d.oneOf(v, field, defaults); ok {
				f.def = Default(s)
			}
		case "rules":
			d.list(v, field, func(i int, rv ast.Node, field string) {
				r, ok := d.rule(rv, field)
				if !ok {
					return
				}
				if last := i == len(v.(*ast.SequenceNode).Values)-1; !last && !r.hasCondition() {
					d.fail(rv, field, "has no condition, so it matches every call and the rules after it never apply; add a condition or make it the last rule")
				}
				f.rules = append(f.rules, r)
			})
		}
	})
	if ok && present["name"] == nil {
		d.fail(body, "name", "missing; a policy has a name, and its version is name@version")
	}
	if len(d.errs) > 0 {
		return nil, d.err()
	}
	f.digest = f.computeDigest()
	return f, nil
}

// versionLabel accepts a number or a string: version: 3, version: "2024-06".
func (d *decoder) versionLabel(n ast.Node, field string) (string, bool) {
	switch n.(type) {
	case *ast.IntegerNode, *ast.FloatNode:
		return n.GetToken().Value, true
	}
	s, ok := d.str(n, field)
	if ok && strings.ContainsAny(s, " \t\r\n@") {
		d.fail(n, field, "%q has a space or an @; a version is one word", s)
		return "", false
	}
	return s, ok
}

func (d *decoder) rule(n ast.Node, path string) (Rule, bool) {
	r := Rule{Line: lineOf(n)}
	nerr := len(d.errs)
	present, ok := d.fields(n, path, ruleFields, func(key string, v ast.Node, field string) {
		switch key {
		case "name":
			r.Name, _ = d.str(v, field)
		case "reason":
			r.Reason, _ = d.str(v, field)
		case "category":
			r.Category, _ = d.str(v, field)
		case "tool":
			if s, ok := d.str(v, field); ok {
				r.Tools = []string{s}
			}
		case "tools":
			d.list(v, field, func(_ int, v ast.Node, field string) {
				if s, ok := d.str(v, field); ok {
					r.Tools = append(r.Tools, s)
				}
			})
			if s, ok := v.(*ast.SequenceNode); ok && len(s.Values) == 0 {
				d.fail(v, field, "is an empty list; name at least one tool")
			}
		case "effect":
			if s, ok := d.oneOf(v, field, effects); ok {
				r.Effect = belay.EffectClass(s)
			}
		case "external":
			if b, ok := d.boolean(v, field); ok {
				r.External = &b
			}
		case "self_approval":
			r.SelfApproval, _ = d.boolean(v, field)
		case "field":
			r.Field, _ = d.str(v, field)
		case "over":
			r.Over, _ = d.oneOf(v, field, overs)
		case "window":
			if s, ok := d.str(v, field); ok {
				w, err := parseWindow(s)
				if err != nil {
					d.fail(v, field, "%q: %v", s, err)
				}
				r.Window = w
			}
		case "key":
			r.Key, _ = d.str(v, field)
		case "above", "at_least", "below":
			text, x, ok := d.number(v, field)
			if !ok {
				return
			}
			switch key {
			case "above":
				r.Above, r.above = text, &x
			case "at_least":
				r.AtLeast, r.atLeast = text, &x
			case "below":
				r.Below, r.below = text, &x
			}
		case "decision":
			if s, ok := d.oneOf(v, field, verdicts); ok {
				r.Decision = belay.Verdict(s)
			}
		}
	})
	if !ok {
		return Rule{}, false
	}
	if present["name"] == nil {
		d.fail(n, path+".name", "missing; a rule has a name, which is its reason unless it sets one")
	}
	if present["decision"] == nil {
		d.fail(n, path+".decision", "missing; want one of %s", strings.Join(verdicts, ", "))
	}
	if present["tool"] != nil && present["tools"] != nil {
		d.fail(present["tools"], path+".tools", "set tool or tools, not both")
	}
	compared := false
	for _, k := range []string{"above", "at_least", "below"} {
		if present[k] != nil {
			compared = true
			if present["field"] == nil {
				d.fail(present[k], path+"."+k, "needs field: the argument to compare")
			}
		}
	}
	if present["over"] != nil && present["field"] == nil {
		d.fail(present["over"], path+".over", "needs field: the argument to add up")
	}
	across := r.Over == "tenant" || r.Over == "user" || r.Over == "key"
	if across && present["window"] == nil {
		d.fail(present["over"], path+".window", "missing; over %s totals the effects of a window across runs: say how far back, e.g. window: 24h", r.Over)
	}
	if present["window"] != nil && !across {
		d.fail(present["window"], path+".window", "needs over: tenant, user or key; a window reaches across runs")
	}
	if (r.Over == "key") != (present["key"] != nil) {
		at := present["key"]
		if at == nil {
			at = present["over"]
		}
		d.fail(at, path+".key", "over: key and key: <argument> go together; key names the argument that groups the effects (customer_id)")
	}
	if present["field"] != nil && !compared {
		d.fail(present["field"], path+".field", "needs above, at_least or below")
	}
	if len(d.errs) > nerr {
		return Rule{}, false
	}
	if r.Reason == "" {
		r.Reason = r.Name
	}
	return r, true
}

func (r *Rule) hasCondition() bool {
	return len(r.Tools) > 0 || r.Effect != "" || r.External != nil || r.Field != ""
}

// Name is the policy's name.
func (f *File) Name() string { return f.name }

// Version identifies what the policy decides: name@version, or, when the
// file sets no version, name@ and a short hash of the default and the
// normalised rules. An approval is bound to it.
//
// A version written in the file is taken at its word: a file whose rules
// change without a new version keeps its Version. Digest always changes.
func (f *File) Version() string {
	if f.version != "" {
		return f.name + "@" + f.version
	}
	return f.name + "@" + f.digest
}

// Digest is a short hash of the default and the normalised rules: writing
// 5000 as 5000.00, reordering a tools list or spelling out a default
// reason leaves it as it is.
func (f *File) Digest() string { return f.digest }

// Default is what the policy decides for a call no rule matches.
func (f *File) Default() Default { return f.def }

// Rules returns a copy of the rules, in order.
func (f *File) Rules() []Rule {
	rules := slices.Clone(f.rules)
	for i := range rules {
		rules[i].Tools = slices.Clone(rules[i].Tools)
	}
	return rules
}

// Policy returns the file as a belay.Policy. It returns an error only when
// a rule's total across runs cannot be read from the store (the run then
// pauses rather than run a call no rule could judge).
func (f *File) Policy() belay.Policy {
	return f.decide
}

// Decide returns the decision of the first rule that matches call, or the
// file's default. A rule whose total across runs cannot be read fails
// closed, as one that cannot read its field does.
func (f *File) Decide(call belay.PolicyCall) belay.Decision {
	d, err := f.decide(context.Background(), call)
	if err != nil {
		return belay.Decision{Verdict: belay.Deny, Reason: "the policy could not read the totals it needs", Category: call.Tool}
	}
	return d
}

func (f *File) decide(ctx context.Context, call belay.PolicyCall) (belay.Decision, error) {
	args := callArgs{rawArgs: call.Args}
	for i := range f.rules {
		r := &f.rules[i]
		matched, unjudged, err := r.matches(ctx, call, &args)
		if err != nil {
			return belay.Decision{}, fmt.Errorf("rule %q: %w", r.Name, err)
		}
		// A rule that cannot read its field (a name mistyped in the file, a
		// tool that sends the amount as a string) fails closed: a rule that
		// would stop the call applies, one that would let it through does
		// not, so a typo never lets a large refund through.
		if !matched && (!unjudged || r.Decision == belay.Allow) {
			continue
		}
		category := r.Category
		if category == "" {
			category = call.Tool
		}
		reason := r.Reason
		if unjudged {
			why := fmt.Sprintf("the call has no number %q", r.Field)
			if r.Window > 0 {
				why += ", or its total across runs cannot be read"
			}
			reason = strings.TrimSpace(reason + " (" + why + ", so this rule cannot judge it and applies)")
		}
		return belay.Decision{Verdict: r.Decision, Reason: reason, Category: category, SelfApproval: r.SelfApproval}, nil
	}
	switch f.def {
	case DefaultAllow:
		return belay.Decision{Verdict: belay.Allow}, nil
	case DefaultDeny:
		return belay.Decision{Verdict: belay.Deny, Reason: "no rule of " + f.Version() + " allows " + call.Tool, Category: call.Tool}, nil
	case DefaultNeedsApproval:
		return belay.Decision{Verdict: belay.NeedsApproval, Reason: "no rule of " + f.Version() + " covers " + call.Tool, Category: call.Tool}, nil
	}
	return byEffect(call), nil
}

// byEffect is belay.DefaultPolicy without its context and error.
func byEffect(call belay.PolicyCall) belay.Decision {
	switch {
	case call.Effect == belay.Irreversible:
		return belay.Decision{Verdict: belay.NeedsApproval, Reason: call.Tool + " cannot be undone", Category: call.Tool}
	case call.External:
		return belay.Decision{Verdict: belay.NeedsApproval, Reason: call.Tool + " reaches a customer", Category: call.Tool}
	}
	return belay.Decision{Verdict: belay.Allow}
}

// matches reports whether the rule covers call. unjudged reports a call the
// rule covers but for its field, which the call (or, for a run total, an
// earlier effect) does not carry as a number.
func (r *Rule) matches(ctx context.Context, call belay.PolicyCall, args *callArgs) (matched, unjudged bool, err error) {
	if len(r.Tools) > 0 && !slices.Contains(r.Tools, call.Tool) {
		return false, false, nil
	}
	if r.Effect != "" {
		effect := call.Effect
		if effect == "" {
			effect = belay.Read // a tool's default class
		}
		if effect != r.Effect {
			return false, false, nil
		}
	}
	if r.External != nil && call.External != *r.External {
		return false, false, nil
	}
	if r.Field != "" {
		v, ok := args.number(r.Field)
		if ok && r.Over == "run" {
			v, ok = runTotal(r.Field, call, v)
		}
		if ok && r.Window > 0 {
			var err error
			if v, ok, err = r.windowTotal(ctx, call, args, v); err != nil {
				return false, true, err
			}
		}
		if !ok {
			return false, true, nil
		}
		if r.above != nil && v.cmp(*r.above) <= 0 ||
			r.atLeast != nil && v.cmp(*r.atLeast) < 0 ||
			r.below != nil && v.cmp(*r.below) >= 0 {
			return false, false, nil
		}
	}
	return true, false, nil
}

// callArgs decodes a call's arguments once, when a rule first needs them.
type callArgs struct {
	rawArgs json.RawMessage
	decoded bool
	fields  map[string]json.RawMessage
}

// raw returns a top-level argument as compact JSON, so that equal values
// written apart compare equal.
func (a *callArgs) raw(name string) (json.RawMessage, bool) {
	a.decode()
	v, ok := a.fields[name]
	if !ok {
		return nil, false
	}
	var b bytes.Buffer
	if json.Compact(&b, v) != nil {
		return nil, false
	}
	return b.Bytes(), true
}

func (a *callArgs) decode() {
	if !a.decoded {
		a.decoded = true
		if json.Unmarshal(a.rawArgs, &a.fields) != nil {
			a.fields = nil
		}
	}
}

// number returns a top-level argument if it is a JSON number. Arguments
// that are not a JSON object have no fields.
func (a *callArgs) number(name string) (decimal, bool) {
	a.decode()
	raw, ok := a.fields[name]
	if !ok {
		return decimal{}, false
	}
	return parseDecimal(string(raw)) // a string, a bool or null does not parse
}

// String describes the rule on one line:
//
//	large amounts: cents > 5000 -> needs_approval [refund_large]
func (r Rule) String() string {
	var conds []string
	switch len(r.Tools) {
	case 0:
	case 1:
		conds = append(conds, "tool "+r.Tools[0])
	default:
		conds = append(conds, "tool in ["+strings.Join(r.Tools, ", ")+"]")
	}
	if r.Effect != "" {
		conds = append(conds, "effect "+string(r.Effect))
	}
	if r.External != nil {
		if *r.External {
			conds = append(conds, "external")
		} else {
			conds = append(conds, "not external")
		}
	}
	field := r.Field
	switch r.Over {
	case "run":
		field = "total " + r.Field + " in the run"
	case "tenant":
		field = "total " + r.Field + " of the tenant over " + r.Window.String()
	case "user":
		field = "total " + r.Field + " per user over " + r.Window.String()
	case "key":
		field = "total " + r.Field + " per " + r.Key + " over " + r.Window.String()
	}
	for _, c := range []struct{ op, v string }{{">", r.Above}, {">=", r.AtLeast}, {"<", r.Below}} {
		if c.v != "" {
			conds = append(conds, field+" "+c.op+" "+c.v)
		}
	}
	if len(conds) == 0 {
		conds = append(conds, "any call")
	}
	s := r.Name + ": " + strings.Join(conds, " and ") + " -> " + string(r.Decision)
	if r.Category != "" {
		s += " [" + r.Category + "]"
	}
	if r.Reason != r.Name {
		s += " reason " + strconv.Quote(r.Reason)
	}
	return s
}

// computeDigest hashes what the policy decides, not how it is written.
func (f *File) computeDigest() string {
	type rule struct {
		Name     string   `json:"name"`
		Tools    []string `json:"tools,omitempty"`
		Effect   string   `json:"effect,omitempty"`
		External *bool    `json:"external,omitempty"`
		Field    string   `json:"field,omitempty"`
		Over     string   `json:"over,omitempty"`
		Window   string   `json:"window,omitempty"`
		Key      string   `json:"key,omitempty"`
		Above    string   `json:"above,omitempty"`
		AtLeast  string   `json:"at_least,omitempty"`
		Below    string   `json:"below,omitempty"`
		Decision string   `json:"decision"`
		Reason   string   `json:"reason"`
		Category string   `json:"category,omitempty"`
		Self     bool     `json:"self_approval,omitempty"`
	}
	key := func(d *decimal) string {
		if d == nil {
			return ""
		}
		return d.key()
	}
	canon := struct {
		Default Default `json:"default"`
		Rules   []rule  `json:"rules"`
	}{Default: f.def, Rules: []rule{}}
	for _, r := range f.rules {
		tools := slices.Clone(r.Tools)
		slices.Sort(tools)
		canon.Rules = append(canon.Rules, rule{
			Name: r.Name, Tools: slices.Compact(tools), Effect: string(r.Effect), External: r.External,
			Field: r.Field, Over: r.Over, Window: windowKey(r.Window), Key: r.Key, Above: key(r.above), AtLeast: key(r.atLeast), Below: key(r.below),
			Decision: string(r.Decision), Reason: r.Reason, Category: r.Category, Self: r.SelfApproval,
		})
	}
	b, err := json.Marshal(canon)
	if err != nil {
		panic(err) // strings, bools and slices of them always marshal
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6])
}
