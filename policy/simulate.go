package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/belayrun/belay"
)

// Action is a row of traffic: Count calls of the tool Kind, with the harm
// one wrong call does (what it costs to clean up).
type Action struct {
	Kind     string
	Count    int
	External bool
	// Cents and Bulk are the call's arguments "cents" and "bulk".
	Cents int64
	Bulk  int
	Harm  float64
	// Effect is the tool's effect class; empty means read.
	Effect belay.EffectClass
}

// Row is one policy's outcome over the traffic.
type Row struct {
	Name string
	// Approvals counts the calls paused for a person.
	Approvals int
	// Denied counts the calls refused without asking anyone.
	Denied int
	// HarmLeft is the expected harm of the calls that ran.
	HarmLeft float64
	// HarmStopped is the expected harm of the calls that did not run without
	// a person seeing them: approved or denied.
	HarmStopped float64
	// PerApproval is the harm stopped by approvals per approval; NaN when
	// nothing needs approval.
	PerApproval float64
	// Gated and DeniedKinds list the kinds needing approval and denied, in
	// traffic order.
	Gated, DeniedKinds []string
}

// Report compares a policy with gating nothing and gating everything.
type Report struct {
	Nothing, Everything, Policy Row
}

// Simulate runs every kind of action in traffic past p once, as the call
//
//	{Tool: kind, Effect: effect, External: external, Args: {"bulk": bulk, "cents": cents}}
//
// and weighs the verdicts by count: a call that runs does harm with
// probability pWrong. The policy's row is named "by rule"; rename it before
// Format.
//
// Sums are compensated as Python's sum is (since 3.12), so Format prints
// what a Python version of the same arithmetic prints.
func Simulate(ctx context.Context, traffic []Action, p belay.Policy, pWrong float64) (Report, error) {
	if !(pWrong >= 0 && pWrong <= 1) {
		return Report{}, fmt.Errorf("probability of a wrong action %v is not between 0 and 1", pWrong)
	}
	verdicts := make([]belay.Verdict, len(traffic))
	for i, a := range traffic {
		switch {
		case a.Kind == "":
			return Report{}, fmt.Errorf("action %d has no kind", i)
		case a.Count < 0:
			return Report{}, fmt.Errorf("action %s: negative count %d", a.Kind, a.Count)
		case math.IsNaN(a.Harm) || math.IsInf(a.Harm, 0) || a.Harm < 0:
			return Report{}, fmt.Errorf("action %s: harm %v is not a finite number at least 0", a.Kind, a.Harm)
		}
		effect := a.Effect
		if effect == "" {
			effect = belay.Read
		}
		args, err := json.Marshal(map[string]int64{"cents": a.Cents, "bulk": int64(a.Bulk)})
		if err != nil {
			return Report{}, err
		}
		d, err := p(ctx, belay.PolicyCall{Tool: a.Kind, Effect: effect, External: a.External, Args: args})
		if err != nil {
			return Report{}, fmt.Errorf("policy on %s: %w", a.Kind, err)
		}
		switch d.Verdict {
		case belay.Allow, belay.Deny, belay.NeedsApproval:
		default:
			return Report{}, fmt.Errorf("policy on %s: verdict %q is not one of allow, deny, needs_approval", a.Kind, d.Verdict)
		}
		verdicts[i] = d.Verdict
	}

	var baseline pySum
	for _, a := range traffic {
		baseline.add(float64(a.Count) * pWrong * a.Harm)
	}
	row := func(name string, verdict func(i int) belay.Verdict) Row {
		r := Row{Name: name}
		var left, denied pySum
		for i, a := range traffic {
			switch verdict(i) {
			case belay.NeedsApproval:
				r.Approvals += a.Count
				r.Gated = append(r.Gated, a.Kind)
			case belay.Deny:
				r.Denied += a.Count
				r.DeniedKinds = append(r.DeniedKinds, a.Kind)
				denied.add(float64(a.Count) * pWrong * a.Harm)
			default:
				left.add(float64(a.Count) * pWrong * a.Harm)
			}
		}
		r.HarmLeft = left.total()
		r.HarmStopped = baseline.total() - r.HarmLeft
		r.PerApproval = math.NaN()
		if r.Approvals > 0 {
			r.PerApproval = (r.HarmStopped - denied.total()) / float64(r.Approvals)
		}
		return r
	}
	return Report{
		Nothing:    row("gate nothing", func(int) belay.Verdict { return belay.Allow }),
		Everything: row("gate everything", func(int) belay.Verdict { return belay.NeedsApproval }),
		Policy:     row("by rule", func(i int) belay.Verdict { return verdicts[i] }),
	}, nil
}

