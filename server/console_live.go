package server

// The console's live updates: a page watches a fingerprint of what it shows.

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/belayrun/belay/store"
)

// version fingerprints what a live view shows; the page is redrawn when it
// changes.
func (s *Server) version(r *http.Request, p Principal, view string) (string, error) {
	h := sha256.New()
	switch {
	case view == "queue":
		as, err := s.st.Approvals(r.Context(), store.ListApprovalsParams{Tenant: p.Tenant, Status: store.ApprovalPending, Limit: 1000})
		if err != nil {
			return "", err
		}
		for _, a := range as {
			fmt.Fprintln(h, a.ID)
		}
	case view == "runs":
		runs, err := s.st.ListRuns(r.Context(), store.ListRunsParams{Tenant: p.Tenant, Limit: 50, Newest: true})
		if err != nil {
			return "", err
		}
		for _, run := range runs {
			fmt.Fprintln(h, run.ID, run.Status, run.UpdatedAt.UnixNano())
		}
	case strings.HasPrefix(view, "run:"):
		run, err := s.st.GetRun(r.Context(), p.Tenant, strings.TrimPrefix(view, "run:"))
		if err != nil {
			return "", err
		}
		fmt.Fprintln(h, run.Status, run.Step, run.Messages, run.UpdatedAt.UnixNano())
		as, err := s.st.Approvals(r.Context(), store.ListApprovalsParams{Tenant: p.Tenant, RunID: run.ID})
		if err != nil {
			return "", err
		}
		for _, a := range as {
			fmt.Fprintln(h, a.ID, a.Status)
		}
	default:
		return "", errBadRequest("invalid_query", "unknown live view %q", view)
	}
	return hex.EncodeToString(h.Sum(nil)[:12]), nil
}

// liveRoles are the roles a live view needs: those of the pages that
// watch it.
func liveRoles(view string) []store.Role {
	if view == "queue" {
		return approvers
	}
	return readers
}

// live is a server-sent event stream that says "change" once the view's
// fingerprint differs from the version the page was rendered at; the page
// then fetches itself again. It lasts as long as the session: every look
// signs the request in again, after reading the view, so that nothing read
// after a key was revoked, or its session ended, is told.
func (s *Server) live(w http.ResponseWriter, r *http.Request) {
	p, ok := s.session(r)
	if !ok {
		http.Error(w, "sign in first", http.StatusUnauthorized)
		return
	}
	view, seen := r.URL.Query().Get("view"), r.URL.Query().Get("v")
	roles := liveRoles(view)
	if !p.Has(roles...) {
		http.Error(w, fmt.Sprintf("your key's roles (%s) do not allow this view; it needs one of: %s", joinRoles(p.Roles), joinRoles(roles)),
			http.StatusForbidden)
		return
	}
	if _, err := s.version(r, p, view); err != nil {
		ae := classify(err)
		http.Error(w, ae.Message, ae.status)
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 2000\n\n")
	flusher.Flush()
	tick := time.NewTicker(s.cfg.LivePoll)
	defer tick.Stop()
	idle := 0
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.closing:
			return
		case <-tick.C:
		}
		v, err := s.version(r, p, view)
		if errors.Is(err, store.ErrNotFound) || r.Context().Err() != nil {
			return
		}
		// A session gone, or short of the view's roles, ends the stream; the
		// browser's reconnect then meets the sign-in check and gives up.
		if p, ok = s.session(r); !ok || !p.Has(roles...) {
			return
		}
		if err == nil && v != seen {
			fmt.Fprintf(w, "event: change\ndata: %s\n\n", v)
			flusher.Flush()
			seen = v
			continue
		}
		// A comment now and then keeps proxies from closing an idle stream.
		if idle++; idle*int(s.cfg.LivePoll/time.Millisecond) >= 15000 {
			fmt.Fprint(w, ": idle\n\n")
			flusher.Flush()
			idle = 0
		}
	}
}

// errSessionEnded ends a console stream whose session has ended, or whose
// key no longer has the roles the page needs.
var errSessionEnded = &apiError{status: http.StatusUnauthorized, Code: "unauthenticated",
	Message: "your console session has ended, or its key no longer reads runs: sign in again"}

// followRunPage is GET /console/runs/{id}/events, the run page's live
// updates: the run's trace followed as the API's stream follows it, woken
// by the server's EventHub, polling nothing. Each batch of new events is
// one change message, whose id is the last event's seq: the page fetches
// itself again, and a browser that reconnects resumes after it.
func (s *Server) followRunPage(w http.ResponseWriter, r *http.Request) {
	p, ok := s.session(r)
	if !ok {
		http.Error(w, "sign in first", http.StatusUnauthorized)
		return
	}
	if !p.Has(readers...) {
		http.Error(w, fmt.Sprintf("your key's roles (%s) do not allow this view; it needs one of: %s", joinRoles(p.Roles), joinRoles(readers)),
			http.StatusForbidden)
		return
	}
	err := s.followRun(w, r, p, eventFeed{
		recheck: func(r *http.Request) error {
			if p, ok := s.session(r); !ok || !p.Has(readers...) {
				return errSessionEnded
			}
			return nil
		},
		write: func(out io.Writer, es []store.Event) {
			last := es[len(es)-1].Seq
			fmt.Fprintf(out, "id: %d\nevent: change\ndata: %d\n\n", last, last)
		},
	})
	if err != nil {
		ae := classify(err)
		http.Error(w, ae.Message, ae.status)
	}
}
