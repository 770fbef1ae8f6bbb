package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/belayrun/belay/store"
)

// The claim rules of flow control between runs: concurrency keys, priority
// and fairness between tenants.
var flowCases = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"FlowFieldsRoundTrip", testFlowFieldsRoundTrip},
	{"ClaimConcurrencyKey", testClaimConcurrencyKey},
	{"ClaimConcurrencyLimit", testClaimConcurrencyLimit},
	{"ClaimConcurrencyKeyHolders", testClaimConcurrencyKeyHolders},
	{"ClaimConcurrencyKeyConcurrent", testClaimConcurrencyKeyConcurrent},
	{"ClaimPriority", testClaimPriority},
	{"ClaimFairBetweenTenants", testClaimFairBetweenTenants},
	{"ClaimFairCountsRunning", testClaimFairCountsRunning},
	{"ClaimTenantCap", testClaimTenantCap},
	{"ClaimTenantCapConcurrent", testClaimTenantCapConcurrent},
	{"ClaimAgentCap", testClaimAgentCap},
	{"ClaimAgentCapConcurrent", testClaimAgentCapConcurrent},
	{"ClaimTenantStartRate", testClaimTenantStartRate},
	{"ClaimAgentStartRate", testClaimAgentStartRate},
	{"ClaimStartRateConcurrent", testClaimStartRateConcurrent},
	{"RecentEffects", testRecentEffects},
	{"BucketsTakeAndRefill", testBucketsTakeAndRefill},
	{"BucketsAllOrNothing", testBucketsAllOrNothing},
	{"BucketsDrain", testBucketsDrain},
	{"BucketsConcurrent", testBucketsConcurrent},
}

func testFlowFieldsRoundTrip(t *testing.T, s store.Store) {
	r := newRun(t, s, store.CreateRunParams{ConcurrencyKey: "customer-7", Priority: 5})
	if r.ConcurrencyKey != "customer-7" || r.ConcurrencyLimit != 1 || r.Priority != 5 {
		t.Errorf("created run: key %q, limit %d, priority %d; want customer-7, 1 (the default), 5",
			r.ConcurrencyKey, r.ConcurrencyLimit, r.Priority)
	}
	checkRun(t, "re-read run", getRun(t, s, r.ID), r)
	r2 := newRun(t, s, store.CreateRunParams{ConcurrencyKey: "order-1", ConcurrencyLimit: 3, Priority: -2})
	if r2.ConcurrencyLimit != 3 || r2.Priority != -2 {
		t.Errorf("created run: limit %d, priority %d; want 3, -2", r2.ConcurrencyLimit, r2.Priority)
	}
	plain := newRun(t, s, store.CreateRunParams{})
	if plain.ConcurrencyKey != "" || plain.Priority != 0 {
		t.Errorf("run without flow fields: key %q, priority %d", plain.ConcurrencyKey, plain.Priority)
	}
	_, _, err := s.CreateRun(t.Context(), store.CreateRunParams{ID: uniq("run"), Tenant: "t", User: "u",
		Agent: "support", ConcurrencyKey: "k", ConcurrencyLimit: -1, Now: t0})
	if err == nil {
		t.Error("CreateRun with a negative concurrency limit: no error")
	}
}

// Of the runs of one key, one is claimed; the others wait, holding
// nothing, while runs without a key, of another key, or of the same key in
// another tenant are claimed around them. When the holder lets go, the
// next run of the key (oldest first) is claimed.
func testClaimConcurrencyKey(t *testing.T, s store.Store) {
	tenant := uniq("tenant")
	var keyed []store.Run
	for i := range 3 {
		keyed = append(keyed, newRun(t, s, store.CreateRunParams{Tenant: tenant, ConcurrencyKey: "customer-1",
			Now: t0.Add(time.Duration(i) * time.Millisecond)}))
	}
	other := newRun(t, s, store.CreateRunParams{Tenant: tenant, ConcurrencyKey: "customer-2", Now: t0.Add(5 * time.Millisecond)})
	plain := newRun(t, s, store.CreateRunParams{Tenant: tenant, Now: t0.Add(6 * time.Millisecond)})
	elsewhere := newRun(t, s, store.CreateRunParams{ConcurrencyKey: "customer-1", Now: t0.Add(7 * time.Millisecond)})

	now := t0.Add(time.Second)
	got := ids(claimAll(t, s, "w1", now, time.Minute))
	want := []string{keyed[0].ID, other.ID, plain.ID, elsewhere.ID}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("claimed %v, want %v: one run of each key, and the runs without one", got, want)
	}
	if got := claimAll(t, s, "w2", now, time.Minute); len(got) != 0 {
		t.Fatalf("claimed %v while the key's holder runs", ids(got))
	}
	for _, r := range keyed[1:] {
		if r := getRun(t, s, r.ID); r.Status != store.StatusQueued || r.LeaseOwner != "" || r.LeaseEpoch != 0 {
			t.Errorf("waiting run %s: status %s, owner %q, epoch %d; want queued, holding nothing",
				r.ID, r.Status, r.LeaseOwner, r.LeaseEpoch)
		}
	}

	// A holder waiting for a person holds nothing: the next run goes.
	holder := getRun(t, s, keyed[0].ID)
	park(t, s, holder, store.StatusWaitingApproval, time.Time{})
	now = now.Add(time.Second)
	if got := ids(claimAll(t, s, "w2", now, time.Minute)); !slices.Equal(got, []string{keyed[1].ID}) {
		t.Fatalf("claimed %v after the holder let go, want [%s]", got, keyed[1].ID)
	}
	park(t, s, getRun(t, s, keyed[1].ID), store.StatusDone, time.Time{})
	if got := ids(claimAll(t, s, "w2", now, time.Minute)); !slices.Equal(got, []string{keyed[2].ID}) {
		t.Fatalf("claimed %v after the holder ended, want [%s]", got, keyed[2].ID)
	}
}

