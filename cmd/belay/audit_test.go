package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/postgres"
)

// The audit is the database's own account of who wrote what, for the
// multi-process tests: triggers on Belay's tables log every write with the
// application_name of the connection that made it (each test process has
// its own) and the run's lease as the writing transaction saw it. The test
// adds marks of its own (a kill, a SIGSTOP) to the same log, so the order of
// events across processes is the log's order.
//
// A fenced write holds the run's row from its fence check to its commit, so
// the lease a logged write saw is the lease it was made under.
const auditSQL = `
CREATE TABLE audit_log (
    seq         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    app         text   NOT NULL,
    kind        text   NOT NULL, -- a table name, or 'mark'
    what        text   NOT NULL DEFAULT '', -- for a mark: what the test did
    run_id      text   NOT NULL DEFAULT '',
    epoch       bigint NOT NULL DEFAULT 0,  -- the run's lease epoch after the write
    owner       text   NOT NULL DEFAULT '', -- the run's lease owner after the write
    old_epoch   bigint NOT NULL DEFAULT 0,  -- runs only: before the write
    old_owner   text   NOT NULL DEFAULT '',
    old_expires bigint NOT NULL DEFAULT 0,
    old_status  text   NOT NULL DEFAULT '',
    status      text   NOT NULL DEFAULT '',
    at          bigint NOT NULL DEFAULT 0   -- runs only: the writer's clock (updated_at)
);

CREATE FUNCTION audit_run() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO audit_log (app, kind, run_id, epoch, owner, old_epoch, old_owner, old_expires, old_status, status, at)
    VALUES (current_setting('application_name'), 'runs', NEW.id, NEW.lease_epoch, NEW.lease_owner,
        OLD.lease_epoch, OLD.lease_owner, OLD.lease_expires, OLD.status, NEW.status, NEW.updated_at);
    RETURN NULL;
END
$$;

CREATE FUNCTION audit_row() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO audit_log (app, kind, run_id, epoch, owner, status)
    SELECT current_setting('application_name'), TG_TABLE_NAME, r.id, r.lease_epoch, r.lease_owner, r.status
    FROM runs r WHERE r.id = NEW.run_id;
    RETURN NULL;
END
$$;

CREATE TRIGGER audit AFTER UPDATE ON runs FOR EACH ROW EXECUTE FUNCTION audit_run();
CREATE TRIGGER audit AFTER INSERT OR UPDATE ON journal FOR EACH ROW EXECUTE FUNCTION audit_row();
CREATE TRIGGER audit AFTER INSERT OR UPDATE ON effects FOR EACH ROW EXECUTE FUNCTION audit_row();
CREATE TRIGGER audit AFTER INSERT OR UPDATE ON approvals FOR EACH ROW EXECUTE FUNCTION audit_row();
-- Only inserts: a run writes its notifications; the webhook sender of any
-- process then marks them dispatched, which is not a write of the run.
CREATE TRIGGER audit AFTER INSERT ON outbox FOR EACH ROW EXECUTE FUNCTION audit_row();
`

// installAudit adds the audit to a migrated schema.
func installAudit(ctx context.Context, t *testing.T, s *testSchema) {
	t.Helper()
	if err := s.exec(ctx, auditSQL); err != nil {
		t.Fatalf("install audit: %v", err)
	}
}

// mark logs what the test is about to do to a process (app), in the
// order of the audit.
func mark(ctx context.Context, t *testing.T, s *testSchema, app, what string) int64 {
	t.Helper()
	var seq int64
	err := s.queryRow(ctx, `INSERT INTO audit_log (app, kind, what) VALUES ($1, 'mark', $2) RETURNING seq`,
		[]any{app, what}, &seq)
	if err != nil {
		t.Fatalf("mark %s %s: %v", what, app, err)
	}
	return seq
}

// auditRow is one row of audit_log.
type auditRow struct {
	Seq        int64
	App        string
	Kind       string
	What       string
	RunID      string
	Epoch      int64
	Owner      string
	OldEpoch   int64
	OldOwner   string
	OldExpires int64
	OldStatus  string
	Status     string
	At         int64
}

// claim reports whether the row is a run's lease changing hands.
func (r auditRow) claim() bool { return r.Kind == "runs" && r.Epoch != r.OldEpoch }

