package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/internal/httperr"
)

var (
	// errTruncated is a stream that ended before a choice finished.
	errTruncated = errors.New("the stream ended before the message was complete")
	errNoChoice  = errors.New("the response has no choice")
	errBadChunk  = errors.New("the stream sent a chunk that does not follow the ones before")
)

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
		// message is kept.
		msg := httperr.Message(apiErr.Message, apiErr.RawJSON(), apiErr.StatusCode)
		if kind := firstOf(apiErr.Code, apiErr.Type); kind != "" {
			msg = kind + ": " + msg
		}
		var h http.Header
		if apiErr.Response != nil {
			h = apiErr.Response.Header
		}
		e := m.errs.HTTP(apiErr.StatusCode, h, h.Get("x-request-id"), msg)
		if quotaSpent(apiErr.Code + " " + apiErr.Type) {
			// A 429 that no wait cures: the account's credit is spent.
			e.Class = model.ClassBadRequest
		}
		return e
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
		return m.errs.New(classOfKind(ev.Error.Code+" "+ev.Error.Type), msg)
	case errors.Is(err, errNoChoice), errors.Is(err, errBadChunk):
		return &model.Error{Class: model.ClassServer, Err: fmt.Errorf("openai: %w", err)}
	}
	// No response, a timed-out attempt, or a stream cut short.
	return m.errs.Network(err)
}

// quotaSpent reports an error code or type that says the account has no
// credit left (OpenAI answers it with 429, as it does a rate limit).
func quotaSpent(kind string) bool {
	return strings.Contains(kind, "insufficient_quota") || strings.Contains(kind, "billing_hard_limit")
}

// classOfKind classes a stream's error event by its code and type.
func classOfKind(kind string) model.ErrorClass {
	switch {
	case quotaSpent(kind):
		return model.ClassBadRequest
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
