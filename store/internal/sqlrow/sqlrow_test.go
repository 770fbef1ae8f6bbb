package sqlrow

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/belayrun/belay/store"
)

// fakeRow writes into each destination a value made from the name of the
// column at its place: a string column holds its name, a bytes column a
// JSON object keyed by it, a list its name twice, an integer its place
// from 1, a boolean true.
type fakeRow struct {
	cols []string
	err  error
}

func (f fakeRow) Scan(dest ...any) error {
	if f.err != nil {
		return f.err
	}
	if len(dest) != len(f.cols) {
		return fmt.Errorf("%d destinations for %d columns", len(dest), len(f.cols))
	}
	for i, d := range dest {
		name := f.cols[i]
		switch d := d.(type) {
		case *string:
			*d = name
		case *[]byte:
			*d = []byte(`{"` + name + `":{"fields":["` + name + `"]}}`)
		case *[]string:
			*d = []string{name, name}
		case *int64:
			*d = int64(i + 1)
		case *int:
			*d = i + 1
		case *bool:
			*d = true
		default:
			return fmt.Errorf("column %s: destination %T", name, d)
		}
	}
	return nil
}

func rowOf(t *testing.T, rowType string) fakeRow {
	t.Helper()
	cols, ok := Columns(rowType)
	if !ok {
		t.Fatalf("no row type %s", rowType)
	}
	return fakeRow{cols: cols}
}

// at is the time an integer column at the place of name holds in a fakeRow.
func at(t *testing.T, rowType, name string) time.Time {
	t.Helper()
	cols, _ := Columns(rowType)
	i := slices.Index(cols, name)
	if i < 0 {
		t.Fatalf("%s has no column %s", rowType, name)
	}
	return Time(int64(i + 1))
}

// list is a List as PostgreSQL's text[] reads.
type list []string

func (l *list) Dest() any                  { return (*[]string)(l) }
func (l *list) Strings() ([]string, error) { return *l, nil }

// checkStrings checks that each string field of v named in want holds the
// column it should.
func checkStrings(t *testing.T, v any, want map[string]string) {
	t.Helper()
	rv := reflect.ValueOf(v)
	for field, col := range want {
		f := rv.FieldByName(field)
		if !f.IsValid() {
			t.Fatalf("%T has no field %s", v, field)
		}
		if got := f.String(); got != col {
			t.Errorf("%T.%s = %q, want column %s", v, field, got, col)
		}
	}
}

func destsOf[T, R any](layout func(*T, *R, *columns), x *R) []any {
	var c columns
	layout(new(T), x, &c)
	return c.dests
}

func TestLayouts(t *testing.T) {
	dests := map[string][]any{
		"run":             destsOf(runColumns, new(runRaw)),
		"approval":        destsOf(approvalColumns, new(approvalRaw)),
		"wait":            destsOf(waitColumns, new(waitRaw)),
		"signal":          destsOf(signalColumns, new(signalRaw)),
		"effect":          destsOf(effectColumns, new(effectRaw)),
		"customer_effect": destsOf(customerEffectColumns, new(customerEffectRaw)),
		"claimed_run":     destsOf(claimedRunColumns, new(runRaw)),
		"journal":         destsOf(journalColumns, new(struct{})),
		"outbox":          destsOf(outboxColumns, new(outboxRaw)),
		"delivery":        destsOf(deliveryColumns, new(deliveryRaw)),
		"api_key":         destsOf(apiKeyColumns, &apiKeyRaw{roles: noList{}}),
		"session":         destsOf(sessionColumns, new(sessionRaw)),
		"webhook":         destsOf(webhookColumns, &webhookRaw{kinds: noList{}}),
		"lineage":         destsOf(lineageColumns, new(lineageRaw)),
		"due_run":         destsOf(dueRunColumns, new(struct{})),
		"schedule":        destsOf(scheduleColumns, new(scheduleRaw)),
		"recent_effect":   destsOf(recentEffectColumns, new(recentEffectRaw)),
		"breaker":         destsOf(breakerColumns, new(breakerRaw)),
	}
	if len(dests) != len(layouts) {
		t.Fatalf("%d row types checked, %d laid out", len(dests), len(layouts))
	}
	for _, rt := range RowTypes() {
		names := mustColumns(rt)
		ds := dests[rt]
		if len(ds) != len(names) {
			t.Errorf("%s: %d destinations for %d names", rt, len(ds), len(names))
			continue
		}
		seen := map[string]bool{}
		ptrs := map[uintptr]string{}
		for i, name := range names {
			if name == "" || seen[name] {
				t.Errorf("%s: column %q empty or twice", rt, name)
			}
			seen[name] = true
			if ds[i] == nil {
				continue // a List's, given by the driver
			}
			p := reflect.ValueOf(ds[i])
			if p.Kind() != reflect.Pointer || p.IsNil() {
				t.Errorf("%s: column %s scans into %T, not a pointer", rt, name, ds[i])
				continue
			}
			if other, ok := ptrs[p.Pointer()]; ok {
				t.Errorf("%s: columns %s and %s scan into the same place", rt, other, name)
			}
			ptrs[p.Pointer()] = name
		}
	}
}

