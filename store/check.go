package store

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// The checks every driver makes, most of them in the transaction that
// writes, and the words a person reads when one refuses: worded here once,
// so that a store refuses alike whichever engine holds it.

var (
	// ErrNoIntent: StartAttempt found no intent under the key whose outcome
	// is unknown (none begun, or its outcome recorded). It is an
	// ErrNotFound.
	ErrNoIntent = fmt.Errorf("no unsettled intent: %w", ErrNotFound)
	// ErrMessageExists: a checkpoint appended a message whose sequence
	// number the run has. Nothing of the checkpoint was written.
	ErrMessageExists = errors.New("a message of that sequence number exists, messages are append-only")
)

// Check returns why the run cannot be created as p asks, or nil.
func (p CreateRunParams) Check() error {
	if p.ID == "" {
		return errors.New("empty id")
	}
	if p.ConcurrencyLimit < 0 {
		return fmt.Errorf("concurrency limit %d: want 0 (one run at a time) or more", p.ConcurrencyLimit)
	}
	return nil
}

// RunConcurrencyLimit is the limit a run created with p holds its key to:
// ConcurrencyLimit, or 1 when it is 0; 0 for a run without a key.
func (p CreateRunParams) RunConcurrencyLimit() int {
	if p.ConcurrencyKey == "" {
		return 0
	}
	return max(p.ConcurrencyLimit, 1)
}

// Check returns why p cannot be written whatever the run's state, or nil:
// a checkpoint that keeps the lease must leave the run running, with no
// time to resume at.
func (p CheckpointParams) Check() error {
	if p.Run.KeepLease && (p.Run.Status != StatusRunning || !p.Run.ResumeAfter.IsZero()) {
		return fmt.Errorf("KeepLease with status %s", p.Run.Status)
	}
	// A run's history is appended to, message after message, so the
	// messages of one write follow each other.
	for i := 1; i < len(p.Messages); i++ {
		if p.Messages[i].Seq != p.Messages[i-1].Seq+1 {
			return fmt.Errorf("message %d follows message %d: a checkpoint appends consecutive messages", p.Messages[i].Seq, p.Messages[i-1].Seq)
		}
	}
	return nil
}

// Check returns ErrEffectConflict if cur, the ledger's row under p's key,
// was begun with other arguments than p's effect.
func (p BeginEffectParams) Check(cur Effect) error {
	if cur.ArgsHash != p.Effect.ArgsHash {
		return fmt.Errorf("key %q: %w", p.Effect.Key, ErrEffectConflict)
	}
	return nil
}

// Check returns why p may not decide cur, the approval as p's transaction
// read it, or nil: ErrDecided if cur is not pending, or has expired at
// p.Now and p is not its expiry; ErrBindingMismatch if p names another
// binding.
func (p DecideParams) Check(cur Approval) error {
	switch {
	case cur.Status != ApprovalPending:
		return fmt.Errorf("%w: it was %s by %s", ErrDecided, cur.Status, cur.DecidedBy)
	case cur.Binding != p.Binding:
		return ErrBindingMismatch
	case p.Status != ApprovalExpired && !cur.ExpiresAt.After(p.Now):
		return fmt.Errorf("%w: it expired at %s", ErrDecided, cur.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return nil
}

// Check returns ErrWrongStatus unless a run in status s is in one of the
// statuses p resumes from.
func (p ResumeRunParams) Check(s Status) error {
	if !slices.Contains(p.From, s) {
		return fmt.Errorf("%w: it is %s", ErrWrongStatus, s)
	}
	return nil
}

// StopReasonMismatch is the error of a resume whose run is in a status p
// resumes from but stopped for another reason, stopped, than p.StopReason.
func (p ResumeRunParams) StopReasonMismatch(stopped string) error {
	return fmt.Errorf("%w: it stopped for %q, not %q", ErrWrongStatus, stopped, p.StopReason)
}

// Check returns ErrWrongStatus if a run in status s has ended: an ended run
// is never canceled.
func (p CancelRunParams) Check(s Status) error {
	if s.Terminal() {
		return fmt.Errorf("%w: it is %s", ErrWrongStatus, s)
	}
	return nil
}

// StopDetail is the stop detail of the run p cancels: p's note, or who
// canceled it.
func (p CancelRunParams) StopDetail() string {
	if p.Note != "" {
		return p.Note
	}
	return "canceled by " + p.By
}

// LeavesRunning reports whether a checkpoint writing u takes its run out
// of a step (paused, waiting, ended or queued again): the run no longer
// holds its place under its concurrency key, so runs of the key waiting in
// other processes may be due now, and the store wakes them when some wait.
func (u RunUpdate) LeavesRunning() bool {
	return !u.KeepLease && u.Status != StatusRunning
}

// LetsGoWhileDue reports whether a checkpoint writing u lets go of a run
// that is still due (running or queued, no lease): another worker should
// take it at once, so the store wakes the idle ones.
func (u RunUpdate) LetsGoWhileDue() bool {
	return !u.KeepLease && u.LeaseExpires.IsZero() && (u.Status == StatusRunning || u.Status == StatusQueued)
}
