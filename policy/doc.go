// Package policy reads Belay policies written as data rather than code, and
// weighs a policy against a week of traffic before it is deployed.
//
// # Policy files
//
// A policy file is YAML (or JSON, which YAML includes):
//
//	name: support-default
//	version: 3
//	default: by_effect   # allow | deny | needs_approval | by_effect
//	rules:               # first match wins
//	  - name: deleting an account cannot be undone
//	    tool: delete_account
//	    decision: needs_approval
//	  - name: large amounts
//	    field: cents     # a top-level numeric argument of the call
//	    above: 5000
//	    decision: needs_approval
//	    category: refund_large
//
// A rule matches a call when every condition it sets holds: tool (or a list,
// tools), effect (read, write or irreversible), external, and field compared
// with above, at_least or below. Numbers are compared exactly, as decimals:
// 5000 and 5000.00 are equal. An argument that is missing, or is not a JSON
// number (a string "24000" is not), does not satisfy a comparison. by_effect,
// the default when a file sets none, decides as belay.DefaultPolicy does.
//
// # Totals
//
// over: run compares the field summed over the run's own side effects of
// the tool and this call. Across runs, over a window, a rule totals the
// tenant's recorded effects, read from the store every worker shares:
//
//	rules:
//	  - name: at most 500 USD refunded per customer per day
//	    tool: refund
//	    field: amount_usd
//	    over: user        # tenant | user (the run's user) | key
//	    window: 24h       # or 1d, 7d
//	    above: 500
//	    decision: needs_approval   # or deny
//
// over: key with key: customer_id totals the effects whose customer_id
// argument equals this call's. Effects done, unknown or still pending
// count; failed ones do not. A total that cannot be read fails closed: the
// policy returns an error and the run pauses. A run reads another's effect
// once that effect is begun, so the total holds between runs that call one
// after another; two runs judged at the same instant may each miss the
// other's call.
//
// Parse and Load reject what they do not understand, naming the line and the
// field and saying what is allowed:
//
//	support.yaml:7: rules[1].decision: "maybe" is not one of allow, deny, needs_approval
//
// File.Policy returns the file as a belay.Policy, and File.Version names what
// it decides, so that an approval can be bound to the policy it was asked
// under.
//
// # Simulation
//
// Which calls to gate is usually argued on instinct. Simulate replaces the
// instinct with arithmetic: given the traffic (how many calls of each kind,
// and what a wrong one costs to clean up), it prints how many approvals a
// policy asks for, how much harm it leaves and how much it stops per
// approval, next to gating nothing and gating everything:
//
//	policy          approvals   harm left  harm stopped  per approval
//	gate nothing            0        586             0           nan
//	gate everything       1000          0           586          0.59
//	by rule                95         12           574          6.04
//
//	gated by rule: ['send_email', 'refund_large', 'bulk_close', 'delete_account']
//
// The last column is the one to argue about: gating everything asks a person
// a thousand times, and approvals asked that often stop being read.
package policy
