package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/belayrun/belay/model"
)

var (
	// errTruncated is a stream that ended before a choice finished.
	errTruncated = errors.New("the stream ended before the message was complete")
	errNoChoice  = errors.New("the response has no choice")
	errBadChunk  = errors.New("the stream sent a chunk that does not follow the ones before")
)

func badRequest(err error) *model.Error {
	return &model.Error{Class: model.ClassBadRequest, Err: fmt.Errorf("openai: %w", err)}
}

// classify turns what the SDK returned, after its retries, into a
// *model.Error. The cancellation of ctx is returned as it is: it is the
// caller's, not the provider's.
func (m *Model) classify(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("openai: %w", err)
	}
	var (
		apiErr    *sdk.Error
		streamErr *ssestream.StreamError
	)
	switch {
	case errors.As(err, &apiErr):
		// The SDK's error holds the request, headers and all; only its
		// message is kept, with the key struck out should a server echo it.
		msg := apiErr.Message
		if msg == "" {
			msg = strings.TrimSpace(apiErr.RawJSON())
		}
		if msg == "" {
			msg = http.StatusText(apiErr.StatusCode)
		}
		if kind := firstOf(apiErr.Code, apiErr.Type); kind != "" {
			msg = kind + ": " + msg
		}
		var h http.Header
		if apiErr.Response != nil {
			h = apiErr.Response.Header
		}
		return m.httpError(apiErr.StatusCode, h, msg)
	case errors.As(err, &streamErr):
		// An error in a stream that had begun with 200 OK: its type or
		// code is all there is to go on.
		var ev struct {
			Error struct{ Message, Type, Code string }
		}
		_ = json.Unmarshal(streamErr.Event.Data, &ev)
		msg := firstOf(ev.Error.Message, streamErr.Message)
		if kind := firstOf(ev.Error.Code, ev.Error.Type); kind != "" {
			msg = kind + ": " + msg
		}
		return &model.Error{Class: classOfKind(ev.Error.Code + " " + ev.Error.Type), Err: errors.New("openai: " + m.redact(msg))}
	case errors.Is(err, errNoChoice), errors.Is(err, errBadChunk):
		return &model.Error{Class: model.ClassServer, Err: fmt.Errorf("openai: %w", err)}
	}
	// No response, a timed-out attempt, or a stream cut short.
	return &model.Error{Class: model.ClassNetwork, Err: &redacted{msg: "openai: " + m.redact(err.Error()), err: err}}
}

func (m *Model) httpError(status int, h http.Header, msg string) *model.Error {
	if id := h.Get("x-request-id"); id != "" {
		msg += " (request " + id + ")"
	}
	return &model.Error{
		Class:      classOfStatus(status),
		StatusCode: status,
		RetryAfter: model.RetryAfter(h, time.Now()),
		Err:        errors.New("openai: " + m.redact(msg)),
	}
}

func classOfStatus(status int) model.ErrorClass {
	switch {
	case status == http.StatusTooManyRequests:
		return model.ClassRateLimited
	case status == http.StatusServiceUnavailable || status == 529:
		return model.ClassOverloaded
	case status >= 500:
		return model.ClassServer
	case status == http.StatusRequestTimeout:
		return model.ClassNetwork
	default:
		return model.ClassBadRequest
	}
}

// classOfKind classes a stream's error event by its code and type.
func classOfKind(kind string) model.ErrorClass {
	switch {
	case strings.Contains(kind, "rate_limit"):
		return model.ClassRateLimited
	case strings.Contains(kind, "overloaded"):
		return model.ClassOverloaded
	case strings.Contains(kind, "invalid_request"):
		return model.ClassBadRequest
	default:
		return model.ClassServer
	}
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
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
