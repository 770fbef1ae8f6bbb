package support

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/belayrun/belay"
)

func toolNamed(t *testing.T, w *World, name string) belay.Tool {
	t.Helper()
	for _, tool := range Tools(w) {
		if tool.Name == name {
			return tool
		}
	}
	t.Fatalf("no tool %q", name)
	return belay.Tool{}
}

func TestToolDefinitions(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	for _, tc := range []struct {
		name      string
		effect    belay.EffectClass
		keyFields string
		honorsKey bool
		reconcile bool
	}{
		{"search_kb", belay.Read, "", false, false},
		{"read_article", belay.Read, "", false, false},
		{"get_account", belay.Read, "", false, false},
		{"get_invoice", belay.Read, "", false, false},
		{"issue_refund", belay.Irreversible, "charge_id,amount_usd", false, true},
		{"add_internal_note", belay.Write, "", false, true},
		{"reply", belay.Write, "", true, false},
	} {
		tool := toolNamed(t, w, tc.name)
		if tool.Effect != tc.effect || strings.Join(tool.KeyFields, ",") != tc.keyFields ||
			tool.HonorsKey != tc.honorsKey || (tool.Reconcile != nil) != tc.reconcile {
			t.Errorf("%s: effect %s, key fields %v, honors key %v, reconcile %v; want %s, %s, %v, %v",
				tc.name, tool.Effect, tool.KeyFields, tool.HonorsKey, tool.Reconcile != nil,
				tc.effect, tc.keyFields, tc.honorsKey, tc.reconcile)
		}
	}
}

// The runtime checks arguments against these schemas before a tool runs;
// what fails here comes back to the model as an error to fix.
func TestToolSchemas(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	for _, tc := range []struct {
		tool, args string
		valid      bool
	}{
		{"search_kb", `{"query":"charged twice"}`, true},
		{"search_kb", `{}`, false},
		{"read_article", `{"id":14}`, false},
		{"get_invoice", `{"invoice_id":"INV-2026-004512"}`, true},
		{"issue_refund", `{"invoice_id":"INV-2026-004512","charge_id":"CH-2","amount_usd":288.00,"reason":"duplicate"}`, true},
		{"issue_refund", `{"invoice_id":"INV-2026-004512","charge_id":"CH-2","amount_usd":288,"reason":"duplicate"}`, true},
		{"issue_refund", `{"invoice_id":"INV-2026-004512","amount_usd":288.00,"reason":"duplicate"}`, false},
		{"issue_refund", `{"invoice_id":"INV-2026-004512","charge_id":"CH-2","amount_usd":"288.00","reason":"duplicate"}`, false},
		{"issue_refund", `{"invoice_id":"INV-2026-004512","charge_id":"CH-2","amount_usd":288.00,"reason":"duplicate","currency":"USD"}`, false},
		{"add_internal_note", `{"ticket_id":"T-1001","text":"why"}`, true},
		{"reply", `{"ticket_id":"T-1001","to":"ada@example.com","subject":"s"}`, false},
	} {
		tool := toolNamed(t, w, tc.tool)
		var s jsonschema.Schema
		if err := json.Unmarshal(tool.InputSchema, &s); err != nil {
			t.Fatal(err)
		}
		resolved, err := s.Resolve(nil)
		if err != nil {
			t.Fatal(err)
		}
		var args any
		if err := json.Unmarshal([]byte(tc.args), &args); err != nil {
			t.Fatal(err)
		}
		if err := resolved.Validate(args); (err == nil) != tc.valid {
			t.Errorf("%s %s: validation error %v, want valid %v", tc.tool, tc.args, err, tc.valid)
		}
	}
}

func TestDollarsConvertExactly(t *testing.T) {
	t.Parallel()
	check := func(cents int64) {
		text := formatCents(cents)
		var d dollars
		if err := json.Unmarshal([]byte(text), &d); err != nil {
			t.Fatal(err)
		}
		got, err := d.cents()
		if err != nil || got != cents {
			t.Fatalf("%s: cents() = %d, %v; want %d", text, got, err, cents)
		}
		if out, _ := json.Marshal(dollarsOf(cents)); string(out) != text {
			t.Fatalf("dollarsOf(%d) encodes as %s, want %s", cents, out, text)
		}
	}
	for c := range int64(10_000) {
		check(c)
	}
	for c := int64(10_000); c < 100_000_000; c += 9_973 {
		check(c)
	}
	for c := int64(maxCents); c > 0; c /= 3 {
		check(c)
	}

	for _, bad := range []string{"288.001", "0.005", "1e12", "-1e12"} {
		var d dollars
		_ = json.Unmarshal([]byte(bad), &d)
		if c, err := d.cents(); err == nil {
			t.Errorf("%s: cents() = %d, want an error", bad, c)
		}
	}
}

