package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/store"
)

// apiHandler serves one authenticated API call.
type apiHandler func(w http.ResponseWriter, r *http.Request, p Principal) error

// api authenticates a request by its bearer key, checks that the key holds
// one of roles and bounds the body before h runs.
func (s *Server) api(h apiHandler, roles ...store.Role) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := s.bearer(r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if !p.Has(roles...) {
			s.fail(w, r, &apiError{status: http.StatusForbidden, Code: "forbidden",
				Message: fmt.Sprintf("this key's roles (%s) do not allow this; it needs one of: %s", joinRoles(p.Roles), joinRoles(roles))})
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBody)
		if err := h(w, r, p); err != nil {
			s.fail(w, r, err)
		}
	})
}

func joinRoles(rs []store.Role) string {
	var out []string
	for _, r := range rs {
		out = append(out, string(r))
	}
	return strings.Join(out, ", ")
}

// fail answers with an error; internal ones are logged with what the client
// does not see.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	ae := classify(err)
	if ae.status >= 500 {
		s.cfg.Logger.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	writeError(w, ae)
}

var (
	readers   = []store.Role{store.RoleOperator, store.RoleApprover}
	operators = []store.Role{store.RoleOperator}
	approvers = []store.Role{store.RoleApprover}
	admins    = []store.Role{store.RoleAdmin}
)

// routeMux is where routes are registered: the server's mux, or a test's
// list of them.
type routeMux interface {
	Handle(pattern string, h http.Handler)
	HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request))
}

func (s *Server) apiRoutes(mux routeMux) {
	mux.HandleFunc("GET /v1/openapi.json", serveOpenAPI)
	mux.Handle("POST /v1/runs", s.api(s.createRun, operators...))
	mux.Handle("GET /v1/runs", s.api(s.listRuns, readers...))
	mux.Handle("GET /v1/runs/{id}", s.api(s.getRun, readers...))
	mux.Handle("GET /v1/runs/{id}/trace", s.api(s.getTrace, readers...))
	mux.Handle("GET /v1/runs/{id}/events", s.api(s.streamEvents, readers...))
	mux.Handle("GET /v1/runs/{id}/effects", s.api(s.getEffects, readers...))
	mux.Handle("GET /v1/runs/{id}/messages", s.api(s.getMessages, readers...))
	mux.Handle("POST /v1/runs/{id}/messages", s.api(s.say, operators...))
	mux.Handle("POST /v1/runs/{id}/signals", s.api(s.signal, operators...))
	mux.Handle("POST /v1/runs/{id}/results/{call}", s.api(s.postResult, readers...))
	mux.Handle("GET /v1/waits", s.api(s.listWaits, readers...))
	mux.Handle("POST /v1/runs/{id}/cancel", s.api(s.cancelRun, operators...))
	mux.Handle("POST /v1/runs/{id}/fork", s.api(s.forkRun, operators...))
	mux.Handle("POST /v1/migrations", s.api(s.migrate, operators...))
	mux.Handle("POST /v1/replays", s.api(s.replay, operators...))
	mux.Handle("GET /v1/schedules", s.api(s.listSchedules, readers...))
	mux.Handle("PUT /v1/schedules/{name}", s.api(s.putSchedule, operators...))
	mux.Handle("DELETE /v1/schedules/{name}", s.api(s.deleteSchedule, operators...))
	mux.Handle("GET /v1/approvals", s.api(s.listApprovals, approvers...))
	mux.Handle("GET /v1/approvals/{id}", s.api(s.getApproval, approvers...))
	mux.Handle("POST /v1/approvals/{id}/decision", s.api(s.decide, approvers...))
	mux.Handle("GET /v1/stats/approvals", s.api(s.approvalStats, readers...))
	mux.Handle("GET /v1/killswitch", s.api(s.getKillSwitch, admins...))
	mux.Handle("PUT /v1/killswitch", s.api(s.putKillSwitch, admins...))
	mux.Handle("GET /v1/keys", s.api(s.listKeys, admins...))
	mux.Handle("POST /v1/keys", s.api(s.createKey, admins...))
	mux.Handle("POST /v1/keys/{id}/revoke", s.api(s.revokeKey, admins...))
	mux.Handle("GET /v1/webhooks", s.api(s.listWebhooks, admins...))
	mux.Handle("POST /v1/webhooks", s.api(s.createWebhook, admins...))
	mux.Handle("POST /v1/webhooks/{id}/disable", s.api(s.disableWebhook, admins...))
	mux.Handle("GET /v1/webhooks/{id}/deliveries", s.api(s.listDeliveries, admins...))
	mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errNotFound("no such endpoint: "+r.Method+" "+r.URL.Path+"; GET /v1/openapi.json lists them"))
	})
}

