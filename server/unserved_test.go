package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/examples/support"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

// serving returns a copy of f whose requests go to another server over f's
// store, whose runtime serves agents: a second deployment of the same
// database with other agents, or this one after an upgrade. The copy's
// runtime does not serve f's runs; drain f, not the copy.
func (f *fixture) serving(agents ...*belay.Agent) *fixture {
	f.t.Helper()
	rt, err := belay.New(belay.Config{Store: f.st, Agents: agents, HumanApproval: true})
	if err != nil {
		f.t.Fatal(err)
	}
	srv, err := New(Config{Runtime: rt, Store: f.st})
	if err != nil {
		f.t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	f.t.Cleanup(hs.Close)
	g := *f
	g.rt, g.srv, g.http = rt, srv, hs
	return &g
}

// vaultWithoutSave is the vault agent after an upgrade that dropped its
// save_credential tool.
func vaultWithoutSave() *belay.Agent {
	rotate := belay.NewTool("rotate_credential", "rotate a customer's API token", belay.Irreversible,
		func(ctx context.Context, in struct {
			Customer string `json:"customer"`
		}) (string, error) {
			return "rotated for " + in.Customer, nil
		})
	a := vaultAgent()
	a.Version, a.Tools = "v2", []belay.Tool{rotate}
	return a
}

// A server that does not serve a call's agent or tool redacts the call by
// what its run recorded when it started, in every view: the secret is
// hidden, the rest shown. (A run that recorded nothing has every value
// hidden there: TestRunsRecordTheirSecrets.) An edit, which the tool
// would have to check, is refused.
func TestArgumentsRedactedWhereTheToolIsNotServed(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, f *fixture) {
		op := f.key("acme", "ops", store.RoleOperator)
		approver := f.key("acme", "maya", store.RoleApprover)
		stored := f.start(op, "vault-1", "vault", "ada", "store my token")
		f.drain()
		f.approveRun(approver, stored.ID)
		refund, _ := f.approvalFlow(op, approver)
		waiting := f.start(op, "vault-2", "vault", "ada", "store my new token")
		f.drain()
		var vaultCard, refundCard approvalView
		for _, a := range f.pending(approver) {
			switch a.RunID {
			case waiting.ID:
				vaultCard = a
			case refund.ID:
				refundCard = a
			}
		}
		if vaultCard.ID == "" || refundCard.ID == "" {
			t.Fatalf("pending approvals %+v, want the vault's and the refund's", f.pending(approver))
		}

		for _, c := range []struct {
			name   string
			server *fixture
		}{
			{"agent not served", f.serving(support.NewAgent(f.world, scripted.Func(support.Script())))},
			{"tool not served", f.serving(support.NewAgent(f.world, scripted.Func(support.Script())), vaultWithoutSave())},
		} {
			t.Run(c.name, func(t *testing.T) {
				g := c.server
				console := g.signIn(approver)
				var seen []string
				for _, p := range []string{"/v1/approvals?status=pending", "/v1/approvals/" + vaultCard.ID,
					"/v1/runs/" + stored.ID + "/effects", "/v1/runs/" + stored.ID + "/messages", "/v1/runs/" + stored.ID + "/trace",
					"/v1/runs/" + waiting.ID + "/messages"} {
					key := op
					if strings.HasPrefix(p, "/v1/approvals") {
						key = approver
					}
					res := g.do("GET", p, key, nil)
					if res.status != http.StatusOK {
						t.Fatalf("GET %s: %d %s", p, res.status, res.body)
					}
					seen = append(seen, p+" "+string(res.body))
				}
				for _, p := range []string{"/console/", "/console/approvals/" + vaultCard.ID, "/console/approvals/" + refundCard.ID,
					"/console/runs/" + stored.ID, "/console/runs/" + waiting.ID} {
					status, body := get(t, console, g.http.URL+p)
					if status != http.StatusOK {
						t.Fatalf("GET %s: %d", p, status)
					}
					seen = append(seen, p+" "+body)
				}
				hidden := 0
				for _, s := range seen {
					if strings.Contains(s, secret) {
						t.Errorf("the secret is shown in %s", clipBody([]byte(s)))
					}
					if strings.Contains(s, "hidden:") {
						t.Errorf("a recorded run's values are hidden in %s", clipBody([]byte(s)))
					}
					if strings.Contains(s, belay.Redacted) {
						hidden++
					}
				}
				if hidden < 10 {
					t.Errorf("only %d of %d views show the token redacted: the test did not look where the secret would be", hidden, len(seen))
				}

				// The refund's card: the customer's stored token is listed
				// redacted, and the refund, whose tool this server serves, is
				// shown as before.
				_, body := get(t, console, g.http.URL+"/console/approvals/"+refundCard.ID)
				_, history, ok := strings.Cut(body, "Earlier for this customer")
				if !ok {
					t.Fatalf("the refund's card lacks the customer's history:\n%s", body)
				}
				history, _, _ = strings.Cut(history, "</ul>")
				if !containsAll(history, "save_credential", "Customer: ada", "Token: "+belay.Redacted, "/console/runs/"+stored.ID) {
					t.Errorf("the history does not list the stored token redacted:\n%s", history)
				}
				if !containsAll(body, "Charge id", "CH-2", `value="edit"`) {
					t.Errorf("the refund's card on a server that serves its tool changed:\n%s", body)
				}

				// An edit cannot be checked against a tool not served here: it
				// is refused, approving and rejecting are not.
				_, body = get(t, console, g.http.URL+"/console/approvals/"+vaultCard.ID)
				if strings.Contains(body, `value="edit"`) {
					t.Errorf("the vault's card offers an edit on a server that does not serve its tool")
				}
				res := g.do("POST", "/v1/approvals/"+vaultCard.ID+"/decision", approver, map[string]any{"decision": "edit",
					"binding": vaultCard.Binding, "arguments": map[string]any{"customer": "ada", "token": belay.Redacted}})
				if res.status != http.StatusUnprocessableEntity || res.code(t) != "invalid_arguments" {
					t.Errorf("an edit where the tool is not served: %d %s", res.status, res.body)
				}
				status, _, body := post(t, console, g.http.URL+"/console/approvals/"+vaultCard.ID+"/decision", url.Values{
					"decision": {"edit"}, "binding": {vaultCard.Binding}, "arguments": {`{"customer": "ada", "token": "x"}`}})
				if status != http.StatusOK || !strings.Contains(body, "approve or reject it here") {
					t.Errorf("an edit from the console where the tool is not served: %d\n%s", status, body)
				}
				if got := f.pending(approver); len(got) != 2 {
					t.Errorf("refused edits decided: %+v", got)
				}
			})
		}
	})
}
