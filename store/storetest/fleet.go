package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/belayrun/belay/store"
)

// What the workers of a fleet share beyond claims: tools' circuit breakers
// and tenants' spend caps.
var fleetCases = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"BreakerOpensForEveryWorker", testBreakerOpensForEveryWorker},
	{"BreakerProbeOneAtATime", testBreakerProbeOneAtATime},
	{"BreakerWindow", testBreakerWindow},
	{"SpendCaps", testSpendCaps},
	{"TenantSpendByWindow", testTenantSpendByWindow},
	{"SpendCapRaiseWakesRuns", testSpendCapRaiseWakesRuns},
}

func breakerKeeper(t *testing.T, s store.Store) store.BreakerKeeper {
	t.Helper()
	k, ok := s.(store.BreakerKeeper)
	if !ok {
		t.Fatalf("%T keeps no breakers (store.BreakerKeeper)", s)
	}
	return k
}

func storedBreaker(t *testing.T, k store.BreakerKeeper, name string) (store.Breaker, bool) {
	t.Helper()
	all, err := k.Breakers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range all {
		if b.Name == name {
			return b, true
		}
	}
	return store.Breaker{}, false
}

func breakerFail(t *testing.T, k store.BreakerKeeper, name string, now time.Time) store.Breaker {
	t.Helper()
	b, err := k.BreakerFailure(t.Context(), store.BreakerFailureParams{Name: name, Now: now, Failures: 3,
		Window: time.Minute, OpenFor: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Failures recorded by any worker open the breaker at the threshold, and
// every worker reading the breakers sees it open until its open time
// passes; failures while it is open do not move that time.
func testBreakerOpensForEveryWorker(t *testing.T, s store.Store) {
	k := breakerKeeper(t, s)
	name := uniq("tool")
	if _, ok := storedBreaker(t, k, name); ok {
		t.Fatal("a breaker stored before any failure")
	}
	for i := range 2 {
		if b := breakerFail(t, k, name, t0.Add(time.Duration(i)*time.Second)); b.State != store.BreakerClosed || b.Failures != i+1 {
			t.Fatalf("after %d failures: %s with %d failures, want closed with %d", i+1, b.State, b.Failures, i+1)
		}
	}
	b := breakerFail(t, k, name, t0.Add(2*time.Second))
	if b.State != store.BreakerOpen || !b.OpenUntil.Equal(t0.Add(32*time.Second)) {
		t.Fatalf("after 3 failures: %s until %v, want open until %v", b.State, b.OpenUntil, t0.Add(32*time.Second))
	}
	if seen, ok := storedBreaker(t, k, name); !ok || seen.State != store.BreakerOpen || !seen.OpenUntil.Equal(b.OpenUntil) {
		t.Fatalf("another worker reads %+v, want it open until %v", seen, b.OpenUntil)
	}
	if late := breakerFail(t, k, name, t0.Add(10*time.Second)); late.State != store.BreakerOpen || !late.OpenUntil.Equal(b.OpenUntil) {
		t.Errorf("a failure while open: %s until %v, want still open until %v", late.State, late.OpenUntil, b.OpenUntil)
	}
	// A probe asked for before the open time ends is refused.
	p, err := k.BreakerProbe(t.Context(), store.BreakerProbeParams{Name: name, Owner: "w1", Now: t0.Add(20 * time.Second), ProbeFor: 5 * time.Second})
	if err != nil || p.State != store.BreakerOpen || p.ProbeOwner != "" {
		t.Errorf("a probe while open: %+v, %v; want refused", p, err)
	}
}

// Once its open time passed, one worker gets the probe however many ask at
// once; its success closes the breaker, its failure opens it again, and a
// probe whose worker never reported is given to another after its time.
func testBreakerProbeOneAtATime(t *testing.T, s store.Store) {
	k := breakerKeeper(t, s)
	name := uniq("tool")
	for i := range 3 {
		breakerFail(t, k, name, t0.Add(time.Duration(i)))
	}
	after := t0.Add(time.Minute)
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		owners = map[string]bool{}
	)
	for i := range 8 {
		wg.Go(func() {
			owner := fmt.Sprintf("w%d", i)
			b, err := k.BreakerProbe(t.Context(), store.BreakerProbeParams{Name: name, Owner: owner, Now: after, ProbeFor: 5 * time.Second})
			if err != nil {
				t.Errorf("BreakerProbe: %v", err)
				return
			}
			if b.State != store.BreakerHalfOpen {
				t.Errorf("after the open time: %s, want half_open", b.State)
			}
			mu.Lock()
			defer mu.Unlock()
			if b.ProbeOwner == owner {
				owners[owner] = true
			}
		})
	}
	wg.Wait()
	if len(owners) != 1 {
		t.Fatalf("probes granted to %v, want one worker", owners)
	}
	// The probe's worker never reports: after its time, another has it.
	b, err := k.BreakerProbe(t.Context(), store.BreakerProbeParams{Name: name, Owner: "late", Now: after.Add(6 * time.Second), ProbeFor: 5 * time.Second})
	if err != nil || b.ProbeOwner != "late" {
		t.Fatalf("a probe asked for after the first one's time: %+v, %v; want it granted", b, err)
	}
	// Its failure opens the breaker again, for the whole open time.
	failed := breakerFail(t, k, name, after.Add(7*time.Second))
	if failed.State != store.BreakerOpen || !failed.OpenUntil.Equal(after.Add(37*time.Second)) {
		t.Fatalf("after the probe failed: %s until %v, want open again for 30s", failed.State, failed.OpenUntil)
	}
	b, err = k.BreakerProbe(t.Context(), store.BreakerProbeParams{Name: name, Owner: "w9", Now: after.Add(40 * time.Second), ProbeFor: 5 * time.Second})
	if err != nil || b.ProbeOwner != "w9" {
		t.Fatalf("second probe: %+v, %v", b, err)
	}
	closed, err := k.BreakerSuccess(t.Context(), store.BreakerSuccessParams{Name: name, Now: after.Add(41 * time.Second)})
	if err != nil || closed.State != store.BreakerClosed || closed.Failures != 0 {
		t.Fatalf("after the probe succeeded: %+v, %v; want closed with no failures", closed, err)
	}
	if seen, _ := storedBreaker(t, k, name); seen.State != store.BreakerClosed {
		t.Errorf("another worker reads %s, want closed", seen.State)
	}
}

// Failures count within a window from the first of them: failures spread
// wider than the window never open the breaker.
func testBreakerWindow(t *testing.T, s store.Store) {
	k := breakerKeeper(t, s)
	name := uniq("tool")
	for i := range 6 {
		b := breakerFail(t, k, name, t0.Add(time.Duration(i)*40*time.Second))
		if b.State != store.BreakerClosed {
			t.Fatalf("failure %d, 40 s apart with 3 a minute opening: %s", i+1, b.State)
		}
	}
	if _, err := k.BreakerFailure(t.Context(), store.BreakerFailureParams{Name: name, Now: t0}); err == nil {
		t.Error("a failure without a threshold, window or open time: no error")
	}
}

func spendCapper(t *testing.T, s store.Store) store.SpendCapper {
	t.Helper()
	c, ok := s.(store.SpendCapper)
	if !ok {
		t.Fatalf("%T keeps no spend caps (store.SpendCapper)", s)
	}
	return c
}

func capOf(t *testing.T, c store.SpendCapper, tenant string) (store.SpendCap, bool) {
	t.Helper()
	all, err := c.SpendCaps(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range all {
		if x.Tenant == tenant {
			return x, true
		}
	}
	return store.SpendCap{}, false
}

// A cap is set, changed and removed with 0; a bad one is refused.
func testSpendCaps(t *testing.T, s store.Store) {
	c := spendCapper(t, s)
	tenant := uniq("tenant")
	set := func(cp store.SpendCap) error {
		return c.SetSpendCap(t.Context(), store.SetSpendCapParams{Cap: cp, Now: t0})
	}
	if err := set(store.SpendCap{Tenant: tenant, Period: store.SpendDaily, MaxNanoUSD: 50e9}); err != nil {
		t.Fatal(err)
	}
	if got, ok := capOf(t, c, tenant); !ok || got.Period != store.SpendDaily || got.MaxNanoUSD != 50e9 {
		t.Fatalf("cap %+v (%v), want 50 USD a day", got, ok)
	}
	if err := set(store.SpendCap{Tenant: tenant, Period: store.SpendMonthly, MaxNanoUSD: 900e9}); err != nil {
		t.Fatal(err)
	}
	if got, _ := capOf(t, c, tenant); got.Period != store.SpendMonthly || got.MaxNanoUSD != 900e9 {
		t.Fatalf("changed cap %+v, want 900 USD a month", got)
	}
	if err := set(store.SpendCap{Tenant: tenant}); err != nil {
		t.Fatal(err)
	}
	if got, ok := capOf(t, c, tenant); ok {
		t.Fatalf("cap %+v after setting 0, want none", got)
	}
	if err := set(store.SpendCap{Tenant: tenant, Period: "week", MaxNanoUSD: 1}); err == nil {
		t.Error("a weekly cap was accepted")
	}
}

// Spend adds up per tenant and window, from every worker at once.
func testTenantSpendByWindow(t *testing.T, s store.Store) {
	c := spendCapper(t, s)
	tenant, other := uniq("tenant"), uniq("tenant")
	day, _ := store.SpendDaily.Window(t0)
	next := day.AddDate(0, 0, 1)
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			if err := c.AddTenantSpend(t.Context(), store.AddTenantSpendParams{Tenant: tenant, Window: day, NanoUSD: 3}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if err := c.AddTenantSpend(t.Context(), store.AddTenantSpendParams{Tenant: tenant, Window: next, NanoUSD: 7}); err != nil {
		t.Fatal(err)
	}
	if err := c.AddTenantSpend(t.Context(), store.AddTenantSpendParams{Tenant: other, Window: day, NanoUSD: 100}); err != nil {
		t.Fatal(err)
	}
	for _, x := range []struct {
		tenant string
		window time.Time
		want   int64
	}{{tenant, day, 30}, {tenant, next, 7}, {other, day, 100}, {other, next, 0}} {
		got, err := c.TenantSpend(t.Context(), x.tenant, x.window)
		if err != nil || got != x.want {
			t.Errorf("spend of %s in the window of %v: %d, %v; want %d", x.tenant, x.window, got, err, x.want)
		}
	}
}

// Setting a tenant's cap puts its runs paused on the cap back in the queue,
// and no other run: not another tenant's, not one paused for another
// reason.
func testSpendCapRaiseWakesRuns(t *testing.T, s store.Store) {
	c := spendCapper(t, s)
	tenant := uniq("tenant")
	windowEnd := t0.Add(9 * time.Hour)
	pause := func(r store.Run, reason string) {
		claimed := claimRun(t, s, r.ID, "w1", t0, time.Minute)
		u := update(claimed)
		u.Status, u.ResumeAfter, u.LeaseExpires, u.StopReason = store.StatusPaused, windowEnd, time.Time{}, reason
		checkpoint(t, s, store.CheckpointParams{Fence: fence(claimed), Now: t0, Run: u})
	}
	capped := newRun(t, s, store.CreateRunParams{Tenant: tenant})
	pause(capped, store.StopTenantSpendCap)
	otherReason := newRun(t, s, store.CreateRunParams{Tenant: tenant})
	pause(otherReason, "provider_limit")
	otherTenant := newRun(t, s, store.CreateRunParams{})
	pause(otherTenant, store.StopTenantSpendCap)
	if err := c.SetSpendCap(t.Context(), store.SetSpendCapParams{Cap: store.SpendCap{Tenant: tenant, Period: store.SpendDaily,
		MaxNanoUSD: 80e9}, Now: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if r := getRun(t, s, capped.ID); r.Status != store.StatusQueued || r.StopReason != "" {
		t.Errorf("the run paused on the cap: %s (%s) after the cap was raised, want queued", r.Status, r.StopReason)
	}
	for _, id := range []string{otherReason.ID, otherTenant.ID} {
		if r := getRun(t, s, id); r.Status != store.StatusPaused {
			t.Errorf("run %s (%s): %s after another tenant's cap or for another reason, want paused", id, r.StopReason, r.Status)
		}
	}
}
