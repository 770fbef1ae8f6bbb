package storetest

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/belayrun/belay/store"
)

// An operator migrates a run paused on a version mismatch to the version the
// workers now run: the new version, the requeue and the audit event are one
// transaction, and a resume that does not ask keeps the version.
func testResumeMigratesVersion(t *testing.T, s store.Store) {
	r := newRun(t, s, store.CreateRunParams{AgentVersion: "v1"})
	claimed := claimRun(t, s, r.ID, "w1", t0, time.Hour)
	u := update(claimed)
	u.Status, u.StopReason, u.StopDetail = store.StatusPaused, "version_mismatch", "started on v1, this worker has v2"
	u.LeaseExpires = time.Time{}
	checkpoint(t, s, store.CheckpointParams{Fence: fence(claimed), Now: t0, Run: u})
	paused := getRun(t, s, r.ID)

	from := []store.Status{store.StatusPaused}
	migrated := func(at time.Time) []store.Event {
		return []store.Event{{RunID: r.ID, Type: "migrated", Time: at, Data: json.RawMessage(`{"by":"human:ops","from":"v1","to":"v2"}`)}}
	}
	refused := []struct {
		name string
		p    store.ResumeRunParams
		want error
	}{
		{"from another tenant",
			store.ResumeRunParams{Tenant: uniq("tenant"), RunID: r.ID, Now: t0, From: from, AgentVersion: "v2", Events: migrated(t0)},
			store.ErrNotFound},
		{"from a status the run is not in",
			store.ResumeRunParams{Tenant: r.Tenant, RunID: r.ID, Now: t0, From: []store.Status{store.StatusEscalated}, AgentVersion: "v2", Events: migrated(t0)},
			store.ErrWrongStatus},
		{"of a run that stopped for another reason",
			store.ResumeRunParams{Tenant: r.Tenant, RunID: r.ID, Now: t0, From: from, StopReason: "max_turns", AgentVersion: "v2", Events: migrated(t0)},
			store.ErrWrongStatus},
		{"settling a key never begun",
			store.ResumeRunParams{Tenant: r.Tenant, RunID: r.ID, Now: t0, From: from, AgentVersion: "v2", Events: migrated(t0),
				Effects: []store.EffectUpdate{{Tenant: r.Tenant, Key: uniq("never-begun"), State: store.EffectDone}}},
			store.ErrNotFound},
	}
	for _, c := range refused {
		if _, err := s.ResumeRun(t.Context(), c.p); !errors.Is(err, c.want) {
			t.Errorf("migrate %s: %v, want %v", c.name, err, c.want)
		}
		checkRun(t, "run after a refused migration "+c.name, getRun(t, s, r.ID), paused)
		if evs := events(t, s, r.ID); len(evs) != 0 {
			t.Errorf("a refused migration %s appended %d events", c.name, len(evs))
		}
	}

	now := t0.Add(time.Hour)
	got, err := s.ResumeRun(t.Context(), store.ResumeRunParams{Tenant: r.Tenant, RunID: r.ID, Now: now, From: from,
		StopReason: "version_mismatch", AgentVersion: "v2", Events: migrated(now)})
	if err != nil {
		t.Fatal(err)
	}
	want := paused
	want.AgentVersion, want.Status, want.StopReason, want.StopDetail, want.UpdatedAt = "v2", store.StatusQueued, "", "", now
	checkRun(t, "migrated run", got, want)
	checkRun(t, "migrated run read back", getRun(t, s, r.ID), want)
	checkEvents(t, "events of the migrated run", events(t, s, r.ID), migrated(now))

	// Claimed at the new version, paused for another reason and resumed
	// without a version, it stays on the version it was migrated to.
	now = now.Add(time.Minute)
	claimed = claimRun(t, s, r.ID, "w2", now, time.Hour)
	if claimed.AgentVersion != "v2" {
		t.Errorf("claimed at version %s, want v2", claimed.AgentVersion)
	}
	u = update(claimed)
	u.Status, u.StopReason, u.LeaseExpires = store.StatusPaused, "max_turns", time.Time{}
	checkpoint(t, s, store.CheckpointParams{Fence: fence(claimed), Now: now, Run: u})
	got, err = s.ResumeRun(t.Context(), store.ResumeRunParams{Tenant: r.Tenant, RunID: r.ID, Now: now, From: from})
	if err != nil {
		t.Fatal(err)
	}
	if got.AgentVersion != "v2" || got.Status != store.StatusQueued {
		t.Errorf("resumed without a version: version %s, status %s; want v2, queued", got.AgentVersion, got.Status)
	}
}