func TestRun(t *testing.T) {
	r, err := Run(rowOf(t, "run"))
	if err != nil {
		t.Fatal(err)
	}
	checkStrings(t, r, map[string]string{
		"ID": "id", "Tenant": "tenant", "User": "user_id", "ClientRequestID": "client_request_id",
		"Agent": "agent", "AgentVersion": "agent_version", "Input": "input", "RequestedBy": "requested_by",
		"Status": "status", "LeaseOwner": "lease_owner", "StopReason": "stop_reason", "StopDetail": "stop_detail",
		"Final": "final",
	})
	if !r.DryRun || r.Step != 11 || r.Messages != 12 || r.InputTokens != 13 || r.OutputTokens != 14 ||
		r.ModelCalls != 15 || r.CostNanoUSD != 16 || r.LeaseEpoch != 21 {
		t.Errorf("numbers: %+v", r)
	}
	for field, raw := range map[string]json.RawMessage{"plan": r.Plan, "guard": r.Guard, "budget": r.Budget, "escalation": r.Escalation} {
		if !strings.Contains(string(raw), `"`+field+`"`) {
			t.Errorf("%s = %s", field, raw)
		}
	}
	if _, ok := r.Sensitive["sensitive"]; !ok {
		t.Errorf("Sensitive = %v", r.Sensitive)
	}
	if r.LeaseExpires != at(t, "run", "lease_expires") || r.ResumeAfter != at(t, "run", "resume_after") ||
		r.CreatedAt != at(t, "run", "created_at") || r.UpdatedAt != at(t, "run", "updated_at") {
		t.Errorf("times: %v %v %v %v", r.LeaseExpires, r.ResumeAfter, r.CreatedAt, r.UpdatedAt)
	}
}

func TestApproval(t *testing.T) {
	a, err := Approval(rowOf(t, "approval"))
	if err != nil {
		t.Fatal(err)
	}
	checkStrings(t, a, map[string]string{
		"ID": "id", "Tenant": "tenant", "RunID": "run_id", "ToolUseID": "tool_use_id", "Tool": "tool",
		"ArgsHash": "args_hash", "Reason": "reason", "Category": "category", "Summary": "summary",
		"PolicyVersion": "policy_version", "Binding": "binding", "Status": "status", "EditedHash": "edited_hash",
		"DecidedBy": "decided_by", "Note": "note",
	})
	if a.Step != 4 || !a.SelfApproval || !strings.Contains(string(a.Args), `"args"`) || !strings.Contains(string(a.EditedArgs), `"edited_args"`) {
		t.Errorf("approval: %+v", a)
	}
	if a.ExpiresAt != at(t, "approval", "expires_at") || a.CreatedAt != at(t, "approval", "created_at") ||
		a.DecidedAt != at(t, "approval", "decided_at") {
		t.Errorf("times: %v %v %v", a.ExpiresAt, a.CreatedAt, a.DecidedAt)
	}
}