func readAudit(ctx context.Context, t *testing.T, s *testSchema) []auditRow {
	t.Helper()
	s.adminM.Lock()
	defer s.adminM.Unlock()
	rows, err := s.admin.Query(ctx, `SELECT seq, app, kind, what, run_id, epoch, owner, old_epoch, old_owner,
		old_expires, old_status, status, at FROM audit_log ORDER BY seq`)
	if err != nil {
		t.Fatalf("read audit: %v", err)
	}
	log, err := pgx.CollectRows(rows, pgx.RowToStructByPos[auditRow])
	if err != nil {
		t.Fatalf("read audit: %v", err)
	}
	return log
}

// ownerPID is the process id in a lease owner (host/pid/start/nonce).
func ownerPID(owner string) int {
	parts := strings.Split(owner, "/")
	if len(parts) != 4 {
		return 0
	}
	pid, _ := strconv.Atoi(parts[1])
	return pid
}

// runEpoch names one lease of one run.
type runEpoch struct {
	run   string
	epoch int64
}

// auditReport is what checkAudit found, beyond the violations it reports.
type auditReport struct {
	// claims are the leases taken, by run and epoch, with their row.
	claims map[runEpoch]auditRow
	// free, expiredKilled, expiredLive and fromKilled count the claims of a
	// run no one held; of an expired lease whose owner the test had killed,
	// or had not (a stalled worker: a zombie); and of a live lease whose
	// owner the test had killed.
	free, expiredKilled, expiredLive, fromKilled int
}

// checkAudit checks the audit for the leases the multi-process tests
// promise (see auditLeases) and reports each violation as a test error.
func checkAudit(t *testing.T, log []auditRow, workers map[string]int) auditReport {
	t.Helper()
	rep, violations := auditLeases(log, workers)
	for i, v := range violations {
		if i == 20 {
			t.Errorf("... and %d more audit violations", len(violations)-20)
			break
		}
		t.Error(v)
	}
	return rep
}

// auditLeases reads the audit. workers maps the application name of every
// worker process to its pid. The violations it returns are:
//
//   - a claim that does not raise the epoch by exactly one, or names
//     another owner than the process that made it;
//   - a claim of a live lease (not expired, not released) whose owner was
//     not killed by the test before the claim: two live workers holding
//     the run at once;
//   - a write by a worker process under a lease it does not hold: any write
//     to a run's row, journal (messages and events), ledger, approvals or outbox made
//     while the run's epoch was not one that this process claimed (a stale
//     write after a later claim shows up here);
//   - a change of a leased run by a process that is not a worker.
func auditLeases(log []auditRow, workers map[string]int) (auditReport, []string) {
	rep := auditReport{claims: make(map[runEpoch]auditRow)}
	killedAt := make(map[int]int64) // pid -> seq of the kill mark
	var violations []string
	report := func(format string, args ...any) {
		violations = append(violations, fmt.Sprintf(format, args...))
	}
	for _, r := range log {
		pid, isWorker := workers[r.App]
		switch {
		case r.Kind == "mark":
			if r.What == "kill" {
				killedAt[workers[r.App]] = r.Seq
			}
		case r.claim():
			if !isWorker {
				report("audit %d: %s, not a worker, changed the lease of run %s (epoch %d to %d)", r.Seq, r.App, r.RunID, r.OldEpoch, r.Epoch)
				continue
			}
			if r.Epoch != r.OldEpoch+1 {
				report("audit %d: claim of run %s by %s moved the epoch from %d to %d", r.Seq, r.RunID, r.App, r.OldEpoch, r.Epoch)
			}
			if ownerPID(r.Owner) != pid {
				report("audit %d: %s (pid %d) claimed run %s for owner %s", r.Seq, r.App, pid, r.RunID, r.Owner)
			}
			k, killed := killedAt[ownerPID(r.OldOwner)]
			switch {
			case r.OldOwner == "":
				rep.free++
			case r.OldExpires <= r.At && killed && k < r.Seq:
				rep.expiredKilled++
			case r.OldExpires <= r.At:
				rep.expiredLive++
			case killed && k < r.Seq:
				rep.fromKilled++
			default:
				report("audit %d: %s claimed run %s at epoch %d while %s, alive, held it until %d (claim at %d)",
					r.Seq, r.App, r.RunID, r.Epoch, r.OldOwner, r.OldExpires, r.At)
			}
			rep.claims[runEpoch{r.RunID, r.Epoch}] = r
		case isWorker:
			// Every other write by a worker: under a lease it claimed. For
			// the run's row, the lease is the one before the write (a
			// release clears the owner and keeps the epoch).
			epoch := r.Epoch
			if r.Kind == "runs" {
				epoch = r.OldEpoch
			}
			c, ok := rep.claims[runEpoch{r.RunID, epoch}]
			if !ok || c.App != r.App {
				holder := "nobody"
				if ok {
					holder = c.App
				}
				report("audit %d: %s wrote %s of run %s at epoch %d, a lease held by %s", r.Seq, r.App, r.Kind, r.RunID, epoch, holder)
			}
		case r.Kind == "runs" && r.OldOwner != "":
			report("audit %d: %s, not a worker, changed run %s while %s held it (%s to %s)",
				r.Seq, r.App, r.RunID, r.OldOwner, r.OldStatus, r.Status)
		}
	}
	return rep, violations
}

