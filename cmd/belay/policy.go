package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/belayrun/belay/policy"
)

const policyUsage = `usage: belay policy simulate --traffic FILE --policy FILE [--p-wrong P] [--name NAME]
       belay policy simulate --from-store [--since AGE] [--harm FILE] --policy FILE [--db PATH | --database-url URL]
       belay policy check --policy FILE

simulate weighs a policy file against a traffic file (YAML, JSON or CSV rows of
kind, count, external, cents, bulk, harm): approvals asked, harm left and harm
stopped per approval, next to gating nothing and gating everything.
check validates a policy file and prints its version and its rules.`

var policyVerbUsage = map[string]string{
	"simulate": `usage: belay policy simulate --traffic FILE --policy FILE [--p-wrong P] [--name NAME]
       belay policy simulate --from-store [--since AGE] [--harm FILE] --policy FILE [--db PATH | --database-url URL]

Weighs the policy file against the traffic file (YAML, JSON or CSV rows of kind,
count, external, cents, bulk, harm): approvals asked, harm left and harm stopped
per approval, next to gating nothing and gating everything.
With --from-store the traffic is the tool calls the store's runs recorded (created
within --since), counted per tool and arguments cents and bulk; --harm is a traffic
file whose counts are not read, giving each kind's harm and external flag (a kind
it does not list does no harm).`,
	"check": `usage: belay policy check --policy FILE

Validates a policy file and prints its version and its rules, in the order
they are tried.`,
}

func runPolicy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	verb, rest, err := splitVerb("policy", policyUsage, []string{"simulate", "check"}, args, stdout)
	if err != nil {
		return err
	}
	fs := newFlags("policy "+verb, policyVerbUsage[verb], stdout)
	if verb == "check" {
		return runPolicyCheck(fs, rest, stdout)
	}
	return runPolicySimulate(ctx, fs, rest, stdout)
}

func runPolicySimulate(ctx context.Context, fs *commandFlags, args []string, stdout io.Writer) error {
	trafficPath := fs.String("traffic", "", "traffic file: .yaml, .yml, .json or .csv")
	fromStore := fs.Bool("from-store", false, "weigh the tool calls the store's runs recorded instead of a traffic file")
	since := fs.String("since", "", "with --from-store: only runs created this recently: 7d, 12h (default: all)")
	harmPath := fs.String("harm", "", "with --from-store: a traffic file giving each kind's harm and external flag; its counts are not read")
	db := dbFlag(fs)
	policyPath := fs.String("policy", "", "policy file")
	pWrong := fs.Float64("p-wrong", 0.03, "how often the agent picks the wrong target, from 0 to 1")
	name := fs.String("name", "by rule", "the policy's row in the table")
	asJSON := jsonFlag(fs, "one object per row of the table")
	if err := fs.parseNone(args); err != nil {
		return err
	}
	switch {
	case *fromStore && *trafficPath != "":
		return usageError{"policy simulate: --traffic or --from-store, not both (" + fs.usageLine() + ")"}
	case !*fromStore && (*since != "" || *harmPath != ""):
		return usageError{"policy simulate: --since and --harm go with --from-store (" + fs.usageLine() + ")"}
	case *trafficPath == "" && !*fromStore:
		return usageError{"policy simulate: --traffic FILE or --from-store is required (" + fs.usageLine() + ")"}
	case *policyPath == "":
		return usageError{"policy simulate: --policy is required (" + fs.usageLine() + ")"}
	case !(*pWrong >= 0 && *pWrong <= 1):
		return usageError{fmt.Sprintf("policy simulate: --p-wrong %v is not between 0 and 1 (%s)", *pWrong, fs.usageLine())}
	case *name == "":
		return usageError{"policy simulate: --name is empty (" + fs.usageLine() + ")"}
	}
	p, err := policy.Load(*policyPath)
	if err != nil {
		return err
	}
	var traffic []policy.Action
	if *fromStore {
		traffic, err = trafficFromStore(ctx, db, *since, *harmPath)
	} else {
		traffic, err = policy.LoadTraffic(*trafficPath)
	}
	if err != nil {
		return err
	}
	report, err := policy.Simulate(ctx, traffic, p.Policy(), *pWrong)
	if err != nil {
		return err
	}
	report.Policy.Name = *name
	if *asJSON {
		return writeJSONLines(stdout, []policyRowJSON{
			newPolicyRowJSON("nothing", report.Nothing), newPolicyRowJSON("everything", report.Everything),
			newPolicyRowJSON("policy", report.Policy)})
	}
	_, err = io.WriteString(stdout, report.Format())
	return err
}

