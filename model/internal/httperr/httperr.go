// Package httperr makes the *model.Error values of Belay's model adapters
// for HTTP APIs, so that every adapter reports a failed call alike: the
// provider's name before the message, the API key struck out of it should
// a server or gateway echo it, the class and retry hint from the response.
package httperr

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/belayrun/belay/model"
)

// Provider makes the errors of one adapter.
type Provider struct {
	// Name starts every message, as in "openai: ...".
	Name string
	// Key is the API key, struck from every message that may hold a
	// server's text. Empty when requests carry none.
	Key string
}

// BadRequest is a request that could not be made from what the caller
// gave; err holds none of a server's text.
func (p Provider) BadRequest(err error) *model.Error {
	return &model.Error{Class: model.ClassBadRequest, Err: fmt.Errorf("%s: %w", p.Name, err)}
}

// Network is a call that got no answer: no response, a timed-out attempt,
// or a stream cut short. The error shows err's text with the key struck out
// and wraps err, so that errors.Is still finds a deadline in it.
func (p Provider) Network(err error) *model.Error {
	return &model.Error{Class: model.ClassNetwork, Err: &redacted{msg: p.Name + ": " + p.redact(err.Error()), err: err}}
}

// HTTP is an error response: its class is the status's and its retry hint
// the headers'. requestID, if any, is the provider's id of the request,
// shown after msg for the provider's support.
func (p Provider) HTTP(status int, h http.Header, requestID, msg string) *model.Error {
	if requestID != "" {
		msg += " (request " + requestID + ")"
	}
	return &model.Error{
		Class:      model.ClassOfStatus(status),
		StatusCode: status,
		RetryAfter: model.RetryAfter(h, time.Now()),
		Err:        errors.New(p.Name + ": " + p.redact(msg)),
	}
}

// New is an error of class whose message, msg, may hold a server's text,
// such as an error event in a stream that had begun with 200 OK.
func (p Provider) New(class model.ErrorClass, msg string) *model.Error {
	return &model.Error{Class: class, Err: errors.New(p.Name + ": " + p.redact(msg))}
}

// Message is what an error response says: the provider's message, else its
// body, else its status's text.
func Message(message, body string, status int) string {
	if message != "" {
		return message
	}
	if body = strings.TrimSpace(body); body != "" {
		return body
	}
	return http.StatusText(status)
}

func (p Provider) redact(s string) string {
	if p.Key == "" {
		return s
	}
	return strings.ReplaceAll(s, p.Key, "[redacted]")
}

// redacted is an error whose message has had the key struck out; the errors
// it wraps (a *url.Error, a context deadline) hold no credentials.
type redacted struct {
	msg string
	err error
}

func (r *redacted) Error() string { return r.msg }
func (r *redacted) Unwrap() error { return r.err }
