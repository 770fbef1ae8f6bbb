package belay

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// canary is a secret no message, schema or id holds by chance.
const canary = "73519846"

// vaultSchema takes secrets of every shape: a number, a string with a
// length and a pattern, an enum, and an object of its own.
const vaultSchema = `{
	"type": "object",
	"properties": {
		"amount": {"type": "integer"},
		"pin": {"type": "integer"},
		"card_number": {"type": "string", "maxLength": 19, "pattern": "^[0-9-]+$"},
		"brand": {"enum": ["visa", "mastercard"]},
		"holder": {"type": "object", "properties": {"ssn": {"type": "string", "maxLength": 4}}, "additionalProperties": false},
		"tags": {"type": "array", "items": {"type": "string", "maxLength": 3}}
	},
	"required": ["amount"],
	"additionalProperties": false
}`

func vaultTool(t *testing.T) *Tool {
	t.Helper()
	tool := &Tool{Name: "vault", InputSchema: json.RawMessage(vaultSchema),
		Sensitive: []string{"pin", "card_number", "brand", "holder", "tags"},
		Call:      func(context.Context, json.RawMessage) (json.RawMessage, error) { return json.RawMessage(`"ok"`), nil }}
	if err := tool.validate(); err != nil {
		t.Fatal(err)
	}
	return tool
}

// An argument error becomes the call's tool result, stored and shown
// everywhere: for a tool with sensitive arguments it says where and why a
// call does not fit, and never repeats a value, whatever the shape.
func TestArgumentErrorsNeverQuoteSecrets(t *testing.T) {
	t.Parallel()
	tool := vaultTool(t)
	for _, c := range []struct {
		name, args string
		// says are what the error must still tell the model.
		says []string
	}{
		{"wrong type", `{"amount":1,"pin":"` + canary + `"}`, []string{"pin", `want type "integer"`}},
		{"an object for a number", `{"amount":1,"pin":{"v":"` + canary + `"}}`, []string{"pin", `want type "integer"`}},
		{"too long", `{"amount":1,"card_number":"` + canary + `-0000-0000-0000"}`, []string{"card_number", "at most 19 characters"}},
		{"bad pattern", `{"amount":1,"card_number":"` + canary + `x"}`, []string{"card_number", "matching"}},
		{"not in the enum", `{"amount":1,"brand":"` + canary + `"}`, []string{"brand", `["visa","mastercard"]`}},
		{"nested", `{"amount":1,"holder":{"ssn":"` + canary + `"}}`, []string{"holder.ssn", "at most 4 characters"}},
		{"nested, undeclared", `{"amount":1,"holder":{"` + canary + `":"` + canary + `"}}`, []string{"holder", "does not declare"}},
		{"an item", `{"amount":1,"tags":["` + canary + `"]}`, []string{"tags[]", "at most 3 characters"}},
		{"misspelled field", `{"amount":1,"card_numbr":"` + canary + `"}`, []string{"does not declare", `"card_number"`}},
		{"secret as a key", `{"amount":1,"` + canary + `":true}`, []string{"does not declare"}},
		{"missing field", `{"pin":` + canary + `}`, []string{"required", `["amount"]`}},
		{"not an object", `"` + canary + `"`, []string{"the arguments", `want type "object"`}},
		{"a list", `[` + canary + `]`, []string{"the arguments", `want type "object"`}},
		{"not JSON", `{"amount":1,"pin":` + canary + `x`, []string{"not valid JSON", "byte"}},
		{"cut off", `{"amount":1,"card_number":"` + canary, []string{"not valid JSON"}},
		{"a malformed call kept as a string", `"{\"amount\":1,\"pin\":` + canary + `"`, []string{`want type "object"`}},
		{"wrong type, declared field", `{"amount":"x` + canary + `"}`, []string{"amount", `want type "integer"`}},
	} {
		err := tool.checkArgs(json.RawMessage(c.args))
		if err == nil {
			t.Errorf("%s: %s passed the schema", c.name, c.args)
			continue
		}
		msg := err.Error()
		t.Logf("%s: %s", c.name, msg)
		if strings.Contains(msg, canary) {
			t.Errorf("%s: the error quotes the secret: %s", c.name, msg)
		}
		for _, s := range c.says {
			if !strings.Contains(msg, s) {
				t.Errorf("%s: the error does not say %q: %s", c.name, s, msg)
			}
		}
		// The call's trace shows its arguments redacted: no shape of them
		// lets the secret through either.
		// (Keys stay, and amount is no secret.)
		if shown := tool.redact(json.RawMessage(c.args)); strings.Contains(string(shown), canary) &&
			!strings.Contains(c.name, "key") && !strings.Contains(c.name, "undeclared") && !strings.Contains(c.name, "declared field") {
			t.Errorf("%s: the redacted arguments show the secret: %s", c.name, shown)
		}
	}
	if err := tool.checkArgs(json.RawMessage(`{"amount":1,"pin":` + canary + `,"card_number":"4242-4242"}`)); err != nil {
		t.Errorf("a valid call: %v", err)
	}
}

// A tool without sensitive fields keeps the library's message, value and
// all: the model reads what it sent, and nothing in it is secret.
func TestArgumentErrorsOfOtherToolsQuoteTheValue(t *testing.T) {
	t.Parallel()
	tool := vaultTool(t)
	tool.Sensitive = nil
	err := tool.checkArgs(json.RawMessage(`{"amount":1,"pin":"` + canary + `"}`))
	if err == nil || !strings.Contains(err.Error(), canary) {
		t.Errorf("checkArgs = %v, want the library's message", err)
	}
}

// A typed tool's decoding error names the field and the types, not the
// number that did not fit.
func TestDecodeErrorsNeverQuoteTheValue(t *testing.T) {
	t.Parallel()
	tool := NewTool("small", "", Read, func(ctx context.Context, in struct {
		N int8 `json:"n"`
	}) (string, error) {
		return "", nil
	})
	_, err := tool.Call(context.Background(), json.RawMessage(`{"n":`+canary+`}`))
	if err == nil || strings.Contains(err.Error(), canary) || !strings.Contains(err.Error(), "n: a JSON number does not fit Go type int8") {
		t.Errorf("Call = %v", err)
	}
}