// pySum adds floats as Python's built-in sum does since 3.12: Neumaier's
// compensated summation.
type pySum struct{ sum, c float64 }

func (s *pySum) add(x float64) {
	t := s.sum + x
	if math.Abs(s.sum) >= math.Abs(x) {
		s.c += (s.sum - t) + x
	} else {
		s.c += (x - t) + s.sum
	}
	s.sum = t
}

func (s *pySum) total() float64 {
	if s.c != 0 && !math.IsInf(s.c, 0) && !math.IsNaN(s.c) {
		return s.sum + s.c
	}
	return s.sum
}

// Format prints the report as the table Belay's documentation prints, to
// the byte: the columns of
//
//	f"{name:<14}{approvals:>11}{left:>11.0f} {stopped:>13.0f}{per:>14.2f}"
//
// and then the kinds the policy gates, as a Python list. A column of denied
// calls is added only when the policy denies any.
func (r Report) Format() string {
	rows := []Row{r.Nothing, r.Everything, r.Policy}
	withDenied := r.Policy.Denied > 0
	var b strings.Builder
	fmt.Fprintf(&b, "%-14s%11s%12s%14s%14s", "policy", "approvals", "harm left", "harm stopped", "per approval")
	if withDenied {
		fmt.Fprintf(&b, "%8s", "denied")
	}
	b.WriteByte('\n')
	for _, row := range rows {
		fmt.Fprintf(&b, "%-14s%11d%11s %13s%14s", row.Name, row.Approvals,
			pyFixed(row.HarmLeft, 0), pyFixed(row.HarmStopped, 0), pyFixed(row.PerApproval, 2))
		if withDenied {
			fmt.Fprintf(&b, "%8d", row.Denied)
		}
		b.WriteByte('\n')
	}
	by := r.Policy.Name
	if !strings.HasPrefix(by, "by ") {
		by = "by " + by
	}
	fmt.Fprintf(&b, "\ngated %s: %s\n", by, pyList(r.Policy.Gated))
	if withDenied {
		fmt.Fprintf(&b, "denied %s: %s\n", by, pyList(r.Policy.DeniedKinds))
	}
	return b.String()
}

// pyFixed formats as Python's f"{v:.{prec}f}".
func pyFixed(v float64, prec int) string {
	switch {
	case math.IsNaN(v):
		return "nan"
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

// pyList formats as Python's repr of a list of strings.
func pyList(items []string) string {
	quoted := make([]string, len(items))
	for i, s := range items {
		quoted[i] = pyRepr(s)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}

// pyRepr formats as Python's repr of a str.
func pyRepr(s string) string {
	quote := '\''
	if strings.ContainsRune(s, '\'') && !strings.ContainsRune(s, '"') {
		quote = '"'
	}
	var b strings.Builder
	b.WriteRune(quote)
	for _, r := range s {
		switch {
		case r == quote || r == '\\':
			b.WriteRune('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == utf8.RuneError || unicode.IsPrint(r):
			b.WriteRune(r)
		case r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r < 0x10000:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	b.WriteRune(quote)
	return b.String()
}