// A key's limit is how many of its runs run at once, counted across
// claims and within one claim.
func testClaimConcurrencyLimit(t *testing.T, s store.Store) {
	tenant := uniq("tenant")
	var keyed []string
	for i := range 5 {
		keyed = append(keyed, newRun(t, s, store.CreateRunParams{Tenant: tenant, ConcurrencyKey: "order-9",
			ConcurrencyLimit: 2, Now: t0.Add(time.Duration(i) * time.Millisecond)}).ID)
	}
	late := newRun(t, s, store.CreateRunParams{Tenant: tenant, Now: t0.Add(time.Second)})
	now := t0.Add(2 * time.Second)
	// A claim of 3 passes over the third run of the key for the run due
	// after it.
	runs, err := s.ClaimRuns(t.Context(), store.ClaimRunsParams{Owner: "w1", Now: now, TTL: time.Minute, Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(runs), []string{keyed[0], keyed[1], late.ID}; !slices.Equal(got, want) {
		t.Fatalf("claimed %v, want %v: two of the key, then the run due after them", got, want)
	}
	if got := claimAll(t, s, "w2", now, time.Minute); len(got) != 0 {
		t.Fatalf("claimed %v with the key at its limit", ids(got))
	}
	park(t, s, runs[0], store.StatusDone, time.Time{})
	if got := ids(claimAll(t, s, "w2", now, time.Minute)); !slices.Equal(got, []string{keyed[2]}) {
		t.Fatalf("claimed %v after one of two holders ended, want [%s]", got, keyed[2])
	}
}

// A run on an expired lease holds its key until it is claimed again; a
// paused run holds nothing, and when due it waits for room like a queued
// one.
func testClaimConcurrencyKeyHolders(t *testing.T, s store.Store) {
	tenant := uniq("tenant")
	first := newRun(t, s, store.CreateRunParams{Tenant: tenant, ConcurrencyKey: "k"})
	second := newRun(t, s, store.CreateRunParams{Tenant: tenant, ConcurrencyKey: "k", Now: t0.Add(time.Millisecond)})
	held := claimRun(t, s, first.ID, "w1", t0.Add(time.Second), time.Minute)

	expired := held.LeaseExpires
	if got := ids(claimAll(t, s, "w2", expired, time.Minute)); !slices.Equal(got, []string{first.ID}) {
		t.Fatalf("claimed %v once the holder's lease expired, want only the holder [%s]", got, first.ID)
	}
	// The holder pauses until later: the other run of the key goes.
	resume := expired.Add(time.Hour)
	park(t, s, getRun(t, s, first.ID), store.StatusPaused, resume)
	if got := ids(claimAll(t, s, "w2", expired.Add(time.Second), 2*time.Hour)); !slices.Equal(got, []string{second.ID}) {
		t.Fatalf("claimed %v while the holder is paused, want [%s]", got, second.ID)
	}
	// Due again, the paused run waits for the key.
	if got := claimAll(t, s, "w2", resume, 2*time.Hour); len(got) != 0 {
		t.Fatalf("claimed %v, a paused run whose key is held", ids(got))
	}
	park(t, s, getRun(t, s, second.ID), store.StatusDone, time.Time{})
	if got := ids(claimAll(t, s, "w2", resume, time.Minute)); !slices.Equal(got, []string{first.ID}) {
		t.Fatalf("claimed %v once the key was free, want the paused run [%s]", got, first.ID)
	}
}

// Workers claiming at once never run two runs of one key together: after
// each round of concurrent claims, no key has more running runs than its
// limit, and every run is claimed in the end.
func testClaimConcurrencyKeyConcurrent(t *testing.T, s store.Store) {
	const keys, perKey, workers = 4, 5, 6
	tenant := uniq("tenant")
	key := map[string]string{}
	for i := range keys * perKey {
		r := newRun(t, s, store.CreateRunParams{Tenant: tenant, ConcurrencyKey: fmt.Sprintf("key-%d", i%keys),
			Now: t0.Add(time.Duration(i) * time.Millisecond)})
		key[r.ID] = r.ConcurrencyKey
	}
	done := map[string]bool{}
	now := t0.Add(time.Second)
	for round := 0; len(done) < len(key); round++ {
		if round > keys*perKey {
			t.Fatalf("%d of %d runs claimed after %d rounds", len(done), len(key), round)
		}
		var (
			mu      sync.Mutex
			claimed []store.Run
			wg      sync.WaitGroup
		)
		for w := range workers {
			wg.Go(func() {
				runs, err := s.ClaimRuns(t.Context(), store.ClaimRunsParams{
					Owner: fmt.Sprintf("w%d", w), Now: now, TTL: time.Hour, Limit: 2,
				})
				if err != nil {
					t.Errorf("ClaimRuns: %v", err)
				}
				mu.Lock()
				claimed = append(claimed, runs...)
				mu.Unlock()
			})
		}
		wg.Wait()
		running := map[string]int{}
		for _, r := range claimed {
			running[key[r.ID]]++
			if done[r.ID] {
				t.Fatalf("run %s claimed again after it ended", r.ID)
			}
		}
		for k, n := range running {
			if n > 1 {
				t.Fatalf("round %d: %d runs of %s running at once, limit 1", round, n, k)
			}
		}
		for _, r := range claimed {
			done[r.ID] = true
			park(t, s, r, store.StatusDone, time.Time{})
		}
		now = now.Add(time.Second)
	}
}

// Within a tenant, higher priority goes first, then the oldest.
func testClaimPriority(t *testing.T, s store.Store) {
	tenant := uniq("tenant")
	low := newRun(t, s, store.CreateRunParams{Tenant: tenant, Now: t0})
	high := newRun(t, s, store.CreateRunParams{Tenant: tenant, Priority: 10, Now: t0.Add(time.Second)})
	mid := newRun(t, s, store.CreateRunParams{Tenant: tenant, Priority: 5, Now: t0.Add(2 * time.Second)})
	mid2 := newRun(t, s, store.CreateRunParams{Tenant: tenant, Priority: 5, Now: t0.Add(3 * time.Second)})
	now := t0.Add(time.Minute)
	var got []string
	for range 4 {
		runs, err := s.ClaimRuns(t.Context(), store.ClaimRunsParams{Owner: "w1", Now: now, TTL: time.Hour, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ids(runs)...)
	}
	if want := []string{high.ID, mid.ID, mid2.ID, low.ID}; !slices.Equal(got, want) {
		t.Errorf("claimed one at a time %v, want %v: priority 10, 5, 5 (older first), 0", got, want)
	}
}

// Tenant A has a deep backlog, older than tenant B's two runs: one claim
// of four takes both of B's, and claims of one take turns between them.
func testClaimFairBetweenTenants(t *testing.T, s store.Store) {
	a, b := uniq("tenant-a"), uniq("tenant-b")
	var as []string
	for i := range 20 {
		as = append(as, newRun(t, s, store.CreateRunParams{Tenant: a, Priority: 100,
			Now: t0.Add(time.Duration(i) * time.Millisecond)}).ID)
	}
	b1 := newRun(t, s, store.CreateRunParams{Tenant: b, Now: t0.Add(time.Second)})
	b2 := newRun(t, s, store.CreateRunParams{Tenant: b, Now: t0.Add(2 * time.Second)})
	now := t0.Add(time.Minute)
	runs, err := s.ClaimRuns(t.Context(), store.ClaimRunsParams{Owner: "w1", Now: now, TTL: time.Hour, Limit: 4})
	if err != nil {
		t.Fatal(err)
	}
	// Each tenant's first run, then each tenant's second: the older first.
	if got, want := ids(runs), []string{as[0], b1.ID, as[1], b2.ID}; !slices.Equal(got, want) {
		t.Errorf("one claim of 4 took %v, want %v: A's and B's first runs, then their second", got, want)
	}
	// A has two running and B two: claims of one alternate while both have
	// runs waiting, A's first as its next run is older.
	var got []string
	for range 3 {
		runs, err := s.ClaimRuns(t.Context(), store.ClaimRunsParams{Owner: "w2", Now: now, TTL: time.Hour, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ids(runs)...)
	}
	if want := []string{as[2], as[3], as[4]}; !slices.Equal(got, want) {
		t.Errorf("claims of one took %v, want %v: B has none left waiting", got, want)
	}
}

// A tenant's share is what it has running, whichever worker claimed it: a
// tenant with runs in flight waits behind one with none.
func testClaimFairCountsRunning(t *testing.T, s store.Store) {
	a, b := uniq("tenant-a"), uniq("tenant-b")
	var as []string
	for i := range 4 {
		as = append(as, newRun(t, s, store.CreateRunParams{Tenant: a, Now: t0.Add(time.Duration(i) * time.Millisecond)}).ID)
	}
	now := t0.Add(time.Minute)
	runs, err := s.ClaimRuns(t.Context(), store.ClaimRunsParams{Owner: "w1", Now: now, TTL: time.Hour, Limit: 2})
	if err != nil || !slices.Equal(ids(runs), as[:2]) {
		t.Fatalf("claimed %v (%v), want %v", ids(runs), err, as[:2])
	}
	late := newRun(t, s, store.CreateRunParams{Tenant: b, Now: now})
	runs, err = s.ClaimRuns(t.Context(), store.ClaimRunsParams{Owner: "w2", Now: now, TTL: time.Hour, Limit: 1})
	if err != nil || !slices.Equal(ids(runs), []string{late.ID}) {
		t.Fatalf("a claim of one took %v (%v), want B's first run %s: A has 2 running, B none", ids(runs), err, late.ID)
	}
}

func limiter(t *testing.T, s store.Store) store.RateLimiter {
	t.Helper()
	l, ok := s.(store.RateLimiter)
	if !ok {
		t.Fatalf("%T keeps no rate buckets (store.RateLimiter)", s)
	}
	return l
}

func take(t *testing.T, l store.RateLimiter, now time.Time, takes ...store.BucketTake) store.BucketAnswer {
	t.Helper()
	a, err := l.TakeFromBuckets(t.Context(), store.TakeFromBucketsParams{Now: now, Takes: takes})
	if err != nil {
		t.Fatalf("TakeFromBuckets: %v", err)
	}
	return a
}

// A bucket starts full, refuses a take it has no room for with the time
// until it will, and refills at its rate.
func testBucketsTakeAndRefill(t *testing.T, s store.Store) {
	l := limiter(t, s)
	name := uniq("tpm")
	two := store.BucketTake{Name: name, Rate: 1, Burst: 3, Units: 2}
	if a := take(t, l, t0, two); !a.Admitted {
		t.Fatalf("first take of 2 from a full bucket of 3: %+v", a)
	}
	a := take(t, l, t0, two)
	if a.Admitted || a.Bucket != name || a.Wait != time.Second {
		t.Fatalf("second take of 2 with 1 left: %+v, want refused by %s for 1s", a, name)
	}
	if a := take(t, l, t0.Add(time.Second), two); !a.Admitted {
		t.Fatalf("take after the refill: %+v", a)
	}
	// A take larger than the burst waits for a full bucket, then owes.
	big := store.BucketTake{Name: name, Rate: 1, Burst: 3, Units: 5}
	if a := take(t, l, t0.Add(4*time.Second), big); !a.Admitted {
		t.Fatalf("a take above the burst on a full bucket: %+v", a)
	}
	if a := take(t, l, t0.Add(5*time.Second), store.BucketTake{Name: name, Rate: 1, Burst: 3, Units: 1}); a.Admitted || a.Wait != 2*time.Second {
		t.Fatalf("a take after the bucket owes 2: %+v, want refused for 2s", a)
	}
}

// A take from several buckets is admitted by all or none: a refusal by one
// takes nothing from the others.
func testBucketsAllOrNothing(t *testing.T, s store.Store) {
	l := limiter(t, s)
	rpm, tpm := uniq("rpm"), uniq("tpm")
	req := store.BucketTake{Name: rpm, Rate: 1, Burst: 10, Units: 1}
	tokens := store.BucketTake{Name: tpm, Rate: 100, Burst: 1000, Units: 800}
	if a := take(t, l, t0, req, tokens); !a.Admitted {
		t.Fatalf("first call: %+v", a)
	}
	if a := take(t, l, t0, req, tokens); a.Admitted || a.Bucket != tpm {
		t.Fatalf("second call with 200 tokens left: %+v, want refused by %s", a, tpm)
	}
	// Nine requests are left: the refused call took none.
	for i := range 9 {
		if a := take(t, l, t0, req); !a.Admitted {
			t.Fatalf("request %d of the 9 left: %+v", i+1, a)
		}
	}
	if a := take(t, l, t0, req); a.Admitted {
		t.Fatal("an eleventh request in a burst of 10 was admitted")
	}
}

// A drain (a provider's Retry-After) refuses every take until its end, and
// the bucket refills from then.
func testBucketsDrain(t *testing.T, s store.Store) {
	l := limiter(t, s)
	name := uniq("tpm")
	one := store.BucketTake{Name: name, Rate: 2, Burst: 10, Units: 1}
	if a := take(t, l, t0, one); !a.Admitted {
		t.Fatalf("first take: %+v", a)
	}
	until := t0.Add(20 * time.Second)
	if err := l.DrainBuckets(t.Context(), store.DrainBucketsParams{Names: []string{name, uniq("never-taken")}, Now: t0, Until: until}); err != nil {
		t.Fatal(err)
	}
	if a := take(t, l, t0.Add(5*time.Second), one); a.Admitted || a.Wait != 15*time.Second {
		t.Fatalf("take during the drain: %+v, want refused for the 15s left", a)
	}
	if a := take(t, l, until, one); a.Admitted {
		t.Fatalf("take as the drain ends: %+v, want refused: the bucket refills from then", a)
	}
	if a := take(t, l, until.Add(time.Second), one); !a.Admitted {
		t.Fatalf("take a second after the drain: %+v", a)
	}
}

// Workers taking at once never take more than a bucket holds.
func testBucketsConcurrent(t *testing.T, s store.Store) {
	l := limiter(t, s)
	name := uniq("rpm")
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		admitted int
	)
	for range 12 {
		wg.Go(func() {
			a, err := l.TakeFromBuckets(t.Context(), store.TakeFromBucketsParams{Now: t0,
				Takes: []store.BucketTake{{Name: name, Rate: 0.001, Burst: 5, Units: 1}}})
			if err != nil {
				t.Errorf("TakeFromBuckets: %v", err)
				return
			}
			mu.Lock()
			if a.Admitted {
				admitted++
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	if admitted != 5 {
		t.Errorf("%d of 12 takes admitted from a bucket of 5", admitted)
	}
}

func tenantLimiter(t *testing.T, s store.Store) store.TenantLimiter {
	t.Helper()
	l, ok := s.(store.TenantLimiter)
	if !ok {
		t.Fatalf("%T keeps no tenant caps (store.TenantLimiter)", s)
	}
	return l
}

// A tenant with a cap gets no more runs while it has as many running;
// another tenant's runs are claimed around it, and the cap frees a place
// when a run lets go. A run on an expired lease is running already.
func testClaimTenantCap(t *testing.T, s store.Store) {
	l := tenantLimiter(t, s)
	a, b := uniq("tenant-a"), uniq("tenant-b")
	if err := l.SetTenantLimit(t.Context(), store.TenantLimit{Tenant: a, MaxRunning: 2}); err != nil {
		t.Fatal(err)
	}
	var as []string
	for i := range 5 {
		as = append(as, newRun(t, s, store.CreateRunParams{Tenant: a, Now: t0.Add(time.Duration(i) * time.Millisecond)}).ID)
	}
	bs := newRun(t, s, store.CreateRunParams{Tenant: b, Now: t0.Add(time.Second)})
	now := t0.Add(time.Minute)
	got := ids(claimAll(t, s, "w1", now, time.Minute))
	slices.Sort(got)
	want := []string{as[0], as[1], bs.ID}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("claimed %v, want %v: two of A's, at its cap, and B's", got, want)
	}
	if got := claimAll(t, s, "w2", now, time.Minute); len(got) != 0 {
		t.Fatalf("claimed %v with A at its cap", ids(got))
	}
	park(t, s, getRun(t, s, as[0]), store.StatusDone, time.Time{})
	if got := ids(claimAll(t, s, "w2", now, time.Minute)); !slices.Equal(got, []string{as[2]}) {
		t.Fatalf("claimed %v after one of A's runs ended, want [%s]", got, as[2])
	}
	// The cap lowered to 1 with 2 running: their leases expire, and both
	// are taken over (they are running); no queued run of A is.
	if err := l.SetTenantLimit(t.Context(), store.TenantLimit{Tenant: a, MaxRunning: 1}); err != nil {
		t.Fatal(err)
	}
	later := now.Add(time.Minute)
	got = ids(claimAll(t, s, "w3", later, time.Minute))
	slices.Sort(got)
	want = []string{as[1], as[2], bs.ID}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("claimed %v on expired leases, want %v: the running runs, no queued run of A", got, want)
	}
	limits, err := l.TenantLimits(t.Context())
	if err != nil || !slices.Contains(limits, store.TenantLimit{Tenant: a, MaxRunning: 1}) {
		t.Errorf("TenantLimits: %v (%v), want %s at 1", limits, err, a)
	}
	if err := l.SetTenantLimit(t.Context(), store.TenantLimit{Tenant: a}); err != nil {
		t.Fatal(err)
	}
	if got := claimAll(t, s, "w4", later, time.Hour); len(got) != 2 {
		t.Errorf("claimed %v once A's cap was removed, want its 2 queued runs", ids(got))
	}
}

// Workers claiming at once never run more of a tenant than its cap.
func testClaimTenantCapConcurrent(t *testing.T, s store.Store) {
	l := tenantLimiter(t, s)
	a := uniq("tenant-a")
	if err := l.SetTenantLimit(t.Context(), store.TenantLimit{Tenant: a, MaxRunning: 3}); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		newRun(t, s, store.CreateRunParams{Tenant: a, Now: t0.Add(time.Duration(i) * time.Millisecond)})
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		claimed int
	)
	for w := range 6 {
		wg.Go(func() {
			runs, err := s.ClaimRuns(t.Context(), store.ClaimRunsParams{Owner: fmt.Sprintf("w%d", w), Now: t0.Add(time.Second),
				TTL: time.Hour, Limit: 2})
			if err != nil {
				t.Errorf("ClaimRuns: %v", err)
			}
			mu.Lock()
			claimed += len(runs)
			mu.Unlock()
		})
	}
	wg.Wait()
	if claimed != 3 {
		t.Errorf("6 workers claiming at once took %d runs of a tenant capped at 3", claimed)
	}
}

func agentLimiter(t *testing.T, s store.Store) store.AgentLimiter {
	t.Helper()
	l, ok := s.(store.AgentLimiter)
	if !ok {
		t.Fatalf("%T keeps no agent caps (store.AgentLimiter)", s)
	}
	return l
}

// An agent with a cap gets no more runs, of any tenant, while it has as
// many running; another agent's runs are claimed around it, and the cap
// frees a place when a run lets go. A run on an expired lease is running
// already. Bad limits are refused.
func testClaimAgentCap(t *testing.T, s store.Store) {
	l := agentLimiter(t, s)
	capped, other := uniq("agent"), uniq("agent")
	if err := l.SetAgentLimit(t.Context(), store.AgentLimit{Agent: capped, MaxRunning: 2}); err != nil {
		t.Fatal(err)
	}
	var cs []string
	for i := range 4 {
		// Two tenants: the cap counts the agent's runs of every tenant.
		tenant := []string{"t-a", "t-b"}[i%2]
		cs = append(cs, newRun(t, s, store.CreateRunParams{Tenant: tenant, Agent: capped, Now: t0.Add(time.Duration(i) * time.Millisecond)}).ID)
	}
	o := newRun(t, s, store.CreateRunParams{Tenant: "t-a", Agent: other, Now: t0.Add(time.Second)})
	now := t0.Add(time.Minute)
	got := claimAll(t, s, "w1", now, time.Minute)
	if n := countAgent(got, capped); n != 2 || !slices.Contains(ids(got), o.ID) || len(got) != 3 {
		t.Fatalf("claimed %v: %d of the capped agent's, want 2 (its cap) and the other agent's run", ids(got), n)
	}
	if got := claimAll(t, s, "w2", now, time.Minute); len(got) != 0 {
		t.Fatalf("claimed %v with the agent at its cap", ids(got))
	}
	park(t, s, getRun(t, s, got[0].ID), store.StatusDone, time.Time{})
	if got := claimAll(t, s, "w2", now, time.Minute); len(got) != 1 || got[0].Agent != capped {
		t.Fatalf("claimed %v after one of the agent's runs ended, want one more of its runs", ids(got))
	}
	limits, err := l.AgentLimits(t.Context())
	if err != nil || !slices.Contains(limits, store.AgentLimit{Agent: capped, MaxRunning: 2}) {
		t.Errorf("AgentLimits: %v (%v), want %s at 2", limits, err, capped)
	}
	if err := l.SetAgentLimit(t.Context(), store.AgentLimit{Agent: capped}); err != nil {
		t.Fatal(err)
	}
	if got := claimAll(t, s, "w3", now, time.Minute); len(got) != 1 || got[0].ID != cs[3] && got[0].ID != cs[2] {
		t.Errorf("claimed %v once the agent's cap was removed, want its last queued run", ids(got))
	}
	for _, bad := range []store.AgentLimit{{}, {Agent: capped, MaxRunning: -1}, {Agent: capped, StartsPerMinute: -1}} {
		if err := l.SetAgentLimit(t.Context(), bad); err == nil {
			t.Errorf("SetAgentLimit(%+v): no error", bad)
		}
	}
}

func countAgent(runs []store.Run, agent string) int {
	n := 0
	for _, r := range runs {
		if r.Agent == agent {
			n++
		}
	}
	return n
}

// Workers claiming at once never run more of an agent than its cap.
func testClaimAgentCapConcurrent(t *testing.T, s store.Store) {
	l := agentLimiter(t, s)
	agent := uniq("agent")
	if err := l.SetAgentLimit(t.Context(), store.AgentLimit{Agent: agent, MaxRunning: 3}); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		newRun(t, s, store.CreateRunParams{Agent: agent, Now: t0.Add(time.Duration(i) * time.Millisecond)})
	}
	if claimed := claimConcurrently(t, s, 6, 2); claimed != 3 {
		t.Errorf("6 workers claiming at once took %d runs of an agent capped at 3", claimed)
	}
}

// claimConcurrently has workers claim up to limit runs each, all at once,
// and returns how many they took in all.
func claimConcurrently(t *testing.T, s store.Store, workers, limit int) int {
	t.Helper()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		claimed int
	)
	for w := range workers {
		wg.Go(func() {
			runs, err := s.ClaimRuns(t.Context(), store.ClaimRunsParams{Owner: fmt.Sprintf("w%d", w), Now: t0.Add(time.Second),
				TTL: time.Hour, Limit: limit})
			if err != nil {
				t.Errorf("ClaimRuns: %v", err)
			}
			mu.Lock()
			claimed += len(runs)
			mu.Unlock()
		})
	}
	wg.Wait()
	return claimed
}

// A tenant's start rate lets claims start its queued runs no faster than
// it: one a second at 60 a minute, never two at once after an idle spell,
// while another tenant's runs start around it. Runs that started already
// (on an expired lease, or paused until now) are not starts.
func testClaimTenantStartRate(t *testing.T, s store.Store) {
	l := tenantLimiter(t, s)
	a, b := uniq("tenant-a"), uniq("tenant-b")
	if err := l.SetTenantLimit(t.Context(), store.TenantLimit{Tenant: a, StartsPerMinute: 60}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		newRun(t, s, store.CreateRunParams{Tenant: a, Now: t0.Add(time.Duration(i) * time.Millisecond)})
	}
	for i := range 3 {
		newRun(t, s, store.CreateRunParams{Tenant: b, Now: t0.Add(time.Duration(i) * time.Millisecond)})
	}
	now := t0.Add(time.Minute)
	got := claimAll(t, s, "w1", now, time.Hour)
	if n := countTenant(got, a); n != 1 || len(got) != 4 {
		t.Fatalf("claimed %v: %d of A's, want 1 (its rate's burst) and B's 3", ids(got), n)
	}
	if got := claimAll(t, s, "w1", now.Add(500*time.Millisecond), time.Hour); len(got) != 0 {
		t.Fatalf("claimed %v half a second later, want none", ids(got))
	}
	if got := claimAll(t, s, "w1", now.Add(time.Second), time.Hour); countTenant(got, a) != 1 || len(got) != 1 {
		t.Fatalf("claimed %v a second later, want one of A's", ids(got))
	}
	// Idle for a minute, the bucket holds one start, not sixty.
	if got := claimAll(t, s, "w1", now.Add(time.Minute), time.Hour); countTenant(got, a) != 1 || len(got) != 1 {
		t.Fatalf("claimed %v after a minute idle, want one of A's", ids(got))
	}
	// A run of A parked until a time is due again without a start.
	r := got[0]
	park(t, s, r, store.StatusPaused, now.Add(time.Minute))
	if got := claimAll(t, s, "w2", now.Add(time.Minute), time.Hour); len(got) != 1 || got[0].ID != r.ID {
		t.Errorf("claimed %v, want the paused run %s, which is no start", ids(got), r.ID)
	}
	limits, err := l.TenantLimits(t.Context())
	if err != nil || !slices.Contains(limits, store.TenantLimit{Tenant: a, StartsPerMinute: 60}) {
		t.Errorf("TenantLimits: %v (%v), want %s at 60 starts a minute", limits, err, a)
	}
	if err := l.SetTenantLimit(t.Context(), store.TenantLimit{Tenant: a, StartsPerMinute: -1}); err == nil {
		t.Error("SetTenantLimit with a negative start rate: no error")
	}
}

func countTenant(runs []store.Run, tenant string) int {
	n := 0
	for _, r := range runs {
		if r.Tenant == tenant {
			n++
		}
	}
	return n
}

// An agent's start rate counts its starts of every tenant; at 120 a
// minute its bucket holds two.
func testClaimAgentStartRate(t *testing.T, s store.Store) {
	l := agentLimiter(t, s)
	agent := uniq("agent")
	if err := l.SetAgentLimit(t.Context(), store.AgentLimit{Agent: agent, StartsPerMinute: 120}); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		newRun(t, s, store.CreateRunParams{Tenant: []string{"t-a", "t-b"}[i%2], Agent: agent, Now: t0.Add(time.Duration(i) * time.Millisecond)})
	}
	now := t0.Add(time.Minute)
	if got := claimAll(t, s, "w1", now, time.Hour); len(got) != 2 {
		t.Fatalf("claimed %v, want 2 (the rate's burst)", ids(got))
	}
	if got := claimAll(t, s, "w1", now.Add(500*time.Millisecond), time.Hour); len(got) != 1 {
		t.Fatalf("claimed %v half a second later, want 1", ids(got))
	}
}

// Workers claiming at once never start more than a start rate's room.
func testClaimStartRateConcurrent(t *testing.T, s store.Store) {
	l := tenantLimiter(t, s)
	a := uniq("tenant-a")
	if err := l.SetTenantLimit(t.Context(), store.TenantLimit{Tenant: a, StartsPerMinute: 180}); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		newRun(t, s, store.CreateRunParams{Tenant: a, Now: t0.Add(time.Duration(i) * time.Millisecond)})
	}
	if claimed := claimConcurrently(t, s, 6, 2); claimed != 3 {
		t.Errorf("6 workers claiming at once started %d runs of a tenant starting 3 a second", claimed)
	}
}