func (r auditRow) String() string {
	return fmt.Sprintf("#%d %s %s run=%s epoch %d->%d owner %q->%q", r.Seq, r.App, r.Kind, r.RunID, r.OldEpoch, r.Epoch, r.OldOwner, r.Owner)
}

// The audit is only as good as what it catches: here two stores, standing
// for two worker processes, take a run from each other the ways a broken
// runtime could, and the audit must name exactly those.
func TestAuditCatchesTwoHolders(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := newTestSchema(t)
	open := func(app string) *postgres.Store {
		s, err := postgres.Open(ctx, db.urlFor(t, app), postgres.Config{Schema: db.name})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	a, b := open("audit-a"), open("audit-b")
	workers := map[string]int{"audit-a": 1001, "audit-b": 1002}
	ownerA, ownerB := "host/1001/77/a", "host/1002/78/b"
	installAudit(ctx, t, db)

	t0 := time.Now()
	newRun := func(id string) {
		_, _, err := a.CreateRun(ctx, store.CreateRunParams{ID: id, Tenant: "acme", User: "u", ClientRequestID: id,
			Agent: "support", Input: "hi", Budget: json.RawMessage(`{}`), Now: t0})
		if err != nil {
			t.Fatal(err)
		}
	}
	claim := func(s *postgres.Store, owner string, now time.Time, ttl time.Duration) store.Run {
		runs, err := s.ClaimRuns(ctx, store.ClaimRunsParams{Owner: owner, Now: now, TTL: ttl, Limit: 1})
		if err != nil || len(runs) != 1 {
			t.Fatalf("claim: %v, %v", runs, err)
		}
		return runs[0]
	}

	// r1: B takes A's expired lease, as it may; then A writes anyway,
	// unfenced, as a runtime that ignored the fence would.
	newRun("r1")
	claim(a, ownerA, t0, time.Second)
	claim(b, ownerB, t0.Add(2*time.Second), time.Minute)
	conn := db.connect(t, "audit-a")
	if _, err := conn.Exec(ctx, `UPDATE runs SET step = step + 1 WHERE id = 'r1'`); err != nil {
		t.Fatal(err)
	}

	// r2: B takes A's live lease while A lives.
	newRun("r2")
	r2 := claim(a, ownerA, t0.Add(3*time.Second), time.Hour)
	if _, err := b.TakeOver(ctx, store.TakeOverParams{RunID: "r2", Epoch: r2.LeaseEpoch, Owner: ownerB,
		Now: t0.Add(4 * time.Second), TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}

	// r3: B takes A's live lease after the test killed A, as it may.
	newRun("r3")
	r3 := claim(a, ownerA, t0.Add(5*time.Second), time.Hour)
	mark(ctx, t, db, "audit-a", "kill")
	if _, err := b.TakeOver(ctx, store.TakeOverParams{RunID: "r3", Epoch: r3.LeaseEpoch, Owner: ownerB,
		Now: t0.Add(6 * time.Second), TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}

	rep, violations := auditLeases(readAudit(ctx, t, db), workers)
	if len(violations) != 2 ||
		!strings.Contains(violations[0], "audit-a wrote runs of run r1 at epoch 2, a lease held by audit-b") ||
		!strings.Contains(violations[1], "audit-b claimed run r2 at epoch 2 while "+ownerA+", alive") {
		t.Errorf("violations:\n%s\nwant A's stale write to r1 and B's claim of r2", strings.Join(violations, "\n"))
	}
	if rep.free != 3 || rep.expiredLive != 1 || rep.expiredKilled != 0 || rep.fromKilled != 1 {
		t.Errorf("claims: %+v; want 3 free, 1 expired, 1 from killed", rep)
	}
}
