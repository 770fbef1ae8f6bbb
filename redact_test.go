package belay

import (
	"encoding/json"
	"testing"
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