// RecentEffects reads a tenant's effects of one tool since a time across
// runs, with each run's user, oldest first: done, unknown and pending ones
// (a refund may be in flight), not failed ones, not the asking run's, not
// another tenant's or another tool's, none begun before the window.
func testRecentEffects(t *testing.T, s store.Store) {
	h, ok := s.(store.EffectHistory)
	if !ok {
		t.Fatalf("%T reads no effects across runs (store.EffectHistory)", s)
	}
	tenant := uniq("tenant")
	ada := newRun(t, s, store.CreateRunParams{Tenant: tenant, User: "ada"})
	bob := newRun(t, s, store.CreateRunParams{Tenant: tenant, User: "bob"})
	asking := newRun(t, s, store.CreateRunParams{Tenant: tenant, User: "ada"})
	elsewhere := newRun(t, s, store.CreateRunParams{User: "ada"})
	claimed := map[string]store.Run{}
	for _, r := range claimAll(t, s, "w1", t0, time.Hour) {
		claimed[r.ID] = r
	}
	effect := func(r store.Run, tool string, m int, state store.EffectState) {
		t.Helper()
		c := claimed[r.ID]
		in := intent(r, uniq("key"), "h")
		in.Tool = tool
		in.Args = json.RawMessage(fmt.Sprintf(`{"amount":%d}`, m))
		at := t0.Add(time.Duration(m) * time.Minute)
		beginEffect(t, s, store.BeginEffectParams{Fence: fence(c), Now: at, Effect: in})
		if state != store.EffectPending {
			checkpoint(t, s, store.CheckpointParams{Fence: fence(c), Now: at.Add(time.Second), Run: update(c),
				Effects: []store.EffectUpdate{{Tenant: r.Tenant, Key: in.Key, State: state, Result: json.RawMessage(`{}`)}}})
		}
	}
	effect(ada, "refund", 0, store.EffectDone) // before the window
	effect(ada, "refund", 1, store.EffectDone)
	effect(bob, "refund", 2, store.EffectPending)
	effect(ada, "refund", 3, store.EffectFailed)
	effect(ada, "email", 4, store.EffectDone)
	effect(bob, "refund", 5, store.EffectUnknown)
	effect(asking, "refund", 6, store.EffectDone)
	effect(elsewhere, "refund", 7, store.EffectDone)
	got, err := h.RecentEffects(t.Context(), store.RecentEffectsParams{Tenant: tenant, Tool: "refund",
		Since: t0.Add(time.Minute), ExceptRun: asking.ID, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		run, user, args string
		state           store.EffectState
		at              time.Time
	}
	var rows []row
	for _, e := range got {
		rows = append(rows, row{e.RunID, e.User, string(e.Args), e.State, e.CreatedAt})
	}
	want := []row{
		{ada.ID, "ada", `{"amount":1}`, store.EffectDone, t0.Add(time.Minute)},
		{bob.ID, "bob", `{"amount":2}`, store.EffectPending, t0.Add(2 * time.Minute)},
		{bob.ID, "bob", `{"amount":5}`, store.EffectUnknown, t0.Add(5 * time.Minute)},
	}
	if !slices.Equal(rows, want) {
		t.Errorf("RecentEffects:\n got %v\nwant %v", rows, want)
	}
	if got, err := h.RecentEffects(t.Context(), store.RecentEffectsParams{Tenant: tenant, Tool: "refund",
		Since: t0.Add(time.Minute), ExceptRun: asking.ID, Limit: 2}); err != nil || len(got) != 2 {
		t.Errorf("RecentEffects with limit 2: %d (%v)", len(got), err)
	}
}