// --- runs ---

type runRequest struct {
	Agent            string `json:"agent"`
	User             string `json:"user"`
	Input            string `json:"input"`
	DryRun           bool   `json:"dry_run,omitempty"`
	ConcurrencyKey   string `json:"concurrency_key,omitempty"`
	ConcurrencyLimit int    `json:"concurrency_limit,omitempty"`
	Priority         int    `json:"priority,omitempty"`
}

const maxInput = 64 << 10

func (s *Server) createRun(w http.ResponseWriter, r *http.Request, p Principal) error {
	header := r.Header.Get("Idempotency-Key")
	if header == "" {
		return errBadRequest("idempotency_key_required", "send an Idempotency-Key header: one run per (user, key); a retry with the same key returns the same run")
	}
	key, err := parseIdempotencyKey(header)
	if err != nil {
		return err
	}
	var req runRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	switch {
	case req.Agent == "":
		return errBadRequest("invalid_field", "agent is required")
	case req.User == "" || len(req.User) > 200 || !utf8.ValidString(req.User):
		return errBadRequest("invalid_field", "user is required: who the run acts for, at most 200 bytes")
	case strings.TrimSpace(req.Input) == "":
		return errBadRequest("invalid_field", "input is required: what the user asks")
	case len(req.Input) > maxInput || !utf8.ValidString(req.Input):
		return errBadRequest("invalid_field", "input must be UTF-8 text of at most %d bytes", maxInput)
	case len(req.ConcurrencyKey) > 200 || !utf8.ValidString(req.ConcurrencyKey):
		return errBadRequest("invalid_field", "concurrency_key must be UTF-8 text of at most 200 bytes")
	case req.ConcurrencyLimit < 0 || req.ConcurrencyLimit > 10000:
		return errBadRequest("invalid_field", "concurrency_limit must be from 0 (the default, one run at a time) to 10000")
	case req.Priority < -1000 || req.Priority > 1000:
		return errBadRequest("invalid_field", "priority must be from -1000 to 1000 (higher goes first; default 0)")
	}
	if _, ok := s.rt.Agent(req.Agent); !ok {
		return &apiError{status: http.StatusUnprocessableEntity, Code: "unknown_agent",
			Message: fmt.Sprintf("no agent named %q is served here", req.Agent)}
	}
	// Two requests with one key at once: the second waits for nothing and
	// learns the first is in flight. (Across servers the database's unique
	// key makes them one run anyway.)
	slot := p.Tenant + "\x00" + req.User + "\x00" + key
	s.mu.Lock()
	if s.inFlight[slot] {
		s.mu.Unlock()
		return &apiError{status: http.StatusConflict, Code: "request_in_flight",
			Message: "a request with this Idempotency-Key is still being processed; retry in a moment"}
	}
	s.inFlight[slot] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.inFlight, slot)
		s.mu.Unlock()
	}()
	if s.beforeCreate != nil {
		s.beforeCreate()
	}
	run, created, err := s.rt.StartRun(r.Context(), belay.RunRequest{Agent: req.Agent, Tenant: p.Tenant, User: req.User,
		ClientRequestID: key, Input: req.Input, DryRun: req.DryRun, RequestedBy: p.Identity(),
		ConcurrencyKey: req.ConcurrencyKey, ConcurrencyLimit: req.ConcurrencyLimit, Priority: req.Priority})
	if err != nil {
		return err
	}
	if !created {
		if run.Agent != req.Agent || run.Input != req.Input || run.DryRun != req.DryRun {
			return &apiError{status: http.StatusUnprocessableEntity, Code: "idempotency_key_reused",
				Message: "this Idempotency-Key was used for a different request; use a new key for a new run"}
		}
		w.Header().Set("Idempotent-Replayed", "true")
		writeJSON(w, http.StatusOK, s.runView(run))
		return nil
	}
	w.Header().Set("Location", "/v1/runs/"+run.ID)
	writeJSON(w, http.StatusCreated, s.runView(run))
	return nil
}

