package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/belayrun/belay/store"
)

// TestIdempotencyKeyQuotedForm sends the key as the IETF draft writes it,
// a Structured Field string, and as a bare token: both name one run.
func TestIdempotencyKeyQuotedForm(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	op := f.key("acme", "ops", store.RoleOperator)
	body := map[string]any{"agent": "support", "user": "u-1", "input": demoInput}

	const uuid = "8e03978e-40d5-43e8-bc93-6894a57f9324"
	first := f.do("POST", "/v1/runs", op, body, "Idempotency-Key", `"`+uuid+`"`)
	if first.status != http.StatusCreated {
		t.Fatalf("the quoted key: %d %s", first.status, first.body)
	}
	var run runView
	first.json(t, &run)
	for _, key := range []string{uuid, `"` + uuid + `"`} {
		res := f.do("POST", "/v1/runs", op, body, "Idempotency-Key", key)
		var same runView
		res.json(t, &same)
		if res.status != http.StatusOK || same.ID != run.ID || res.header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("again with %s: %d, run %s, want %s replayed", key, res.status, same.ID, run.ID)
		}
	}
	stored, err := f.st.GetRun(t.Context(), "acme", run.ID)
	if err != nil || stored.ClientRequestID != uuid {
		t.Errorf("the run's key is %q (%v), want it without quotes", stored.ClientRequestID, err)
	}

	// A quoted key may hold what a bare one cannot; its escapes are undone.
	spaced := f.do("POST", "/v1/runs", op, body, "Idempotency-Key", `"ticket \"T 7\" \\ retry"`)
	if spaced.status != http.StatusCreated {
		t.Fatalf("a quoted key with escapes: %d %s", spaced.status, spaced.body)
	}
	var sp runView
	spaced.json(t, &sp)
	if got, _ := f.st.GetRun(t.Context(), "acme", sp.ID); got.ClientRequestID != `ticket "T 7" \ retry` {
		t.Errorf("the escaped key is stored as %q", got.ClientRequestID)
	}

	for _, key := range []string{
		`"`,                                  // no closing quote
		`"abc`,                               // no closing quote
		`abc"`,                               // a quote in a bare key
		`""`,                                 // empty
		`"a"b"`,                              // an unescaped quote inside
		`"a\"`,                               // the escape takes the closing quote
		`"a\nb"`,                             // only \" and \\ are escapes
		`"a` + "\t" + `b"`,                   // a tab is not printable ASCII
		`"café"`,                             // nor is é
		`"abc";p=1`,                          // parameters are not taken
		`"abc" "def"`,                        // two strings
		`"` + strings.Repeat("k", 201) + `"`, // too long
	} {
		res := f.do("POST", "/v1/runs", op, body, "Idempotency-Key", key)
		if res.status != http.StatusBadRequest || res.code(t) != "idempotency_key_malformed" || !strings.Contains(res.message(t), "quoted") {
			t.Errorf("key %s: %d %s, want 400 idempotency_key_malformed saying what is accepted", key, res.status, res.body)
		}
	}
}

// FuzzParseIdempotencyKey checks that a key taken is 1-200 printable ASCII
// characters, and that quoting it again gives the same key back.
func FuzzParseIdempotencyKey(f *testing.F) {
	for _, s := range []string{`abc`, `"abc"`, `"a\"b\\c"`, `"a\nb"`, `"abc";p=1`, `""`, `"`, `"a b"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		key, err := parseIdempotencyKey(v)
		if err != nil {
			return
		}
		if len(key) < 1 || len(key) > maxIdempotencyKey {
			t.Fatalf("%q: key of %d bytes", v, len(key))
		}
		for i := range len(key) {
			if key[i] < 0x20 || key[i] > 0x7e {
				t.Fatalf("%q: key %q is not printable ASCII", v, key)
			}
		}
		quoted := `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"`
		if again, err := parseIdempotencyKey(quoted); err != nil || again != key {
			t.Fatalf("%q: key %q quoted as %s reads %q, %v", v, key, quoted, again, err)
		}
	})
}
