package anthropic

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/internal/httperr"
)

var (
	// errTruncated is a stream that ended before its message_stop event.
	errTruncated = errors.New("the stream ended before the message was complete")
	// errBadStream is a stream whose events do not make a message.
	errBadStream = errors.New("the stream's events do not make a message")
)

// classify turns what the SDK returned, after its retries, into a
// *model.Error. The cancellation of ctx is returned as it is: it is the
// caller's, not the provider's.
func (m *Model) classify(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("anthropic: %w", err)
	}
	if errors.Is(err, errBadStream) {
		return m.errs.New(model.ClassServer, err.Error())
	}
	var apiErr *sdk.Error
	if !errors.As(err, &apiErr) {
		// No response, a timed-out attempt, or a stream cut short.
		return m.errs.Network(err)
	}
	// The SDK's error holds the request, headers and all; only its message
	// is kept.
	msg := httperr.Message(apiErr.Message, apiErr.RawJSON(), apiErr.StatusCode)
	if t := string(apiErr.Type()); t != "" {
		msg = t + ": " + msg
	}
	var h http.Header
	if apiErr.Response != nil {
		h = apiErr.Response.Header
	}
	e := m.errs.HTTP(apiErr.StatusCode, h, apiErr.RequestID, msg)
	if apiErr.StatusCode < 400 {
		// An error event in a stream that had begun with 200 OK: its type
		// is all there is to go on.
		e.StatusCode = 0
		e.Class = classOfType(string(apiErr.Type()))
	}
	return e
}

// classOfType classes the error types of the API's error events.
func classOfType(t string) model.ErrorClass {
	switch t {
	case "overloaded_error":
		return model.ClassOverloaded
	case "rate_limit_error":
		return model.ClassRateLimited
	case "timeout_error":
		return model.ClassNetwork
	case "invalid_request_error", "authentication_error", "permission_error", "not_found_error", "request_too_large", "billing_error":
		return model.ClassBadRequest
	default:
		return model.ClassServer
	}
}