// runView is a run as the API shows it.
type runView struct {
	ID           string          `json:"id"`
	Agent        string          `json:"agent"`
	AgentVersion string          `json:"agent_version"`
	User         string          `json:"user"`
	RequestedBy  string          `json:"requested_by,omitempty"`
	Status       store.Status    `json:"status"`
	Input        string          `json:"input"`
	DryRun       bool            `json:"dry_run"`
	Steps        int             `json:"steps"`
	InputTokens  int64           `json:"input_tokens"`
	OutputTokens int64           `json:"output_tokens"`
	ModelCalls   int64           `json:"model_calls"`
	CostUSD      float64         `json:"cost_usd"`
	Plan         json.RawMessage `json:"plan,omitempty"`
	StopReason   string          `json:"stop_reason,omitempty"`
	StopDetail   string          `json:"stop_detail,omitempty"`
	Final        string          `json:"final,omitempty"`
	Escalation   json.RawMessage `json:"escalation,omitempty"`
	CreatedAt    time.Time       `json:"created_at"`
	UpdatedAt    time.Time       `json:"updated_at"`
	// ConcurrencyKey and Priority are the run's place in the queue.
	ConcurrencyKey   string `json:"concurrency_key,omitempty"`
	ConcurrencyLimit int    `json:"concurrency_limit,omitempty"`
	Priority         int    `json:"priority,omitempty"`
}

func (s *Server) runView(r store.Run) runView {
	v := runView{ID: r.ID, Agent: r.Agent, AgentVersion: r.AgentVersion, User: r.User, RequestedBy: r.RequestedBy,
		Status: r.Status, Input: r.Input, DryRun: r.DryRun, Steps: r.Step, InputTokens: r.InputTokens,
		OutputTokens: r.OutputTokens, ModelCalls: r.ModelCalls, CostUSD: model.Nanodollars(r.CostNanoUSD).Dollars(),
		Plan: validJSON(r.Plan), StopReason: r.StopReason, StopDetail: r.StopDetail, Final: r.Final,
		Escalation: validJSON(r.Escalation), CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		ConcurrencyKey: r.ConcurrencyKey, Priority: r.Priority}
	if r.ConcurrencyKey != "" {
		v.ConcurrencyLimit = r.ConcurrencyLimit
	}
	return v
}

func validJSON(b []byte) json.RawMessage {
	if len(b) == 0 || !json.Valid(b) {
		return nil
	}
	return b
}

var statuses = []store.Status{store.StatusQueued, store.StatusRunning, store.StatusWaitingApproval, store.StatusWaitingInput,
	store.StatusPaused, store.StatusDone, store.StatusFailed, store.StatusEscalated, store.StatusCanceled}

