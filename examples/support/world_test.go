package support

import (
	"bytes"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/internal/testrun"
	"github.com/belayrun/belay/store/sqlite"
)

func TestMain(m *testing.M) {
	testrun.Main(m)
}

// newWorld opens a seeded world in a file of the test's own.
func newWorld(t *testing.T) *World {
	t.Helper()
	w, err := OpenWorld(t.Context(), filepath.Join(t.TempDir(), "world.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	if err := w.Seed(t.Context()); err != nil {
		t.Fatal(err)
	}
	return w
}

func mustCounts(t *testing.T, w *World) Counts {
	t.Helper()
	c, err := w.Counts(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSeedIsRepeatable(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	w := newWorld(t)
	if _, err := w.Refund(ctx, DuplicateChargeID, 28800, "k"); err != nil {
		t.Fatal(err)
	}
	if err := w.Seed(ctx); err != nil {
		t.Fatalf("second seed: %v", err)
	}
	inv, err := w.Invoice(ctx, InvoiceID)
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Charges) != 2 || inv.AmountCents != 28800 || inv.Charges[1].DuplicateOf != "CH-1" {
		t.Fatalf("invoice after reseeding = %+v", inv)
	}
	if got := mustCounts(t, w); got != (Counts{Refunds: 1}) {
		t.Fatalf("counts after reseeding = %+v, want the refund kept", got)
	}
}

func TestRefundIsKeyedByCharge(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	w := newWorld(t)

	first, err := w.Refund(ctx, DuplicateChargeID, 28800, "run-1:issue_refund:a")
	if err != nil {
		t.Fatal(err)
	}
	want := Refund{ID: "RF-00001", ChargeID: "CH-2", InvoiceID: InvoiceID, AmountCents: 28800, Currency: "USD"}
	if first != want {
		t.Fatalf("first refund = %+v, want %+v", first, want)
	}
	// Another request for the same charge, under another key: the first
	// refund, and no money moves.
	second, err := w.Refund(ctx, DuplicateChargeID, 28800, "run-2:issue_refund:b")
	if err != nil {
		t.Fatal(err)
	}
	if second != first {
		t.Fatalf("second refund = %+v, want the first %+v", second, first)
	}
	refunds, err := w.RefundsOf(ctx, DuplicateChargeID)
	if err != nil || len(refunds) != 1 {
		t.Fatalf("RefundsOf = %v, %v; want one refund", refunds, err)
	}
	for _, key := range []string{"run-1:issue_refund:a", "run-2:issue_refund:b"} {
		got, found, err := w.FindRefundByKey(ctx, key)
		if err != nil || !found || got != first {
			t.Errorf("FindRefundByKey(%s) = %+v, %v, %v; want %+v", key, got, found, err, first)
		}
	}
	if _, found, err := w.FindRefundByKey(ctx, "never-sent"); err != nil || found {
		t.Errorf("FindRefundByKey(never-sent) found %v, err %v", found, err)
	}
	// A different charge gets the next id.
	other, err := w.Refund(ctx, "CH-1", 100, "")
	if err != nil || other.ID != "RF-00002" {
		t.Fatalf("refund of CH-1 = %+v, %v; want RF-00002", other, err)
	}
	if got := mustCounts(t, w); got.Refunds != 2 {
		t.Fatalf("refunds = %d, want 2", got.Refunds)
	}
}

func TestRefundRefusesWhatItCannotDo(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	w := newWorld(t)
	for _, tc := range []struct {
		name   string
		charge string
		cents  int64
		want   error
	}{
		{"unknown charge", "CH-9", 100, ErrNotFound},
		{"more than the charge", DuplicateChargeID, 28801, ErrRefundExceedsCharge},
	} {
		if _, err := w.Refund(ctx, tc.charge, tc.cents, "k-"+tc.name); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := w.Refund(ctx, DuplicateChargeID, 0, ""); err == nil {
		t.Error("a refund of nothing succeeded")
	}
	if got := mustCounts(t, w); got.Refunds != 0 {
		t.Fatalf("refunds = %d after refused requests, want 0", got.Refunds)
	}
}

func TestRefundLosesResponseAfterApplying(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	w := newWorld(t)
	var effects []string
	w.AfterEffect = func(kind string) { effects = append(effects, kind) }
	if err := w.SetLoseRefundResponses(ctx, 1); err != nil {
		t.Fatal(err)
	}

	_, err := w.Refund(ctx, DuplicateChargeID, 28800, "k1")
	if !errors.Is(err, belay.ErrUnknownOutcome) {
		t.Fatalf("err = %v, want one wrapping belay.ErrUnknownOutcome", err)
	}
	// The money moved anyway, and billing can say so.
	got, found, err := w.FindRefundByKey(ctx, "k1")
	if err != nil || !found || got.ID != "RF-00001" {
		t.Fatalf("FindRefundByKey = %+v, %v, %v; want RF-00001", got, found, err)
	}
	if !slices.Equal(effects, []string{"refund"}) {
		t.Fatalf("AfterEffect saw %v, want [refund]", effects)
	}
	// The fault is used up: the same request now answers, with the same refund.
	again, err := w.Refund(ctx, DuplicateChargeID, 28800, "k1")
	if err != nil || again.ID != "RF-00001" {
		t.Fatalf("second call = %+v, %v; want RF-00001", again, err)
	}
	if !slices.Equal(effects, []string{"refund"}) {
		t.Fatalf("AfterEffect saw %v; a repeated request applies nothing", effects)
	}
}

func TestInvoiceFailsTransientlyThenAnswers(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	w := newWorld(t)
	if err := w.SetInvoiceFailures(ctx, 2); err != nil {
		t.Fatal(err)
	}
	for call := 1; call <= 2; call++ {
		_, err := w.Invoice(ctx, InvoiceID)
		var te *TransientError
		if !errors.As(err, &te) || !te.Transient() || te.Call != call {
			t.Fatalf("call %d: err = %v, want transient failure %d", call, err, call)
		}
	}
	if _, err := w.Invoice(ctx, InvoiceID); err != nil {
		t.Fatalf("third call: %v", err)
	}
	if _, err := w.Invoice(ctx, "INV-0"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown invoice: err = %v, want ErrNotFound", err)
	}
}

func TestSendEmailHonoursKey(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	w := newWorld(t)
	first, err := w.SendEmail(ctx, "k", CustomerEmail, "Your refund", "body")
	if err != nil {
		t.Fatal(err)
	}
	again, err := w.SendEmail(ctx, "k", CustomerEmail, "Your refund", "body")
	if err != nil || again != first {
		t.Fatalf("same key: %+v, %v; want the first email %+v", again, err, first)
	}
	// Without a key the mailbox cannot tell: every call sends.
	for range 2 {
		if _, err := w.SendEmail(ctx, "", CustomerEmail, "Hello", "body"); err != nil {
			t.Fatal(err)
		}
	}
	emails, err := w.Emails(ctx, CustomerEmail)
	if err != nil || len(emails) != 3 || emails[0].ID != "EM-00001" || emails[0].Key != "k" {
		t.Fatalf("Emails = %+v, %v; want 3, the first EM-00001 under key k", emails, err)
	}
	if _, err := w.SendEmail(ctx, "", "nobody", "s", "b"); err == nil {
		t.Fatal("an email to a non-address was sent")
	}
}

func TestNotesHaveNoKey(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	w := newWorld(t)
	for range 2 {
		if _, err := w.AddNote(ctx, TicketID, "Refunded CH-2."); err != nil {
			t.Fatal(err)
		}
	}
	notes, err := w.Notes(ctx, TicketID)
	if err != nil || len(notes) != 2 {
		t.Fatalf("Notes = %+v, %v; want two: the CRM does not deduplicate", notes, err)
	}
	got, found, err := w.FindNote(ctx, TicketID, "  Refunded CH-2.\n")
	if err != nil || !found || got.ID != "NOTE-00002" {
		t.Fatalf("FindNote = %+v, %v, %v; want the latest, NOTE-00002", got, found, err)
	}
	if _, found, _ := w.FindNote(ctx, TicketID, "something else"); found {
		t.Fatal("FindNote found a note that was never written")
	}
	if _, err := w.AddNote(ctx, "T-9", "x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("note on unknown ticket: err = %v, want ErrNotFound", err)
	}
}

func TestSearchKBFindsThePolicy(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	found, err := w.SearchKB(t.Context(), "charged twice", 3)
	if err != nil || len(found) == 0 || found[0].ID != "KB-14" {
		t.Fatalf("SearchKB = %+v, %v; want KB-14 first", found, err)
	}
	if found, _ := w.SearchKB(t.Context(), "quantum", 3); len(found) != 0 {
		t.Fatalf("SearchKB(quantum) = %+v, want nothing", found)
	}
}

// Two handles on one file stand for two processes: what one does, the other
// sees, faults included. Nothing lives in memory.
func TestWorldIsSharedThroughTheFile(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "world.db")
	open := func() *World {
		w, err := OpenWorld(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = w.Close() })
		if err := w.Seed(ctx); err != nil {
			t.Fatal(err)
		}
		return w
	}
	a, b := open(), open()
	if err := a.SetLoseRefundResponses(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Refund(ctx, DuplicateChargeID, 28800, "k"); !errors.Is(err, belay.ErrUnknownOutcome) {
		t.Fatalf("b: err = %v, want the fault a set", err)
	}
	if r, found, err := a.FindRefundByKey(ctx, "k"); err != nil || !found || r.ID != "RF-00001" {
		t.Fatalf("a: FindRefundByKey = %+v, %v, %v; want b's refund", r, found, err)
	}

	// Concurrent writers from both handles: one refund per charge, one email
	// per key, whoever wins.
	var wg sync.WaitGroup
	for i := range 8 {
		w := []*World{a, b}[i%2]
		wg.Go(func() {
			if _, err := w.Refund(ctx, "CH-1", 28800, ""); err != nil {
				t.Error(err)
			}
			if _, err := w.SendEmail(ctx, "same", CustomerEmail, "s", "b"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := mustCounts(t, b); got != (Counts{Refunds: 2, Emails: 1}) {
		t.Fatalf("counts = %+v, want 2 refunds (one per charge) and 1 email", got)
	}
}

// A call that cannot get the world's write lock in time changes nothing and
// says it is transient, so Belay retries it, even for a side effect; the
// retry, holding the same key, sends the one email.
func TestBusyWorldIsTransient(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "world.db")
	w, err := openWorld(ctx, path, "_pragma=busy_timeout(20)&"+dsnRest)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	other, err := sql.Open("sqlite", path+"?"+dsnParams)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	holder, err := other.BeginTx(ctx, nil) // BEGIN IMMEDIATE: holds the write lock
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.SendEmail(ctx, "key-1", "ada@example.com", "hello", "body")
	var busy *BusyError
	if !errors.As(err, &busy) || !busy.Transient() || !strings.Contains(err.Error(), "nothing was changed") {
		t.Fatalf("send while another process holds the lock: %v, want a transient *BusyError", err)
	}
	if err := holder.Rollback(); err != nil {
		t.Fatal(err)
	}

	if _, err := w.SendEmail(ctx, "key-1", "ada@example.com", "hello", "body"); err != nil {
		t.Fatal(err)
	}
	if emails, err := w.Emails(ctx, "ada@example.com"); err != nil || len(emails) != 1 {
		t.Errorf("emails %v, %v: want the one sent after the lock was free", emails, err)
	}
}

// A file that is not a support world is refused, and left as it is: a
// Belay store given as --world by mistake is not written to.
func TestOpenWorldRefusesOtherFiles(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	storePath := filepath.Join(dir, "belay.db")
	st, err := sqlite.Open(ctx, storePath, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	before, err := os.ReadFile(storePath)
	if err != nil {
		t.Fatal(err)
	}
	if w, err := OpenWorld(ctx, storePath); !errors.Is(err, ErrNotWorld) {
		if w != nil {
			w.Close()
		}
		t.Fatalf("OpenWorld of a Belay store: %v, want ErrNotWorld", err)
	}
	if after, _ := os.ReadFile(storePath); !bytes.Equal(before, after) {
		t.Error("the store file changed")
	}

	other := filepath.Join(dir, "other.db")
	db, err := sql.Open("sqlite", other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE notes (id INTEGER)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := OpenWorld(ctx, other); !errors.Is(err, ErrNotWorld) {
		t.Errorf("OpenWorld of another application's file: %v, want ErrNotWorld", err)
	}
	text := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(text, []byte("not a database at all, just some words that are long enough"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenWorld(ctx, text); err == nil || !strings.Contains(err.Error(), "SQLite") {
		t.Errorf("OpenWorld of a text file: %v, want an error that says what to do", err)
	}

	// A new file becomes a world, and opens again as one.
	fresh := filepath.Join(dir, "world.db")
	for range 2 {
		w, err := OpenWorld(ctx, fresh)
		if err != nil {
			t.Fatalf("OpenWorld of a world: %v", err)
		}
		w.Close()
	}
}
