package server

import (
	"context"
	"net/http"
	"testing"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/store"
)

// Approval statistics keep people's decisions apart from a policy's: the
// API and the console report the demo's auto-approval beside a person's
// approval, not as a second person's.
func TestApprovalStatsSplitPeopleFromPolicies(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, f *fixture) {
		op := f.key("acme", "ops", store.RoleOperator)
		approver := f.key("acme", "maya", store.RoleApprover)
		f.start(op, "T-1001", "support", "ada", demoInput)
		f.start(op, "T-1002", "support", "bob", demoInput)
		f.drain()
		pending := f.pending(approver)
		if len(pending) != 2 {
			t.Fatalf("%d pending approvals, want the two refunds'", len(pending))
		}
		res := f.do("POST", "/v1/approvals/"+pending[0].ID+"/decision", approver, map[string]any{"decision": "approve", "binding": pending[0].Binding})
		if res.status != http.StatusOK {
			t.Fatalf("approve: %d %s", res.status, res.body)
		}
		if _, err := f.rt.Decide(context.Background(), "acme", pending[1].ID, belay.ApprovalDecision{Verdict: "approve", By: "policy:demo-auto"}); err != nil {
			t.Fatal(err)
		}

		type deciders struct {
			Decided      int            `json:"decided"`
			Approved     int            `json:"approved"`
			ApprovalRate float64        `json:"approval_rate"`
			By           map[string]int `json:"by"`
		}
		var stats struct {
			Categories []struct {
				Category string   `json:"category"`
				Decided  int      `json:"decided"`
				Approved int      `json:"approved"`
				People   deciders `json:"people"`
				Policy   deciders `json:"policy"`
			} `json:"categories"`
		}
		f.do("GET", "/v1/stats/approvals", approver, nil).json(t, &stats)
		if len(stats.Categories) != 1 {
			t.Fatalf("stats %+v, want one category", stats)
		}
		c := stats.Categories[0]
		if c.Decided != 2 || c.Approved != 2 {
			t.Errorf("%s: %d decided, %d approved; want both decisions counted as before", c.Category, c.Decided, c.Approved)
		}
		if p := c.People; p.Decided != 1 || p.Approved != 1 || p.ApprovalRate != 1 || len(p.By) != 0 {
			t.Errorf("people's decisions %+v, want maya's approval alone", p)
		}
		if p := c.Policy; p.Decided != 1 || p.Approved != 1 || p.By["policy:demo-auto"] != 1 || len(p.By) != 1 {
			t.Errorf("policies' decisions %+v, want the auto-approval, named", p)
		}

		_, body := get(t, f.signIn(approver), f.http.URL+"/console/stats")
		if !containsAll(body, "<svg", `class="seg-policy"`, "policy:demo-auto", "by people") {
			t.Errorf("the stats page does not show the policy's decision apart:\n%s", body)
		}
	})
}
