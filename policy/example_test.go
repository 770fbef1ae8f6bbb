package policy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/policy"
)

func ExampleParse() {
	f, err := policy.Parse("support.yaml", []byte(`
name: support
version: 3
rules:
  - name: refunds above 50 USD need approval
    tool: refund
    field: cents
    above: 5000
    decision: needs_approval
    category: refund_large
`))
	if err != nil {
		log.Fatal(err)
	}
	d := f.Decide(belay.PolicyCall{Tool: "refund", Effect: belay.Write, Args: json.RawMessage(`{"order": "A-4471", "cents": 24000}`)})
	fmt.Println(f.Version(), d.Verdict, d.Category)
	d = f.Decide(belay.PolicyCall{Tool: "refund", Effect: belay.Write, Args: json.RawMessage(`{"order": "A-4471", "cents": 2900}`)})
	fmt.Println(f.Version(), d.Verdict)

	_, err = policy.Parse("support.yaml", []byte("name: support\nrules:\n  - name: r\n    tool: refund\n    decision: maybe\n"))
	fmt.Println(err)
	// Output:
	// support@3 needs_approval refund_large
	// support@3 allow
	// support.yaml:5: rules[0].decision: "maybe" is not one of allow, deny, needs_approval
}

func ExampleSimulate() {
	f, err := policy.Load("testdata/rule.yaml")
	if err != nil {
		log.Fatal(err)
	}
	traffic, err := policy.LoadTraffic("testdata/traffic.yaml")
	if err != nil {
		log.Fatal(err)
	}
	report, err := policy.Simulate(context.Background(), traffic, f.Policy(), 0.03)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(report.Format())
	// Output:
	// policy          approvals   harm left  harm stopped  per approval
	// gate nothing            0        586             0           nan
	// gate everything       1000          0           586          0.59
	// by rule                95         12           574          6.04
	//
	// gated by rule: ['send_email', 'refund_large', 'bulk_close', 'delete_account']
}