func TestEffect(t *testing.T) {
	e, err := Effect(rowOf(t, "effect"))
	if err != nil {
		t.Fatal(err)
	}
	checkEffect(t, "effect", e)

	ce, err := CustomerEffect(rowOf(t, "customer_effect"))
	if err != nil {
		t.Fatal(err)
	}
	checkEffect(t, "customer_effect", ce.Effect)
	if ce.Agent != "agent" {
		t.Errorf("Agent = %q", ce.Agent)
	}
	if _, ok := ce.Sensitive["sensitive"]; !ok {
		t.Errorf("Sensitive = %v", ce.Sensitive)
	}
}

func checkEffect(t *testing.T, rowType string, e store.Effect) {
	t.Helper()
	checkStrings(t, e, map[string]string{
		"Tenant": "tenant", "Key": "key", "RunID": "run_id", "Tool": "tool", "ArgsHash": "args_hash", "State": "state",
	})
	if e.Step != 9 || e.Attempts != 10 || e.Epoch != 11 || !strings.Contains(string(e.Args), `"args"`) ||
		!strings.Contains(string(e.Result), `"result"`) {
		t.Errorf("effect: %+v", e)
	}
	if e.InFlightUntil != at(t, rowType, "in_flight_until") || e.CreatedAt != at(t, rowType, "created_at") ||
		e.UpdatedAt != at(t, rowType, "updated_at") {
		t.Errorf("times: %v %v %v", e.InFlightUntil, e.CreatedAt, e.UpdatedAt)
	}
}

func TestClaimedRun(t *testing.T) {
	r, err := ClaimedRun(rowOf(t, "claimed_run"))
	if err != nil {
		t.Fatal(err)
	}
	checkStrings(t, r, map[string]string{"ID": "id", "LeaseOwner": "lease_owner", "TakenFrom": "taken_from"})
	if r.Step != 11 || r.LeaseEpoch != 21 {
		t.Errorf("numbers: %+v", r)
	}
}

func TestJournalRow(t *testing.T) {
	j, err := Journal(rowOf(t, "journal"))
	if err != nil {
		t.Fatal(err)
	}
	checkStrings(t, j, map[string]string{"RunID": "run_id"})
	if j.Step != 2 || j.At != 3 || j.FirstMessage != 4 || j.Messages != 5 || j.FirstEvent != 6 || j.Events != 7 ||
		!strings.Contains(string(j.Body), `"body"`) {
		t.Errorf("journal row: %+v", j)
	}
}

func TestOutbox(t *testing.T) {
	m, err := Outbox(rowOf(t, "outbox"))
	if err != nil {
		t.Fatal(err)
	}
	checkStrings(t, m, map[string]string{"Tenant": "tenant", "RunID": "run_id", "Kind": "kind"})
	if m.ID != 1 || m.Attempts != 8 || m.CreatedAt != at(t, "outbox", "created_at") ||
		m.DeliveredAt != at(t, "outbox", "delivered_at") || !strings.Contains(string(m.Payload), `"payload"`) {
		t.Errorf("outbox: %+v", m)
	}

	d, err := Delivery(rowOf(t, "delivery"))
	if err != nil {
		t.Fatal(err)
	}
	checkStrings(t, d, map[string]string{
		"ID": "id", "Tenant": "tenant", "WebhookID": "webhook_id", "RunID": "run_id", "Kind": "kind", "URL": "url",
		"Secret": "secret", "State": "state", "LastError": "last_error",
	})
	if d.OutboxID != 4 || d.Attempts != 11 || !strings.Contains(string(d.Payload), `"payload"`) ||
		d.NextAttemptAt != at(t, "delivery", "next_attempt_at") || d.CreatedAt != at(t, "delivery", "created_at") ||
		d.DeliveredAt != at(t, "delivery", "delivered_at") {
		t.Errorf("delivery: %+v", d)
	}
}

