package belay

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

// RedactArgs shows a call's values only by the tool this runtime serves:
// for an agent or a tool it does not know, no value is shown.
func TestRedactArgsHidesWhatItCannotJudge(t *testing.T) {
	t.Parallel()
	d := newCardDesk(t, nil, false)
	args := json.RawMessage(`{"card_number":"` + planted + `","amount":20}`)
	for _, c := range []struct {
		name, agent, tool string
		args              json.RawMessage
		want              string
		serves            bool
	}{
		{"a served tool", "cards", "charge", args, `{"amount":20,"card_number":"[redacted]"}`, true},
		{"an agent not served", "vault", "charge", args,
			`{"amount":"[hidden: agent vault is not served here]","card_number":"[hidden: agent vault is not served here]"}`, false},
		{"a tool not served", "cards", "refund", args,
			`{"amount":"[hidden: agent cards has no tool refund here]","card_number":"[hidden: agent cards has no tool refund here]"}`, false},
		{"arguments that are no object", "vault", "charge", json.RawMessage(`"` + planted + `"`),
			`"[hidden: agent vault is not served here]"`, false},
		{"no arguments", "vault", "charge", nil, ``, false},
	} {
		if got := d.rt.RedactArgs(c.agent, c.tool, c.args); string(got) != c.want {
			t.Errorf("%s: RedactArgs = %s, want %s", c.name, got, c.want)
		}
		if got := d.rt.Serves(c.agent, c.tool); got != c.serves {
			t.Errorf("%s: Serves = %v", c.name, got)
		}
	}
}

// A run records its tools' secrets when it starts, so a reader without the
// agent's code (the CLI, a server of other agents) redacts them; a run that
// recorded nothing shows no value to such a reader.
func TestRunsRecordTheirSecrets(t *testing.T) {
	t.Parallel()
	d := newCardDesk(t, nil, false)
	run, _, err := d.rt.StartRun(context.Background(), RunRequest{Agent: "cards", Tenant: "acme", User: "ada", Input: "charge me"})
	if err != nil {
		t.Fatal(err)
	}
	run, err = d.st.GetRun(context.Background(), "acme", run.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]store.SensitiveArgs{"charge": {Fields: []string{"card_number"}, Declared: []string{"amount", "card_number"}}}
	if !reflect.DeepEqual(run.Sensitive, want) {
		t.Fatalf("the run records %+v, want %+v", run.Sensitive, want)
	}
	args := json.RawMessage(`{"card_number":"` + planted + `","amount":20}`)
	misspelled := json.RawMessage(`{"card_nr":"` + planted + `","amount":20}`)
	other, err := New(Config{Store: d.st, Agents: []*Agent{{Name: "vault", Model: scripted.New()}}})
	if err != nil {
		t.Fatal(err)
	}
	legacy := run
	legacy.Sensitive = nil
	for _, c := range []struct {
		name string
		got  json.RawMessage
		want string
	}{
		{"stored", RedactStoredArgs(run, "charge", args), `{"amount":20,"card_number":"[redacted]"}`},
		{"stored, misspelled", RedactStoredArgs(run, "charge", misspelled), `{"amount":20,"card_nr":"[redacted]"}`},
		{"stored, a tool without secrets", RedactStoredArgs(run, "lookup", args), string(args)},
		{"a runtime that serves the agent", d.rt.RedactRunArgs(run, "charge", args), `{"amount":20,"card_number":"[redacted]"}`},
		{"a runtime that does not", other.RedactRunArgs(run, "charge", args), `{"amount":20,"card_number":"[redacted]"}`},
		{"stored, nothing recorded", RedactStoredArgs(legacy, "charge", args),
			`{"amount":"[hidden: this run does not record which arguments are secret]","card_number":"[hidden: this run does not record which arguments are secret]"}`},
		{"nothing recorded, the agent served", d.rt.RedactRunArgs(legacy, "charge", args), `{"amount":20,"card_number":"[redacted]"}`},
		{"nothing recorded, the agent not served", other.RedactRunArgs(legacy, "charge", args),
			`{"amount":"[hidden: agent cards is not served here]","card_number":"[hidden: agent cards is not served here]"}`},
	} {
		if string(c.got) != c.want {
			t.Errorf("%s: %s, want %s", c.name, c.got, c.want)
		}
	}
	blocks := RedactStoredBlocks(run, []model.Block{model.ToolUseBlock("toolu_1", "charge", args), model.TextBlock(planted)})
	if string(blocks[0].Input) != `{"amount":20,"card_number":"[redacted]"}` || blocks[1].Text != planted {
		t.Errorf("RedactStoredBlocks = %+v", blocks)
	}
}

// An edit decided without the agent's code (the CLI) is traced redacted by
// what the run recorded.
func TestEditWithoutTheAgentIsTracedRedacted(t *testing.T) {
	t.Parallel()
	d := newCardDesk(t, nil, true)
	ctx := context.Background()
	run := d.run(t, "")
	pending, err := d.st.Approvals(ctx, store.ListApprovalsParams{RunID: run.ID, Status: store.ApprovalPending})
	if err != nil || len(pending) != 1 {
		t.Fatalf("pending approvals %v, %v", pending, err)
	}
	const typed = "5555-5555-5555-4444"
	if _, err := DecideApproval(ctx, d.st, "", pending[0].ID, ApprovalDecision{Verdict: "edit", By: "human:maya",
		EditedArgs: json.RawMessage(`{"card_number":"` + typed + `","amount":15}`)}); err != nil {
		t.Fatal(err)
	}
	evs, err := d.st.Events(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	decided := 0
	for _, e := range evs {
		if e.Type == "approval_decided" {
			decided++
			if strings.Contains(string(e.Data), typed) || !strings.Contains(string(e.Data), Redacted) {
				t.Errorf("approval_decided shows %s", e.Data)
			}
		}
	}
	if decided != 1 {
		t.Errorf("%d approval_decided events", decided)
	}
}