func queryLimit(q url.Values, def, max int) (int, error) {
	v := q.Get("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max {
		return 0, errBadRequest("invalid_query", "limit must be a number from 1 to %d", max)
	}
	return n, nil
}

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request, p Principal) error {
	q := r.URL.Query()
	for k := range q {
		if !slices.Contains([]string{"status", "agent", "since", "after", "limit", "order"}, k) {
			return errBadRequest("invalid_query", "unknown query parameter %q; filters are status, agent, since, after, limit, order", k)
		}
	}
	params := store.ListRunsParams{Tenant: p.Tenant, Agent: q.Get("agent"), After: q.Get("after")}
	switch q.Get("order") {
	case "", "oldest":
	case "newest":
		params.Newest = true
	default:
		return errBadRequest("invalid_query", "order must be oldest (the default) or newest")
	}
	if st := q.Get("status"); st != "" {
		if !slices.Contains(statuses, store.Status(st)) {
			return errBadRequest("invalid_query", "status %q: want one of queued, running, waiting_approval, waiting_input, paused, done, failed, escalated, canceled", st)
		}
		params.Status = store.Status(st)
	}
	if since := q.Get("since"); since != "" {
		t, err := time.Parse(time.RFC3339, since)
		if err != nil {
			return errBadRequest("invalid_query", "since must be an RFC 3339 time, like 2026-11-30T08:00:00Z")
		}
		params.Since = t
	}
	limit, err := queryLimit(q, 50, 500)
	if err != nil {
		return err
	}
	// One more than the page tells whether there is a next page.
	params.Limit = limit + 1
	runs, err := s.st.ListRuns(r.Context(), params)
	if err != nil {
		return err
	}
	page := struct {
		Runs []runView `json:"runs"`
		Next string    `json:"next,omitempty"`
	}{Runs: []runView{}}
	if len(runs) > limit {
		runs = runs[:limit]
		page.Next = "/v1/runs?" + nextQuery(q, runs[limit-1].ID)
	}
	for _, run := range runs {
		page.Runs = append(page.Runs, s.runView(run))
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func nextQuery(q url.Values, after string) string {
	next := url.Values{}
	for k, v := range q {
		next[k] = v
	}
	next.Set("after", after)
	return next.Encode()
}

// tenantRun returns a run of the principal's tenant; another tenant's run
// is not found, exactly as a run that does not exist.
func (s *Server) tenantRun(r *http.Request, p Principal) (store.Run, error) {
	return s.st.GetRun(r.Context(), p.Tenant, r.PathValue("id"))
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request, p Principal) error {
	run, err := s.tenantRun(r, p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.runView(run))
	return nil
}

// getTrace streams the run's events as JSONL, one event a line.
func (s *Server) getTrace(w http.ResponseWriter, r *http.Request, p Principal) error {
	run, err := s.tenantRun(r, p)
	if err != nil {
		return err
	}
	events, err := s.st.Events(r.Context(), run.ID)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	bw := bufio.NewWriterSize(w, 32<<10)
	for _, e := range events {
		line, err := store.TraceLine(e)
		if err != nil {
			// The head is sent; a bad row ends the stream where it is.
			s.cfg.Logger.Error("trace line", "run", run.ID, "seq", e.Seq, "err", err)
			break
		}
		bw.Write(line)
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

type effectView struct {
	Key       string            `json:"key"`
	Tool      string            `json:"tool"`
	State     store.EffectState `json:"state"`
	Args      json.RawMessage   `json:"args"`
	Result    json.RawMessage   `json:"result,omitempty"`
	Step      int               `json:"step"`
	Attempts  int               `json:"attempts"`
	CreatedAt time.Time         `json:"created_at"`
	UpdatedAt time.Time         `json:"updated_at"`
}

func (s *Server) effectViews(run store.Run, effects []store.Effect) []effectView {
	out := []effectView{}
	for _, e := range effects {
		out = append(out, effectView{Key: e.Key, Tool: e.Tool, State: e.State,
			Args: s.rt.RedactRunArgs(run, e.Tool, validJSON(e.Args)), Result: validJSON(e.Result),
			Step: e.Step, Attempts: e.Attempts, CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt})
	}
	return out
}

func (s *Server) getEffects(w http.ResponseWriter, r *http.Request, p Principal) error {
	run, err := s.tenantRun(r, p)
	if err != nil {
		return err
	}
	effects, err := s.st.Effects(r.Context(), p.Tenant, run.ID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"effects": s.effectViews(run, effects)})
	return nil
}

type messageView struct {
	Seq     int           `json:"seq"`
	Step    int           `json:"step"`
	Role    string        `json:"role"`
	Content []model.Block `json:"content"`
}

// messages returns a run's conversation with sensitive arguments redacted.
func (s *Server) messages(r *http.Request, run store.Run) ([]messageView, error) {
	rows, err := s.st.Messages(r.Context(), run.ID)
	if err != nil {
		return nil, err
	}
	out := []messageView{}
	for _, m := range rows {
		blocks, err := model.DecodeBlocks(m.Content)
		if err != nil {
			return nil, fmt.Errorf("message %d of run %s: %w", m.Seq, run.ID, err)
		}
		out = append(out, messageView{Seq: m.Seq, Step: m.Step, Role: m.Role, Content: s.rt.RedactRunBlocks(run, blocks)})
	}
	return out, nil
}

func (s *Server) getMessages(w http.ResponseWriter, r *http.Request, p Principal) error {
	run, err := s.tenantRun(r, p)
	if err != nil {
		return err
	}
	msgs, err := s.messages(r, run)
	if err != nil {
		return err
	}
	out := make([]messageWire, 0, len(msgs))
	for _, m := range msgs {
		blocks := make([]any, len(m.Content))
		for i, b := range m.Content {
			blocks[i] = blockWire(b)
		}
		out = append(out, messageWire{Seq: m.Seq, Step: m.Step, Role: m.Role, Content: blocks})
	}
	writeJSON(w, http.StatusOK, map[string]any{"messages": out})
	return nil
}

// messageWire is a message as the API shows it: its blocks in the shape
// the providers and belay show --json give them, with snake_case names.
type messageWire struct {
	Seq     int    `json:"seq"`
	Step    int    `json:"step"`
	Role    string `json:"role"`
	Content []any  `json:"content"`
}

// blockWire shows a content block with the fields of its type; a block of
// a type Belay does not model is its provider's JSON object as it was.
func blockWire(b model.Block) any {
	switch b.Type {
	case model.TypeText:
		return struct {
			Type model.BlockType `json:"type"`
			Text string          `json:"text"`
		}{b.Type, b.Text}
	case model.TypeToolUse:
		input := validJSON(b.Input)
		if input == nil {
			input = json.RawMessage("{}")
		}
		return struct {
			Type  model.BlockType `json:"type"`
			ID    string          `json:"id"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		}{b.Type, b.ID, b.Name, input}
	case model.TypeToolResult:
		return struct {
			Type      model.BlockType `json:"type"`
			ToolUseID string          `json:"tool_use_id"`
			Content   string          `json:"content"`
			IsError   bool            `json:"is_error"`
		}{b.Type, b.ToolUseID, b.Content, b.IsError}
	case model.TypeThinking:
		return struct {
			Type      model.BlockType `json:"type"`
			Thinking  string          `json:"thinking"`
			Signature string          `json:"signature"`
		}{b.Type, b.Thinking, b.Signature}
	}
	if raw := validJSON(b.Raw); raw != nil {
		return raw
	}
	return struct {
		Type model.BlockType `json:"type"`
	}{b.Type}
}

type noteRequest struct {
	Note string `json:"note"`
}

func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request, p Principal) error {
	var req noteRequest
	if r.ContentLength != 0 {
		if err := decodeBody(r, &req); err != nil {
			return err
		}
	}
	if len(req.Note) > 2000 {
		return errBadRequest("invalid_field", "note is at most 2000 bytes")
	}
	run, err := s.rt.Operator().Cancel(r.Context(), p.Tenant, r.PathValue("id"), p.Identity(), req.Note)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.runView(run))
	return nil
}