func TestAccess(t *testing.T) {
	k, err := APIKey(rowOf(t, "api_key"), new(list))
	if err != nil {
		t.Fatal(err)
	}
	checkStrings(t, k, map[string]string{"ID": "id", "Tenant": "tenant", "Name": "name", "SecretHash": "secret_hash"})
	if !slices.Equal(k.Roles, []store.Role{"roles", "roles"}) || k.CreatedAt != at(t, "api_key", "created_at") ||
		k.RevokedAt != at(t, "api_key", "revoked_at") {
		t.Errorf("api key: %+v", k)
	}

	s, err := Session(rowOf(t, "session"))
	if err != nil {
		t.Fatal(err)
	}
	checkStrings(t, s, map[string]string{"TokenHash": "token_hash", "KeyID": "key_id", "Tenant": "tenant"})
	if s.CreatedAt != at(t, "session", "created_at") || s.ExpiresAt != at(t, "session", "expires_at") {
		t.Errorf("session: %+v", s)
	}

	w, err := Webhook(rowOf(t, "webhook"), new(list))
	if err != nil {
		t.Fatal(err)
	}
	checkStrings(t, w, map[string]string{"ID": "id", "Tenant": "tenant", "URL": "url", "Secret": "secret"})
	if !slices.Equal(w.Kinds, []string{"kinds", "kinds"}) || w.CreatedAt != at(t, "webhook", "created_at") ||
		w.DisabledAt != at(t, "webhook", "disabled_at") {
		t.Errorf("webhook: %+v", w)
	}
}

// badList is a List whose column does not decode.
type badList struct{ s string }

func (l *badList) Dest() any                  { return &l.s }
func (l *badList) Strings() ([]string, error) { return nil, errors.New("bad list") }

func TestScanErrors(t *testing.T) {
	boom := errors.New("boom")
	bad := fakeRow{err: boom}
	scans := map[string]func(Scanner) error{
		"run":             func(r Scanner) error { _, err := Run(r); return err },
		"approval":        func(r Scanner) error { _, err := Approval(r); return err },
		"wait":            func(r Scanner) error { _, err := Wait(r); return err },
		"signal":          func(r Scanner) error { _, err := Signal(r); return err },
		"effect":          func(r Scanner) error { _, err := Effect(r); return err },
		"customer_effect": func(r Scanner) error { _, err := CustomerEffect(r); return err },
		"claimed_run":     func(r Scanner) error { _, err := ClaimedRun(r); return err },
		"journal":         func(r Scanner) error { _, err := Journal(r); return err },
		"outbox":          func(r Scanner) error { _, err := Outbox(r); return err },
		"delivery":        func(r Scanner) error { _, err := Delivery(r); return err },
		"api_key":         func(r Scanner) error { _, err := APIKey(r, new(list)); return err },
		"session":         func(r Scanner) error { _, err := Session(r); return err },
		"webhook":         func(r Scanner) error { _, err := Webhook(r, new(list)); return err },
		"lineage":         func(r Scanner) error { _, err := Lineage(r); return err },
		"due_run":         func(r Scanner) error { _, err := ReadDueRun(r); return err },
		"schedule":        func(r Scanner) error { _, err := Schedule(r); return err },
		"recent_effect":   func(r Scanner) error { _, err := RecentEffect(r); return err },
		"breaker":         func(r Scanner) error { _, err := Breaker(r); return err },
	}
	if len(scans) != len(layouts) {
		t.Fatalf("%d scanners tested, %d row types", len(scans), len(layouts))
	}
	for rt, scan := range scans {
		if err := scan(bad); !errors.Is(err, boom) {
			t.Errorf("%s: scan error %v, want boom", rt, err)
		}
		// Another row type's columns are too many or too few (a
		// session's and a recent effect's are as many).
		other := "session"
		if rt == other || rt == "recent_effect" {
			other = "run"
		}
		if err := scan(rowOf(t, other)); err == nil {
			t.Errorf("%s read the columns of %s", rt, other)
		}
	}
	if _, err := APIKey(fakeRow{cols: mustColumns("api_key")}, &badList{}); err == nil {
		t.Error("APIKey: a bad roles list read")
	}
	if _, err := Webhook(fakeRow{cols: mustColumns("webhook")}, &badList{}); err == nil {
		t.Error("Webhook: a bad kinds list read")
	}
}

