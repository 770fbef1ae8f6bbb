package storetest

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/belayrun/belay/store"
)

func testCreateRunIdempotent(t *testing.T, s store.Store) {
	ctx := t.Context()
	tenant := uniq("tenant")
	p := store.CreateRunParams{
		ID:              uniq("run"),
		Tenant:          tenant,
		User:            "alice",
		ClientRequestID: "req-1",
		Agent:           "support",
		AgentVersion:    "v3",
		Input:           "refund order 42",
		DryRun:          true,
		Now:             t0,
		Events: []store.Event{
			{Step: 0, Type: "run_created", Time: t0, Data: json.RawMessage(`{"input": "refund order 42"}`)},
		},
	}
	first, created, err := s.CreateRun(ctx, p)
	if err != nil {
		t.Fatalf("CreateRun: %v", err)
	}
	if !created {
		t.Fatal("first CreateRun: created false")
	}
	want := store.Run{
		ID: p.ID, Tenant: tenant, User: "alice", ClientRequestID: "req-1",
		Agent: "support", AgentVersion: "v3", Input: "refund order 42", DryRun: true,
		Status: store.StatusQueued, CreatedAt: t0, UpdatedAt: t0,
	}
	checkRun(t, "created run", first, want)
	checkRun(t, "re-read run", getRun(t, s, p.ID), want)
	checkEvents(t, "events of created run", events(t, s, p.ID), []store.Event{
		{RunID: p.ID, Type: "run_created", Time: t0, Data: json.RawMessage(`{"input": "refund order 42"}`)},
	})

	// A retry of the same request, even with other fields, returns the
	// first run and writes nothing.
	retry := p
	retry.ID = uniq("run")
	retry.Input = "something else"
	retry.Now = t0.Add(time.Second)
	retry.Events = []store.Event{{Type: "run_created", Time: retry.Now}}
	again, created, err := s.CreateRun(ctx, retry)
	if err != nil {
		t.Fatalf("CreateRun retry: %v", err)
	}
	if created {
		t.Error("CreateRun retry: created true")
	}
	checkRun(t, "retried run", again, want)
	if _, err := s.GetRun(ctx, "", retry.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetRun of the retry's id: %v, want ErrNotFound", err)
	}
	if n := len(events(t, s, p.ID)); n != 1 {
		t.Errorf("events after retry: %d, want 1", n)
	}

	// The triple is the key: another tenant or user is another run.
	other := p
	other.ID = uniq("run")
	other.Tenant = uniq("tenant")
	if r, created, err := s.CreateRun(ctx, other); err != nil || !created || r.ID != other.ID {
		t.Errorf("CreateRun in another tenant: %s, created %v, %v; want a new run", r.ID, created, err)
	}
	other = p
	other.ID = uniq("run")
	other.User = "bob"
	if r, created, err := s.CreateRun(ctx, other); err != nil || !created || r.ID != other.ID {
		t.Errorf("CreateRun for another user: %s, created %v, %v; want a new run", r.ID, created, err)
	}

	// Without a client request id every call is a new run.
	for range 2 {
		anon := p
		anon.ID = uniq("run")
		anon.ClientRequestID = ""
		if r, created, err := s.CreateRun(ctx, anon); err != nil || !created || r.ID != anon.ID {
			t.Errorf("CreateRun without request id: %s, created %v, %v; want a new run", r.ID, created, err)
		}
	}
	runs, err := s.ListRuns(ctx, store.ListRunsParams{Tenant: tenant})
	if err != nil {
		t.Fatalf("ListRuns: %v", err)
	}
	if len(runs) != 4 {
		t.Errorf("runs in tenant: %d, want 4 (first, bob's, two without request id)", len(runs))
	}
}

func testGetRunTenantScope(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := newRun(t, s, store.CreateRunParams{})
	got, err := s.GetRun(ctx, r.Tenant, r.ID)
	if err != nil {
		t.Fatalf("GetRun in its tenant: %v", err)
	}
	checkRun(t, "GetRun", got, r)
	if _, err := s.GetRun(ctx, uniq("tenant"), r.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetRun from another tenant: %v, want ErrNotFound", err)
	}
	if _, err := s.GetRun(ctx, r.Tenant, uniq("run")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetRun of an unknown id: %v, want ErrNotFound", err)
	}
	if _, err := s.GetRun(ctx, "", r.ID); err != nil {
		t.Errorf("GetRun with any tenant: %v", err)
	}
}

