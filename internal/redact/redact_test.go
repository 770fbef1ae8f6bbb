package redact

import (
	"encoding/json"
	"testing"

	"github.com/belayrun/belay/store"
)

func TestArgs(t *testing.T) {
	t.Parallel()
	card := store.SensitiveArgs{Fields: []string{"card"}, Declared: []string{"amount", "card"}}
	for _, c := range []struct {
		name string
		s    store.SensitiveArgs
		args string
		want string
	}{
		{"a sensitive field", card, `{"amount":5,"card":"4242"}`, `{"amount":5,"card":"[redacted]"}`},
		{"an object value", card, `{"card":{"n":"4242"}}`, `{"card":"[redacted]"}`},
		{"a field not declared", card, `{"amount":5,"crad":"4242"}`, `{"amount":5,"crad":"[redacted]"}`},
		{"nothing declared", store.SensitiveArgs{Fields: []string{"card"}}, `{"amount":5,"crad":"4242"}`, `{"amount":5,"crad":"4242"}`},
		{"not an object", card, `"{\"card\":4242"`, `"[redacted]"`},
		{"null", card, `null`, `"[redacted]"`},
		{"no arguments", card, ``, ``},
		{"no secret", store.SensitiveArgs{Declared: []string{"amount"}}, `{"x":"4242"}`, `{"x":"4242"}`},
		{"nothing hidden", card, `{"amount":5}`, `{"amount":5}`},
	} {
		if got := Args(c.s, json.RawMessage(c.args)); string(got) != c.want {
			t.Errorf("%s: Args = %s, want %s", c.name, got, c.want)
		}
	}
}

func TestRestore(t *testing.T) {
	t.Parallel()
	orig := json.RawMessage(`{"amount":5,"card":"4242","crad":"1"}`)
	for _, c := range []struct{ edited, original, want string }{
		{`{"amount":6,"card":"[redacted]"}`, string(orig), `{"amount":6,"card":"4242"}`},
		{`{"amount":6,"card":"5555"}`, string(orig), `{"amount":6,"card":"5555"}`},
		{`{"crad":"[redacted]"}`, string(orig), `{"crad":"1"}`},
		{`{"new":"[redacted]"}`, string(orig), `{"new":"[redacted]"}`},
		{`{"card":"[redacted]"}`, `{"card":"[redacted]"}`, `{"card":"[redacted]"}`},
	} {
		if got := Restore(json.RawMessage(c.edited), json.RawMessage(c.original)); string(got) != c.want {
			t.Errorf("Restore(%s, %s) = %s, want %s", c.edited, c.original, got, c.want)
		}
	}
}

func TestStored(t *testing.T) {
	t.Parallel()
	args := json.RawMessage(`{"amount":5,"card":"4242"}`)
	rec := map[string]store.SensitiveArgs{"charge": {Fields: []string{"card"}}}
	if got := string(Stored(rec, "charge", args, "[hidden]")); got != `{"amount":5,"card":"[redacted]"}` {
		t.Errorf("recorded: %s", got)
	}
	if got := string(Stored(rec, "lookup", args, "[hidden]")); got != string(args) {
		t.Errorf("a tool with no secret: %s", got)
	}
	if got := string(Stored(nil, "charge", args, "[hidden]")); got != `{"amount":"[hidden]","card":"[hidden]"}` {
		t.Errorf("nothing recorded: %s", got)
	}
}
