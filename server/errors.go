package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/store"
)

// apiError is an error a client can act on: a stable code and a message.
// Every error the API returns has this shape:
//
//	{"error": {"code": "not_found", "message": "..."}}
type apiError struct {
	status  int
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *apiError) Error() string { return e.Message }

func errNotFound(msg string) *apiError {
	return &apiError{status: http.StatusNotFound, Code: "not_found", Message: msg}
}

func errBadRequest(code, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, Code: code, Message: fmt.Sprintf(format, args...)}
}

// errStoreCorrupt answers every request that needs the store once its file
// was found damaged; the file's path and SQLite's words go to the log.
var errStoreCorrupt = &apiError{status: http.StatusServiceUnavailable, Code: "store_corrupt",
	Message: "the database file is damaged and belay writes nothing more to it: stop every belay process on it, run belay check --db PATH, and restore it from the latest copy belay backup wrote"}

// classify turns an error of the runtime or the store into what the client
// sees. Anything it does not know is an internal error, whose details go to
// the log and never to the client.
func classify(err error) *apiError {
	var ae *apiError
	var mbe *http.MaxBytesError
	var bte *bodyTimeoutError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &mbe):
		return &apiError{status: http.StatusRequestEntityTooLarge, Code: "body_too_large",
			Message: fmt.Sprintf("the request body exceeds %d bytes", mbe.Limit)}
	case errors.As(err, &bte):
		return &apiError{status: http.StatusRequestTimeout, Code: "request_timeout",
			Message: bte.Error() + "; send the whole body with the request, then retry on a new connection"}
	case errors.Is(err, store.ErrNotFound), errors.Is(err, belay.ErrApprovalNotFound):
		return errNotFound("no such resource in this tenant")
	case errors.Is(err, belay.ErrSelfApproval):
		return &apiError{status: http.StatusForbidden, Code: "self_approval",
			Message: "you requested this run, so another approver decides its actions (or the policy allows self-approval)"}
	case errors.Is(err, store.ErrDecided):
		return &apiError{status: http.StatusConflict, Code: "already_decided",
			Message: "this approval was decided already or has expired; a decision is taken once"}
	case errors.Is(err, store.ErrBindingMismatch):
		return &apiError{status: http.StatusConflict, Code: "binding_mismatch",
			Message: "the decision's binding does not match the approval; fetch the approval again and decide what it shows"}
	case errors.Is(err, store.ErrWrongStatus):
		return &apiError{status: http.StatusConflict, Code: "wrong_status",
			Message: "the run is not in a status that allows this: " + err.Error()}
	case errors.Is(err, store.ErrCorrupt):
		return errStoreCorrupt
	}
	return &apiError{status: http.StatusInternalServerError, Code: "internal",
		Message: "the server failed to answer; its log has the details"}
}

func writeError(w http.ResponseWriter, err error) {
	ae := classify(err)
	writeJSON(w, ae.status, map[string]any{"error": ae})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(true)
	_ = enc.Encode(v)
}