func callTool(t *testing.T, tool belay.Tool, args string) (string, error) {
	t.Helper()
	out, err := tool.Call(t.Context(), json.RawMessage(args))
	return string(out), err
}

func TestIssueRefund(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	refund := toolNamed(t, w, "issue_refund")
	args := `{"invoice_id":"INV-2026-004512","charge_id":"CH-2","amount_usd":288.00,"reason":"duplicate"}`
	want := `{"refund_id":"RF-00001","charge_id":"CH-2","invoice_id":"INV-2026-004512","amount_usd":288.00,"currency":"USD",` +
		`"status":"succeeded","arrives":"on the original payment method within 5 to 10 business days"}`
	for range 2 {
		got, err := callTool(t, refund, args)
		if err != nil || got != want {
			t.Fatalf("issue_refund = %s, %v\nwant %s", got, err, want)
		}
	}
	if got := mustCounts(t, w); got.Refunds != 1 {
		t.Fatalf("refunds = %d, want 1", got.Refunds)
	}
}

func TestIssueRefundTeaches(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	refund := toolNamed(t, w, "issue_refund")
	for _, tc := range []struct{ args, teaches string }{
		{`{"invoice_id":"INV-2026-004512","charge_id":"CH-9","amount_usd":1,"reason":"r"}`, "get_invoice lists an invoice's charges"},
		{`{"invoice_id":"INV-1","charge_id":"CH-2","amount_usd":1,"reason":"r"}`, "belongs to invoice INV-2026-004512"},
		{`{"invoice_id":"INV-2026-004512","charge_id":"CH-2","amount_usd":300.00,"reason":"r"}`, "refund at most the charged amount"},
		{`{"invoice_id":"INV-2026-004512","charge_id":"CH-2","amount_usd":288.004,"reason":"r"}`, "fractions of a cent"},
	} {
		if _, err := callTool(t, refund, tc.args); err == nil || !strings.Contains(err.Error(), tc.teaches) {
			t.Errorf("%s: err = %v, want it to say %q", tc.args, err, tc.teaches)
		}
	}
	if got := mustCounts(t, w); got.Refunds != 0 {
		t.Fatalf("refunds = %d, want 0", got.Refunds)
	}
}

func TestReconcileRefund(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	w := newWorld(t)
	refund := toolNamed(t, w, "issue_refund")
	args := json.RawMessage(`{"invoice_id":"INV-2026-004512","charge_id":"CH-2","amount_usd":288.00,"reason":"r"}`)

	if _, found, err := refund.Reconcile(ctx, "k", args); err != nil || found {
		t.Fatalf("before any refund: found %v, err %v", found, err)
	}
	if err := w.SetLoseRefundResponses(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Refund(ctx, DuplicateChargeID, 28800, "k"); !errors.Is(err, belay.ErrUnknownOutcome) {
		t.Fatalf("err = %v, want a lost response", err)
	}
	// By the key the lost request carried, and by the charge for a key
	// billing never saw.
	for _, key := range []string{"k", "other"} {
		out, found, err := refund.Reconcile(ctx, key, args)
		if err != nil || !found || !strings.Contains(string(out), `"refund_id":"RF-00001"`) {
			t.Errorf("Reconcile(%s) = %s, %v, %v; want RF-00001", key, out, found, err)
		}
	}
}

func TestReconcileNote(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	w := newWorld(t)
	note := toolNamed(t, w, "add_internal_note")
	args := json.RawMessage(`{"ticket_id":"T-1001","text":"Refunded CH-2."}`)
	if _, found, err := note.Reconcile(ctx, "k", args); err != nil || found {
		t.Fatalf("before the note: found %v, err %v", found, err)
	}
	if _, err := callTool(t, note, string(args)); err != nil {
		t.Fatal(err)
	}
	out, found, err := note.Reconcile(ctx, "k", args)
	if want := `{"note_id":"NOTE-00001","ticket_id":"T-1001","saved":true}`; err != nil || !found || string(out) != want {
		t.Fatalf("Reconcile = %s, %v, %v; want %s", out, found, err, want)
	}
}

func TestReplyOnlyToTheTicketsCustomer(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	reply := toolNamed(t, w, "reply")
	args := func(to string) string {
		return fmt.Sprintf(`{"ticket_id":"T-1001","to":%q,"subject":"Your refund","body":"Done."}`, to)
	}
	if _, err := callTool(t, reply, args("eve@example.com")); err == nil || !strings.Contains(err.Error(), "opened by ada@example.com") {
		t.Fatalf("reply to a stranger: err = %v", err)
	}
	got, err := callTool(t, reply, args(CustomerEmail))
	if want := `{"email_id":"EM-00001","to":"ada@example.com","subject":"Your refund","sent":true}`; err != nil || got != want {
		t.Fatalf("reply = %s, %v; want %s", got, err, want)
	}
}