func mustColumns(rowType string) []string {
	cols, _ := Columns(rowType)
	return cols
}

// fakeRows is a result of n rows of a row type.
type fakeRows struct {
	fakeRow
	n   int
	err error
}

func (f *fakeRows) Next() bool {
	f.n--
	return f.n >= 0
}

func (f *fakeRows) Err() error { return f.err }

func TestAll(t *testing.T) {
	cols := mustColumns("session")
	got, err := All(&fakeRows{fakeRow: fakeRow{cols: cols}, n: 3}, Session)
	if err != nil || len(got) != 3 {
		t.Fatalf("All = %v, %v; want 3 sessions", got, err)
	}
	got, err = All(&fakeRows{fakeRow: fakeRow{cols: cols}}, Session)
	if err != nil || got != nil {
		t.Errorf("All of none = %#v, %v; want nil", got, err)
	}
	boom := errors.New("boom")
	if got, err := All(&fakeRows{fakeRow: fakeRow{cols: cols}, n: 2, err: boom}, Session); !errors.Is(err, boom) || got != nil {
		t.Errorf("All with a failed result = %v, %v", got, err)
	}
	if got, err := All(&fakeRows{fakeRow: fakeRow{err: boom}, n: 2}, Session); !errors.Is(err, boom) || got != nil {
		t.Errorf("All with a failed scan = %v, %v", got, err)
	}
}

func TestTime(t *testing.T) {
	now := time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.FixedZone("x", 3600))
	if got := Time(Nanos(now)); !got.Equal(now) || got.Location() != time.UTC {
		t.Errorf("Time(Nanos(%v)) = %v", now, got)
	}
	if Nanos(time.Time{}) != 0 || !Time(0).IsZero() {
		t.Error("the zero time is not 0")
	}
}

func TestSensitive(t *testing.T) {
	b, err := EncodeSensitive(nil)
	if err != nil || string(b) != "{}" {
		t.Errorf("EncodeSensitive(nil) = %s, %v", b, err)
	}
	m := map[string]store.SensitiveArgs{"pay": {Fields: []string{"card"}}}
	b, err = EncodeSensitive(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeSensitive(b)
	if err != nil || !reflect.DeepEqual(got, m) {
		t.Errorf("DecodeSensitive(%s) = %v, %v", b, got, err)
	}
	if got, err := DecodeSensitive(nil); got != nil || err != nil {
		t.Errorf("DecodeSensitive(nil) = %v, %v", got, err)
	}
	if _, err := DecodeSensitive([]byte("{")); err == nil {
		t.Error("DecodeSensitive read bad JSON")
	}
}

// countRows is a result of (status, count) rows.
type countRows struct {
	rows [][2]any
	i    int
	err  error
}

func (c *countRows) Next() bool { c.i++; return c.i <= len(c.rows) }
func (c *countRows) Err() error { return c.err }
func (c *countRows) Scan(dest ...any) error {
	if len(dest) != 2 {
		return fmt.Errorf("%d destinations", len(dest))
	}
	r := c.rows[c.i-1]
	*dest[0].(*string) = r[0].(string)
	*dest[1].(*int64) = r[1].(int64)
	return nil
}

func TestStatusCounts(t *testing.T) {
	got, err := StatusCounts(&countRows{rows: [][2]any{{"queued", int64(3)}, {"done", int64(7)}}})
	if err != nil || len(got) != 2 || got[store.StatusQueued] != 3 || got[store.StatusDone] != 7 {
		t.Errorf("StatusCounts = %v, %v", got, err)
	}
	if got, err := StatusCounts(&countRows{}); err != nil || got == nil || len(got) != 0 {
		t.Errorf("StatusCounts of none = %#v, %v; want an empty map", got, err)
	}
	boom := errors.New("boom")
	if _, err := StatusCounts(&countRows{err: boom}); !errors.Is(err, boom) {
		t.Errorf("StatusCounts of a failed result: %v", err)
	}
}
