package client

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"
)

// Error is an error the server answered: the HTTP status, a stable code
// and a message for people. errors.Is matches it against the sentinel of
// its code (ErrNotFound, ErrRequestInFlight, ...).
type Error struct {
	// StatusCode is the HTTP status of the answer; an error event of a
	// live stream has none (0).
	StatusCode int
	// Code is the server's stable code, "" for an answer that was not one
	// of the API's errors (a proxy's page).
	Code string
	// Message says what happened and what to do.
	Message string
}

func (e *Error) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("belay: %s (HTTP %d)", e.Message, e.StatusCode)
	}
	if e.StatusCode == 0 {
		return fmt.Sprintf("belay: %s (%s)", e.Message, e.Code)
	}
	return fmt.Sprintf("belay: %s (%s, HTTP %d)", e.Message, e.Code, e.StatusCode)
}

// Is reports whether target is the sentinel of e's code.
func (e *Error) Is(target error) bool {
	c, ok := target.(codeError)
	return ok && e.Code != "" && string(c) == e.Code
}

// codeError is the sentinel of one error code.
type codeError string

func (c codeError) Error() string { return "belay: " + strings.ReplaceAll(string(c), "_", " ") }

// The server's stable error codes, one sentinel each. The document at
// GET /v1/openapi.json says which operation answers which.
var (
	// ErrUnauthenticated: the key is missing, malformed, unknown or revoked (401).
	ErrUnauthenticated error = codeError("unauthenticated")
	// ErrForbidden: the key's roles do not allow the call (403).
	ErrForbidden error = codeError("forbidden")
	// ErrCrossOrigin: a browser's change from another origin (403).
	ErrCrossOrigin error = codeError("cross_origin")
	// ErrSelfApproval: the approver started the run; another approver decides (403).
	ErrSelfApproval error = codeError("self_approval")
	// ErrNotFound: no such resource in the key's tenant (404).
	ErrNotFound error = codeError("not_found")
	// ErrIdempotencyKeyRequired: a run was created without an Idempotency-Key (400).
	ErrIdempotencyKeyRequired error = codeError("idempotency_key_required")
	// ErrIdempotencyKeyMalformed: the Idempotency-Key is not one (400).
	ErrIdempotencyKeyMalformed error = codeError("idempotency_key_malformed")
	// ErrInvalidField: a field is missing or out of range (400).
	ErrInvalidField error = codeError("invalid_field")
	// ErrInvalidBody: the body is not the JSON object the route takes (400).
	ErrInvalidBody error = codeError("invalid_body")
	// ErrInvalidQuery: a query parameter is unknown or out of range (400).
	ErrInvalidQuery error = codeError("invalid_query")
	// ErrInvalidHeader: a request header the route reads is malformed (400).
	ErrInvalidHeader error = codeError("invalid_header")
	// ErrRequestTimeout: the body did not arrive in time (408).
	ErrRequestTimeout error = codeError("request_timeout")
	// ErrRequestInFlight: a create with this key is still being processed (409).
	ErrRequestInFlight error = codeError("request_in_flight")
	// ErrAlreadyDecided: the approval was decided or has expired (409).
	ErrAlreadyDecided error = codeError("already_decided")
	// ErrBindingMismatch: the decision's binding is not the approval's (409).
	ErrBindingMismatch error = codeError("binding_mismatch")
	// ErrWrongStatus: the run's status does not allow the call (409).
	ErrWrongStatus error = codeError("wrong_status")
	// ErrBodyTooLarge: the body exceeds the server's limit (413).
	ErrBodyTooLarge error = codeError("body_too_large")
	// ErrUnsupportedMediaType: the body was not sent as JSON (415).
	ErrUnsupportedMediaType error = codeError("unsupported_media_type")
	// ErrIdempotencyKeyReused: the key was used for a different request (422).
	ErrIdempotencyKeyReused error = codeError("idempotency_key_reused")
	// ErrUnknownAgent: no agent of that name is served (422).
	ErrUnknownAgent error = codeError("unknown_agent")
	// ErrInvalidArguments: an edit does not fit the tool's schema (422).
	ErrInvalidArguments error = codeError("invalid_arguments")
	// ErrInternal: the server failed; its log has the details (500).
	ErrInternal error = codeError("internal")
	// ErrStoreCorrupt: the server's store is damaged and takes no writes (503).
	ErrStoreCorrupt error = codeError("store_corrupt")
)

// errorOf reads an error answer. One that is not the API's (a proxy's
// page) keeps its status and the start of its text.
func errorOf(status int, body []byte) *Error {
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err == nil && e.Error.Code != "" {
		return &Error{StatusCode: status, Code: e.Error.Code, Message: e.Error.Message}
	}
	text := strings.TrimSpace(string(body))
	if len(text) > 200 {
		text = text[:200]
		for !utf8.ValidString(text) {
			text = text[:len(text)-1]
		}
		text += "..."
	}
	msg := "the server answered " + http.StatusText(status)
	if text != "" {
		msg += ": " + text
	}
	return &Error{StatusCode: status, Message: msg}
}

// Errors of a reply to a run (Client.Say).
var (
	// ErrNotWaiting: the run waits for no reply: answered already, never
	// asked, or doing something else (409).
	ErrNotWaiting error = codeError("not_waiting")
	// ErrWaitExpired: the run's conversation ended idle before the reply
	// came (409).
	ErrWaitExpired error = codeError("wait_expired")
)
