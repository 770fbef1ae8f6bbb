package webhook

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/belayrun/belay/store"
)

// A Deliverer delivers the notifications of webhooks whose URL names a
// destination that is not an HTTP endpoint, such as "slack:C0123ABCD" (a
// Slack channel): the scheme, the part before the colon, picks it from
// Options.Deliverers. Its deliveries are leased, retried and recorded as
// every other's, so they reach it at least once, from any sender of the
// store that knows the scheme.
type Deliverer interface {
	// Deliver makes one attempt. It returns nil once the notification is
	// delivered; an error wrapped by Permanent fails the delivery at once;
	// any other is retried, with backoff, and not before RetryAfter of it.
	// Its message is recorded with the delivery: it must not carry a
	// secret.
	Deliver(ctx context.Context, d store.Delivery) error
}

// RetryAfterError is a Deliverer's error that asks for the next attempt no
// sooner than After (a rate limit's wait).
type RetryAfterError struct {
	After time.Duration
	Err   error
}

func (e *RetryAfterError) Error() string {
	return fmt.Sprintf("%v (retry after %s)", e.Err, e.After)
}

func (e *RetryAfterError) Unwrap() error { return e.Err }

// permanentError is an error no later attempt can cure.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks a Deliverer's error as one no later attempt can cure:
// the delivery fails at once.
func Permanent(err error) error { return &permanentError{err} }

// deliverer returns the Deliverer of the URL's scheme, or nil for an HTTP
// URL or a scheme none is registered for.
func (s *Sender) deliverer(url string) Deliverer {
	scheme, _, ok := strings.Cut(url, ":")
	if !ok || scheme == "http" || scheme == "https" {
		return nil
	}
	return s.opts.Deliverers[scheme]
}

// attemptOther makes one attempt through a Deliverer.
func (s *Sender) attemptOther(ctx context.Context, dl Deliverer, d store.Delivery) (outcome, error) {
	err := dl.Deliver(ctx, d)
	if err == nil {
		return outcome{state: store.DeliveryDelivered}, nil
	}
	if _, ok := errors.AsType[*permanentError](err); ok {
		return outcome{state: store.DeliveryFailed, err: errText(err)}, nil
	}
	o := outcome{state: store.DeliveryPending, err: errText(err)}
	if ra, ok := errors.AsType[*RetryAfterError](err); ok {
		o.retryAfter = ra.After
	}
	return o, err
}
