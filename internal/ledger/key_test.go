package ledger

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestCanonicalEqualForSemanticallyEqualJSON(t *testing.T) {
	groups := [][]string{
		{`{"charge_id":"CH-2","amount":29}`, `{ "amount": 29.00, "charge_id": "CH-2" }`, `{"amount":2.9e1,"charge_id":"CH-2"}`, `{"amount":290e-1,"charge_id":"CH-2"}`},
		{`[1, {"b":true,"a":null}]`, `[1.0,{"a":null,"b":true}]`},
		{`"caf\u00e9"`, `"café"`},
		{`0`, `-0`, `0.000`, `0e10`},
	}
	for _, g := range groups {
		want, err := Canonical(json.RawMessage(g[0]), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range g[1:] {
			got, err := Canonical(json.RawMessage(in), nil)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Errorf("Canonical(%s) = %s, want %s (as for %s)", in, got, want, g[0])
			}
		}
	}
}

func TestCanonicalKeepsDifferencesThatMatter(t *testing.T) {
	pairs := [][2]string{
		{`{"amount":29}`, `{"amount":29.01}`},
		{`{"amount":0.1}`, `{"amount":0.10000000000000001}`},
		{`{"amount":12345678901234567890}`, `{"amount":12345678901234567891}`},
		{`{"charge_id":"CH-2"}`, `{"charge_id":"CH-3"}`},
		{`{"a":"1"}`, `{"a":1}`},
		{`[1,2]`, `[2,1]`},
		{`{"a":{"b":1}}`, `{"a":"{\"b\":1}"}`},
	}
	for _, p := range pairs {
		a, err1 := Canonical(json.RawMessage(p[0]), nil)
		b, err2 := Canonical(json.RawMessage(p[1]), nil)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if string(a) == string(b) {
			t.Errorf("%s and %s have the same canonical form %s", p[0], p[1], a)
		}
	}
}

func TestKeyFieldsSelectTheIntent(t *testing.T) {
	fields := []string{"charge_id", "amount"}
	a, _ := Canonical(json.RawMessage(`{"charge_id":"CH-2","amount":29,"reason":"duplicate"}`), fields)
	b, _ := Canonical(json.RawMessage(`{"reason":"asked twice","amount":29.0,"charge_id":"CH-2"}`), fields)
	if Key("run-77", "refund", a) != Key("run-77", "refund", b) {
		t.Errorf("same intent, different keys: %s vs %s", a, b)
	}
	if Key("run-77", "refund", a) == Key("run-78", "refund", a) {
		t.Error("two runs share a key")
	}
	if _, err := Canonical(json.RawMessage(`[1]`), fields); err == nil {
		t.Error("key fields of a non-object accepted")
	}
	if _, err := Canonical(json.RawMessage(`{"a":1} {"b":2}`), nil); err == nil {
		t.Error("trailing data accepted")
	}
}

// FuzzCanonical: re-encoding arguments never changes their key, and
// canonical forms are fixed points; arguments with different canonical forms
// never share a key.
func FuzzCanonical(f *testing.F) {
	f.Add(`{"charge_id":"CH-2","amount":29.00}`, `{"amount":29,"charge_id":"CH-2"}`)
	f.Add(`{"a":[1,2,{"x":1e3}]}`, `{"a":[1,2,{"x":1000}]}`)
	f.Add(`{"n":0.1}`, `{"n":0.2}`)
	f.Fuzz(func(t *testing.T, a, b string) {
		ca, err := Canonical(json.RawMessage(a), nil)
		if err != nil {
			return
		}
		again, err := Canonical(ca, nil)
		if err != nil || string(again) != string(ca) {
			t.Fatalf("canonical form of %s is not stable: %s then %s (%v)", a, ca, again, err)
		}
		// Re-encode through encoding/json (reorders keys, changes number
		// spelling): semantically equal, so the key must not change.
		var v any
		if err := json.Unmarshal([]byte(a), &v); err == nil {
			if re, err := json.MarshalIndent(v, "", "  "); err == nil {
				cre, err := Canonical(re, nil)
				if err == nil && !floatLossy(ca) && string(cre) != string(ca) {
					t.Fatalf("%s re-encoded as %s: canonical %s vs %s", a, re, ca, cre)
				}
			}
		}
		cb, err := Canonical(json.RawMessage(b), nil)
		if err != nil {
			return
		}
		if (string(ca) == string(cb)) != (Key("r", "t", ca) == Key("r", "t", cb)) {
			t.Fatalf("keys disagree with canonical forms for %s and %s", ca, cb)
		}
	})
}

// floatLossy reports whether decoding into float64 (as encoding/json does)
// could change a number in s: then the re-encoded value is genuinely
// different and may canonicalise differently.
func floatLossy(s []byte) bool {
	var v any
	dec := json.NewDecoder(bytesReader(s))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return true
	}
	return anyLossy(v)
}

func anyLossy(v any) bool {
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return true
		}
		back, _ := Canonical(json.RawMessage(mustJSON(f)), nil)
		orig, _ := Canonical(json.RawMessage(x.String()), nil)
		return string(back) != string(orig)
	case []any:
		for _, e := range x {
			if anyLossy(e) {
				return true
			}
		}
	case map[string]any:
		for _, e := range x {
			if anyLossy(e) {
				return true
			}
		}
	}
	return false
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

func TestCanonicalRefusesAbsurdExponents(t *testing.T) {
	if _, err := Canonical(json.RawMessage(`{"amount":1e999999999}`), nil); err == nil {
		t.Error("an exponent that would exhaust memory was accepted")
	}
}