// listFixture creates five runs a 1 minute apart whose ids sort in creation
// order, alternating agents; the first is done, the rest queued. A run of
// another tenant sits in between.
func listFixture(t *testing.T, s store.Store) (tenant string, runs []store.Run) {
	tenant = uniq("tenant")
	prefix := uniq("run")
	for i := range 5 {
		agent := "billing"
		if i%2 == 1 {
			agent = "support"
		}
		user := "user-1"
		if i%3 == 0 {
			user = "ada"
		}
		runs = append(runs, newRun(t, s, store.CreateRunParams{
			ID:     prefix + "-" + string(rune('a'+i)),
			Tenant: tenant,
			User:   user,
			Agent:  agent,
			Now:    t0.Add(time.Duration(i) * time.Minute),
		}))
		newRun(t, s, store.CreateRunParams{
			ID:    prefix + "-" + string(rune('a'+i)) + "x",
			Agent: agent,
			Now:   t0.Add(time.Duration(i)*time.Minute + time.Second),
		})
	}
	// The oldest run is the only one claimed.
	claimed, err := s.ClaimRuns(t.Context(), store.ClaimRunsParams{Owner: "w1", Now: t0.Add(time.Hour), TTL: time.Minute, Limit: 1})
	if err != nil {
		t.Fatalf("ClaimRuns: %v", err)
	}
	if len(claimed) != 1 || claimed[0].ID != runs[0].ID {
		t.Fatalf("ClaimRuns limit 1: %v, want [%s]", ids(claimed), runs[0].ID)
	}
	park(t, s, claimed[0], store.StatusDone, time.Time{})
	runs[0] = getRun(t, s, runs[0].ID)
	return tenant, runs
}

func listIDs(t *testing.T, s store.Store, p store.ListRunsParams) []string {
	t.Helper()
	runs, err := s.ListRuns(t.Context(), p)
	if err != nil {
		t.Fatalf("ListRuns: %v", err)
	}
	return ids(runs)
}

func testListRunsFilters(t *testing.T, s store.Store) {
	tenant, runs := listFixture(t, s)
	all := ids(runs)
	for _, c := range []struct {
		name string
		p    store.ListRunsParams
		want []string
	}{
		{"tenant", store.ListRunsParams{}, all},
		{"status done", store.ListRunsParams{Status: store.StatusDone}, all[:1]},
		{"status queued", store.ListRunsParams{Status: store.StatusQueued}, all[1:]},
		{"status running", store.ListRunsParams{Status: store.StatusRunning}, nil},
		{"agent", store.ListRunsParams{Agent: "support"}, []string{all[1], all[3]}},
		{"user", store.ListRunsParams{User: "ada"}, []string{all[0], all[3]}},
		{"user and agent", store.ListRunsParams{User: "ada", Agent: "support"}, all[3:4]},
		{"since", store.ListRunsParams{Since: t0.Add(2 * time.Minute)}, all[2:]},
		{"since between", store.ListRunsParams{Since: t0.Add(2*time.Minute + 1)}, all[3:]},
		{"all filters", store.ListRunsParams{Status: store.StatusQueued, Agent: "billing", Since: t0.Add(time.Nanosecond)}, []string{all[2], all[4]}},
	} {
		c.p.Tenant = tenant
		if got := listIDs(t, s, c.p); !slices.Equal(got, c.want) {
			t.Errorf("ListRuns %s: %v, want %v", c.name, got, c.want)
		}
	}
	if got := listIDs(t, s, store.ListRunsParams{Tenant: uniq("tenant")}); len(got) != 0 {
		t.Errorf("ListRuns of an empty tenant: %v", got)
	}
}

func testListRunsPaging(t *testing.T, s store.Store) {
	tenant, runs := listFixture(t, s)
	all := ids(runs)
	var pages [][]string
	after := ""
	for range len(all) + 1 {
		page := listIDs(t, s, store.ListRunsParams{Tenant: tenant, After: after, Limit: 2})
		if len(page) == 0 {
			break
		}
		pages = append(pages, page)
		after = page[len(page)-1]
	}
	want := [][]string{all[0:2], all[2:4], all[4:5]}
	if !slices.EqualFunc(pages, want, slices.Equal) {
		t.Errorf("pages of 2: %v, want %v", pages, want)
	}
	if got := listIDs(t, s, store.ListRunsParams{Tenant: tenant, Status: store.StatusQueued, After: all[1], Limit: 1}); !slices.Equal(got, all[2:3]) {
		t.Errorf("filtered page: %v, want %v", got, all[2:3])
	}

	// Newest first: the latest runs, then the older ones page by page.
	newest := slices.Clone(all)
	slices.Reverse(newest)
	pages, after = nil, ""
	for range len(all) + 1 {
		page := listIDs(t, s, store.ListRunsParams{Tenant: tenant, After: after, Limit: 2, Newest: true})
		if len(page) == 0 {
			break
		}
		pages = append(pages, page)
		after = page[len(page)-1]
	}
	want = [][]string{newest[0:2], newest[2:4], newest[4:5]}
	if !slices.EqualFunc(pages, want, slices.Equal) {
		t.Errorf("newest first, pages of 2: %v, want %v", pages, want)
	}
}
