package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/belayrun/belay/store"
)

// scripted is a Deliverer that answers each attempt with the next error of
// its script (nil once it runs out), and records the deliveries it got.
type scripted struct {
	mu     sync.Mutex
	script []error
	got    []store.Delivery
}

func (s *scripted) Deliver(_ context.Context, d store.Delivery) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, d)
	if len(s.script) == 0 {
		return nil
	}
	err := s.script[0]
	s.script = s.script[1:]
	return err
}

// TestDelivererTakesItsScheme hands the deliveries of a webhook whose URL
// names another scheme to that scheme's Deliverer, with the retries, waits
// and outcomes of HTTP deliveries: a rate limit's wait is honoured, success
// delivers, and a permanent error fails at once.
func TestDelivererTakesItsScheme(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		script []error
		want   store.DeliveryState
		tries  int
	}{
		{"delivered after a rate limit", []error{&RetryAfterError{After: 30 * time.Second, Err: errors.New("ratelimited")}}, store.DeliveryDelivered, 2},
		{"failed at once", []error{Permanent(errors.New("channel_not_found"))}, store.DeliveryFailed, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, "chat:C0123")
			dl := &scripted{script: c.script}
			s := f.sender(nil, Options{Deliverers: map[string]Deliverer{"chat": dl}})
			run := f.notify(t, "approval_requested", json.RawMessage(`{"approval_id":"ap_1"}`))
			for i := 0; i < 3; i++ {
				if _, err := s.SendDue(t.Context()); err != nil {
					t.Fatalf("SendDue: %v", err)
				}
				d := f.delivery(t, run.ID)
				if d.State == store.DeliveryPending {
					// The rate limit's 30s, and the jitter's longest draw
					// (the default first backoff, 1s) on top.
					if i == 0 && !d.NextAttemptAt.Equal(f.clock.Now().Add(31*time.Second)) {
						t.Errorf("next attempt at %s, want the rate limit's 30s and 1s of jitter after %s", d.NextAttemptAt, f.clock.Now())
					}
					f.clock.Set(d.NextAttemptAt)
				}
			}
			d := f.delivery(t, run.ID)
			if d.State != c.want || len(dl.got) != c.tries {
				t.Fatalf("delivery %s after %d attempts (%q), want %s after %d", d.State, len(dl.got), d.LastError, c.want, c.tries)
			}
			if dl.got[0].URL != "chat:C0123" || dl.got[0].Kind != "approval_requested" {
				t.Errorf("the deliverer got %+v", dl.got[0])
			}
		})
	}
}
