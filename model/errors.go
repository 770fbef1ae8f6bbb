package model

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// ErrorClass says which layer handles a failed model call.
type ErrorClass string

const (
	// ClassRateLimited: the provider refused for load on our account (429).
	// The run pauses until RetryAfter.
	ClassRateLimited ErrorClass = "rate_limited"
	// ClassOverloaded: the provider is overloaded (529, 503). The run pauses.
	ClassOverloaded ErrorClass = "overloaded"
	// ClassServer: a 5xx from the provider. The run pauses.
	ClassServer ErrorClass = "server"
	// ClassNetwork: the request did not complete. The run pauses.
	ClassNetwork ErrorClass = "network"
	// ClassBadRequest: a 400-class error. Our request is wrong; retrying
	// cannot help, so the run fails.
	ClassBadRequest ErrorClass = "bad_request"
)

// Error is a failed model call, after the provider SDK's own retries.
type Error struct {
	Class      ErrorClass
	StatusCode int
	// RetryAfter is the provider's retry-after hint, zero if none was given.
	RetryAfter time.Duration
	Err        error
}

func (e *Error) Error() string {
	if e.StatusCode != 0 {
		return fmt.Sprintf("model %s (HTTP %d): %v", e.Class, e.StatusCode, e.Err)
	}
	return fmt.Sprintf("model %s: %v", e.Class, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Transient reports whether waiting and calling again may succeed.
func (e *Error) Transient() bool { return e.Class != ClassBadRequest }

// ClassOf returns the class of err, and false if err is not a *Error.
func ClassOf(err error) (*Error, bool) {
	var me *Error
	if errors.As(err, &me) {
		return me, true
	}
	return nil, false
}

// ClassOfStatus returns the class of a provider's HTTP error status: 429 is
// rate limited, 529 and 503 overloaded, any other 5xx a server error, 408 (the
// server gave up waiting for the request) a network error, and any other
// status a bad request.
func ClassOfStatus(status int) ErrorClass {
	switch {
	case status == http.StatusTooManyRequests:
		return ClassRateLimited
	case status == 529 || status == http.StatusServiceUnavailable:
		return ClassOverloaded
	case status >= 500:
		return ClassServer
	case status == http.StatusRequestTimeout:
		return ClassNetwork
	default:
		return ClassBadRequest
	}
}

// RetryAfter reads a provider's retry hint from response headers:
// retry-after-ms, else retry-after in seconds or as an HTTP date. Zero when
// there is none.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if v := h.Get("retry-after-ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := h.Get("retry-after")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
