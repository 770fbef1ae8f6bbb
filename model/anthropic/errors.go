package anthropic

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/belayrun/belay/model"
)

var (
	// errTruncated is a stream that ended before its message_stop event.
	errTruncated = errors.New("the stream ended before the message was complete")
	// errBadStream is a stream whose events do not make a message.
	errBadStream = errors.New("the stream's events do not make a message")
)

func badRequest(err error) *model.Error {
	return &model.Error{Class: model.ClassBadRequest, Err: fmt.Errorf("anthropic: %w", err)}
}

// classify turns what the SDK returned, after its retries, into a
// *model.Error. The cancellation of ctx is returned as it is: it is the
// caller's, not the provider's.
func (m *Model) classify(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("anthropic: %w", err)
	}
	if errors.Is(err, errBadStream) {
		return &model.Error{Class: model.ClassServer, Err: fmt.Errorf("anthropic: %s", m.redact(err.Error()))}
	}
	var apiErr *sdk.Error
	if !errors.As(err, &apiErr) {
		// No response, a timed-out attempt, or a stream cut short.
		return &model.Error{Class: model.ClassNetwork, Err: &redacted{msg: "anthropic: " + m.redact(err.Error()), err: err}}
	}
	// The SDK's error holds the request, headers and all; only its message
	// is kept, with the key struck out should a gateway echo it.
	msg := apiErr.Message
	if msg == "" {
		msg = strings.TrimSpace(apiErr.RawJSON())
	}
	if msg == "" {
		msg = http.StatusText(apiErr.StatusCode)
	}
	if t := string(apiErr.Type()); t != "" {
		msg = t + ": " + msg
	}
	if apiErr.RequestID != "" {
		msg += " (request " + apiErr.RequestID + ")"
	}
	e := &model.Error{StatusCode: apiErr.StatusCode, Err: errors.New("anthropic: " + m.redact(msg))}
	if apiErr.Response != nil {
		e.RetryAfter = model.RetryAfter(apiErr.Response.Header, time.Now())
	}
	if apiErr.StatusCode < 400 {
		// An error event in a stream that had begun with 200 OK: its type
		// is all there is to go on.
		e.StatusCode = 0
		e.Class = classOfType(string(apiErr.Type()))
		return e
	}
	e.Class = classOfStatus(apiErr.StatusCode)
	return e
}

func classOfStatus(status int) model.ErrorClass {
	switch {
	case status == http.StatusTooManyRequests:
		return model.ClassRateLimited
	case status == 529 || status == http.StatusServiceUnavailable:
		return model.ClassOverloaded
	case status >= 500:
		return model.ClassServer
	case status == http.StatusRequestTimeout:
		return model.ClassNetwork
	default:
		return model.ClassBadRequest
	}
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

func (m *Model) redact(s string) string {
	if m.key == "" {
		return s
	}
	return strings.ReplaceAll(s, m.key, "[redacted]")
}

// redacted is an error whose message has had the key struck out; the errors
// it wraps (a *url.Error, a context deadline) hold no credentials.
type redacted struct {
	msg string
	err error
}

func (r *redacted) Error() string { return r.msg }
func (r *redacted) Unwrap() error { return r.err }
