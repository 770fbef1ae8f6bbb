package storetest

import (
	"testing"
	"time"

	"github.com/belayrun/belay/store"
)

// A run asked for later is created paused until its time, and claimed
// once it is due, as any paused run's timer.
func testCreateRunNotBefore(t *testing.T, s store.Store) {
	later := t0.Add(4 * time.Hour)
	r := newRun(t, s, store.CreateRunParams{NotBefore: later})
	if r.Status != store.StatusPaused || !r.ResumeAfter.Equal(later) || r.StopReason != "not_before" {
		t.Fatalf("a run asked for later is %s until %v (%s), want paused until %v", r.Status, r.ResumeAfter, r.StopReason, later)
	}
	if runs := claimAll(t, s, "w1", later.Add(-time.Nanosecond), time.Hour); len(runs) != 0 {
		t.Fatalf("claimed before its time: %v", ids(runs))
	}
	runs := claimAll(t, s, "w1", later, time.Hour)
	if len(runs) != 1 || runs[0].ID != r.ID || runs[0].Status != store.StatusRunning {
		t.Fatalf("claimed at its time: %v; want %s", ids(runs), r.ID)
	}
	// A time already past creates it queued, as without one.
	now := newRun(t, s, store.CreateRunParams{NotBefore: t0.Add(-time.Hour)})
	if now.Status != store.StatusQueued || !now.ResumeAfter.IsZero() || now.StopReason != "" {
		t.Errorf("a run asked for a time past is %s until %v (%s), want queued", now.Status, now.ResumeAfter, now.StopReason)
	}
}