func runPolicyCheck(fs *commandFlags, args []string, stdout io.Writer) error {
	policyPath := fs.String("policy", "", "policy file")
	asJSON := jsonFlag(fs, "the policy and its rules, one object")
	if err := fs.parseNone(args); err != nil {
		return err
	}
	if *policyPath == "" {
		return usageError{"policy check: --policy is required (" + fs.usageLine() + ")"}
	}
	p, err := policy.Load(*policyPath)
	if err != nil {
		return err
	}
	if *asJSON {
		out := policyJSON{Version: p.Version(), Digest: p.Digest(), Default: string(p.Default()), Rules: []policyRuleJSON{}}
		for _, r := range p.Rules() {
			out.Rules = append(out.Rules, policyRuleJSON{Name: r.Name, Line: r.Line, Rule: r.String(),
				Decision: string(r.Decision), Reason: r.Reason, Category: r.Category})
		}
		return writeJSON(stdout, out)
	}
	fmt.Fprintln(stdout, p.Version())
	for i, r := range p.Rules() {
		fmt.Fprintf(stdout, "%d. %s (line %d)\n", i+1, r, r.Line)
	}
	otherwise := string(p.Default())
	if p.Default() == policy.DefaultByEffect {
		otherwise += " (irreversible or external -> needs_approval, else allow)"
	}
	_, err = fmt.Fprintln(stdout, "otherwise: "+otherwise)
	return err
}

// policyJSON is what policy check --json prints.
type policyJSON struct {
	Version string           `json:"version"`
	Digest  string           `json:"digest"`
	Default string           `json:"default"`
	Rules   []policyRuleJSON `json:"rules"`
}

type policyRuleJSON struct {
	Name string `json:"name"`
	Line int    `json:"line"`
	// Rule is the rule as policy check prints it.
	Rule     string `json:"rule"`
	Decision string `json:"decision"`
	Reason   string `json:"reason"`
	Category string `json:"category"`
}

// policyRowJSON is a row of policy simulate's table. PerApproval is null
// when nothing needs approval.
type policyRowJSON struct {
	// Row is nothing, everything or policy: gating nothing, gating
	// everything, or the policy file.
	Row         string   `json:"row"`
	Name        string   `json:"name"`
	Approvals   int      `json:"approvals"`
	Denied      int      `json:"denied"`
	HarmLeft    float64  `json:"harm_left"`
	HarmStopped float64  `json:"harm_stopped"`
	PerApproval *float64 `json:"per_approval"`
	Gated       []string `json:"gated"`
	DeniedKinds []string `json:"denied_kinds"`
}

func newPolicyRowJSON(row string, r policy.Row) policyRowJSON {
	out := policyRowJSON{Row: row, Name: r.Name, Approvals: r.Approvals, Denied: r.Denied,
		HarmLeft: r.HarmLeft, HarmStopped: r.HarmStopped, Gated: r.Gated, DeniedKinds: r.DeniedKinds}
	if !math.IsNaN(r.PerApproval) && !math.IsInf(r.PerApproval, 0) {
		out.PerApproval = &r.PerApproval
	}
	if out.Gated == nil {
		out.Gated = []string{}
	}
	if out.DeniedKinds == nil {
		out.DeniedKinds = []string{}
	}
	return out
}

// trafficFromStore reads the traffic the store's runs recorded, with each
// kind's harm from harmPath.
func trafficFromStore(ctx context.Context, db *storeTarget, since, harmPath string) ([]policy.Action, error) {
	var from time.Time
	if since != "" {
		age, err := parseAge(since)
		if err != nil {
			return nil, usageError{"policy simulate: --since: " + err.Error()}
		}
		from = time.Now().Add(-age)
	}
	var kinds []policy.Action
	if harmPath != "" {
		var err error
		if kinds, err = policy.LoadTraffic(harmPath); err != nil {
			return nil, err
		}
	}
	st, err := db.openExisting(ctx)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	traffic, err := policy.TrafficFromStore(ctx, st, from, kinds)
	if err != nil {
		return nil, err
	}
	if len(traffic) == 0 {
		return nil, fmt.Errorf("policy simulate: the runs of %s record no tool call%s; run some first, or weigh a traffic file with --traffic",
			db.Name(), map[bool]string{true: " in the last " + since, false: ""}[since != ""])
	}
	return traffic, nil
}
