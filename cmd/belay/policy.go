package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/belayrun/belay/policy"
)

const (
	policySimulateUsage = "belay policy simulate --traffic FILE --policy FILE [--p-wrong P] [--name NAME]"
	policyCheckUsage    = "belay policy check --policy FILE"
)

func runPolicy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{"policy: simulate or check? (usage: " + policySimulateUsage + "; " + policyCheckUsage + ")"}
	}
	switch args[0] {
	case "simulate":
		return runPolicySimulate(ctx, args[1:], stdout, stderr)
	case "check":
		return runPolicyCheck(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprintln(stdout, "usage: "+policySimulateUsage)
		fmt.Fprintln(stdout, "       "+policyCheckUsage)
		fmt.Fprintln(stdout)
		fmt.Fprintln(stdout, "simulate weighs a policy file against a traffic file (YAML, JSON or CSV rows of")
		fmt.Fprintln(stdout, "kind, count, external, cents, bulk, harm): approvals asked, harm left and harm")
		fmt.Fprintln(stdout, "stopped per approval, next to gating nothing and gating everything.")
		fmt.Fprintln(stdout, "check validates a policy file and prints its version and its rules.")
		return nil
	}
	return usageError{fmt.Sprintf("policy: unknown tool %q (usage: %s; %s)", args[0], policySimulateUsage, policyCheckUsage)}
}

// policyFlags parses args for "belay policy NAME". Flag mistakes come back
// as a usageError carrying the usage line, printed once by main; -h prints
// the flags.
func policyFlags(name, usage string, args []string, stderr io.Writer, define func(fs *flag.FlagSet)) error {
	fs := newFlags("policy "+name, stderr)
	define(fs)
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stderr)
		fmt.Fprintln(stderr, "usage: "+usage)
		fs.PrintDefaults()
		return err
	case err != nil:
		return usageError{fmt.Sprintf("policy %s: %v (usage: %s)", name, err, usage)}
	case fs.NArg() > 0:
		return usageError{fmt.Sprintf("policy %s: unexpected argument %q (usage: %s)", name, fs.Arg(0), usage)}
	}
	return nil
}

func runPolicySimulate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		trafficPath, policyPath, name string
		pWrong                        float64
	)
	err := policyFlags("simulate", policySimulateUsage, args, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&trafficPath, "traffic", "", "traffic file: .yaml, .yml, .json or .csv")
		fs.StringVar(&policyPath, "policy", "", "policy file")
		fs.Float64Var(&pWrong, "p-wrong", 0.03, "how often the agent picks the wrong target, from 0 to 1")
		fs.StringVar(&name, "name", "by rule", "the policy's row in the table")
	})
	if err != nil {
		return err
	}
	switch {
	case trafficPath == "":
		return usageError{"policy simulate: --traffic is required (usage: " + policySimulateUsage + ")"}
	case policyPath == "":
		return usageError{"policy simulate: --policy is required (usage: " + policySimulateUsage + ")"}
	case !(pWrong >= 0 && pWrong <= 1):
		return usageError{fmt.Sprintf("policy simulate: --p-wrong %v is not between 0 and 1 (usage: %s)", pWrong, policySimulateUsage)}
	case name == "":
		return usageError{"policy simulate: --name is empty (usage: " + policySimulateUsage + ")"}
	}
	p, err := policy.Load(policyPath)
	if err != nil {
		return err
	}
	traffic, err := policy.LoadTraffic(trafficPath)
	if err != nil {
		return err
	}
	report, err := policy.Simulate(ctx, traffic, p.Policy(), pWrong)
	if err != nil {
		return err
	}
	report.Policy.Name = name
	_, err = io.WriteString(stdout, report.Format())
	return err
}

func runPolicyCheck(args []string, stdout, stderr io.Writer) error {
	var policyPath string
	err := policyFlags("check", policyCheckUsage, args, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&policyPath, "policy", "", "policy file")
	})
	if err != nil {
		return err
	}
	if policyPath == "" {
		return usageError{"policy check: --policy is required (usage: " + policyCheckUsage + ")"}
	}
	p, err := policy.Load(policyPath)
	if err != nil {
		return err
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
