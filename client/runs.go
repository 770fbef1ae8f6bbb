package client

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"iter"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// RunStatus is where a run is in its life.
type RunStatus string

const (
	StatusQueued          RunStatus = "queued"
	StatusRunning         RunStatus = "running"
	StatusWaitingApproval RunStatus = "waiting_approval"
	StatusWaitingInput    RunStatus = "waiting_input"
	StatusPaused          RunStatus = "paused"
	StatusDone            RunStatus = "done"
	StatusFailed          RunStatus = "failed"
	StatusEscalated       RunStatus = "escalated"
	StatusCanceled        RunStatus = "canceled"
)

// Ended reports whether the status is terminal: the run does nothing more.
func (s RunStatus) Ended() bool {
	switch s {
	case StatusDone, StatusFailed, StatusEscalated, StatusCanceled:
		return true
	}
	return false
}

// Run is a run as the API shows it.
type Run struct {
	ID           string    `json:"id"`
	Agent        string    `json:"agent"`
	AgentVersion string    `json:"agent_version"`
	User         string    `json:"user"`
	RequestedBy  string    `json:"requested_by,omitempty"`
	Status       RunStatus `json:"status"`
	Input        string    `json:"input"`
	DryRun       bool      `json:"dry_run"`
	Steps        int       `json:"steps"`
	InputTokens  int64     `json:"input_tokens"`
	OutputTokens int64     `json:"output_tokens"`
	ModelCalls   int64     `json:"model_calls"`
	CostUSD      float64   `json:"cost_usd"`
	// Plan is the agent's plan as the run recorded it, if any.
	Plan       json.RawMessage `json:"plan,omitempty"`
	StopReason string          `json:"stop_reason,omitempty"`
	StopDetail string          `json:"stop_detail,omitempty"`
	// Final is the run's answer, once it has one.
	Final string `json:"final,omitempty"`
	// Escalation is the packet of an escalated run.
	Escalation json.RawMessage `json:"escalation,omitempty"`
	CreatedAt  time.Time       `json:"created_at"`
	UpdatedAt  time.Time       `json:"updated_at"`
	// ConcurrencyKey, ConcurrencyLimit and Priority are as the run was
	// started with them.
	ConcurrencyKey   string `json:"concurrency_key,omitempty"`
	ConcurrencyLimit int    `json:"concurrency_limit,omitempty"`
	Priority         int    `json:"priority,omitempty"`
}

// RunRequest starts a run.
type RunRequest struct {
	// Agent is the name of an agent the server serves.
	Agent string `json:"agent"`
	// User is who the run acts for.
	User string `json:"user"`
	// Input is what the user asks.
	Input string `json:"input"`
	// DryRun runs without side effects.
	DryRun bool `json:"dry_run,omitempty"`
	// ConcurrencyKey, if set, names what the run acts on (a customer, an
	// order): at most ConcurrencyLimit (0 means 1) runs of the tenant with
	// the key are in a step at once; the others stay queued.
	ConcurrencyKey   string `json:"concurrency_key,omitempty"`
	ConcurrencyLimit int    `json:"concurrency_limit,omitempty"`
	// Priority orders the tenant's due runs: higher first.
	Priority int `json:"priority,omitempty"`
	// IdempotencyKey names the run: one run per (tenant, user, key). Give
	// your own (a ticket's id) to make a create safe to repeat across
	// processes; when empty a random one is made. Either way it is kept
	// across the retries of the call.
	IdempotencyKey string `json:"-"`
}

// CreatedRun is the answer to CreateRun.
type CreatedRun struct {
	Run
	// Replayed is true when the key named a run created earlier with the
	// same request: nothing new started.
	Replayed bool
	// IdempotencyKey is the key the run was created under.
	IdempotencyKey string
}

// CreateRun starts a run, or returns the run its idempotency key already
// names. It is retried with the same key after a dropped connection, a 5xx
// or 409 request_in_flight, so every attempt names the one run. The same
// key used for another request answers ErrIdempotencyKeyReused.
func (c *Client) CreateRun(ctx context.Context, req RunRequest) (CreatedRun, error) {
	key := req.IdempotencyKey
	if key == "" {
		key = rand.Text()
	}
	r := request{method: http.MethodPost, path: "/v1/runs", body: req, retry: create,
		header: http.Header{"Idempotency-Key": {key}}}
	res, err := c.send(ctx, r)
	if err != nil {
		return CreatedRun{}, err
	}
	defer res.Body.Close()
	out := CreatedRun{Replayed: res.Header.Get("Idempotent-Replayed") == "true", IdempotencyKey: key}
	if err := json.NewDecoder(res.Body).Decode(&out.Run); err != nil {
		return CreatedRun{}, fmt.Errorf("client: read the created run: %w", err)
	}
	return out, nil
}

// GetRun returns a run of the key's tenant.
func (c *Client) GetRun(ctx context.Context, id string) (Run, error) {
	var run Run
	err := c.call(ctx, get("/v1/runs/"+escape(id), nil), &run)
	return run, err
}

// RunFilter selects the runs Runs lists. The zero value lists every run,
// oldest first.
type RunFilter struct {
	Status RunStatus
	Agent  string
	// Since lists the runs created at or after it.
	Since time.Time
	// Newest lists the newest first.
	Newest bool
	// PageSize is how many runs one request reads, 1 to 500. Default 50.
	PageSize int
}

// Runs lists the runs of the key's tenant a page at a time, as the
// iteration needs them. An error ends the iteration.
func (c *Client) Runs(ctx context.Context, f RunFilter) iter.Seq2[Run, error] {
	return func(yield func(Run, error) bool) {
		q := url.Values{}
		if f.Status != "" {
			q.Set("status", string(f.Status))
		}
		if f.Agent != "" {
			q.Set("agent", f.Agent)
		}
		if !f.Since.IsZero() {
			q.Set("since", f.Since.UTC().Format(time.RFC3339))
		}
		if f.Newest {
			q.Set("order", "newest")
		}
		if f.PageSize > 0 {
			q.Set("limit", strconv.Itoa(f.PageSize))
		}
		for {
			var page struct {
				Runs []Run  `json:"runs"`
				Next string `json:"next"`
			}
			if err := c.call(ctx, get("/v1/runs", q), &page); err != nil {
				yield(Run{}, err)
				return
			}
			for _, run := range page.Runs {
				if !yield(run, nil) {
					return
				}
			}
			if page.Next == "" {
				return
			}
			// next is the server's path of the next page; its query is
			// kept and sent under this client's base URL, which may have
			// a prefix the server does not know of.
			next, err := url.Parse(page.Next)
			if err != nil {
				yield(Run{}, fmt.Errorf("client: the next page %q: %w", page.Next, err))
				return
			}
			q = next.Query()
		}
	}
}

// TraceEvent is one event of a run's trace.
type TraceEvent struct {
	Time  time.Time
	RunID string
	Step  int
	Type  string
	// Fields are the event's own fields (sensitive arguments redacted); a
	// field named like the envelope is named data_<name>.
	Fields map[string]json.RawMessage
}

func (e *TraceEvent) UnmarshalJSON(b []byte) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return err
	}
	var ts float64
	for name, v := range map[string]any{"ts": &ts, "run_id": &e.RunID, "step": &e.Step, "type": &e.Type} {
		if raw, ok := fields[name]; ok {
			if err := json.Unmarshal(raw, v); err != nil {
				return fmt.Errorf("trace field %s: %w", name, err)
			}
			delete(fields, name)
		}
	}
	sec, frac := math.Modf(ts)
	e.Time = time.Unix(int64(sec), int64(math.Round(frac*1e6))*1e3).UTC()
	e.Fields = fields
	return nil
}

// Trace reads a run's trace, one event a line as the server streams it.
// It is not retried once the first event has arrived.
func (c *Client) Trace(ctx context.Context, runID string) iter.Seq2[TraceEvent, error] {
	return func(yield func(TraceEvent, error) bool) {
		res, err := c.send(ctx, get("/v1/runs/"+escape(runID)+"/trace", nil))
		if err != nil {
			yield(TraceEvent{}, err)
			return
		}
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(nil, 16<<20)
		for n := 1; sc.Scan(); n++ {
			var e TraceEvent
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				yield(TraceEvent{}, fmt.Errorf("client: trace of %s, line %d: %w", runID, n, err))
				return
			}
			if !yield(e, nil) {
				return
			}
		}
		if err := sc.Err(); err != nil {
			yield(TraceEvent{}, fmt.Errorf("client: trace of %s: %w", runID, err))
		}
	}
}

// Effect is a side effect of a run in the idempotency ledger.
type Effect struct {
	Key       string          `json:"key"`
	Tool      string          `json:"tool"`
	State     string          `json:"state"`
	Args      json.RawMessage `json:"args"`
	Result    json.RawMessage `json:"result,omitempty"`
	Step      int             `json:"step"`
	Attempts  int             `json:"attempts"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
}

// Effects returns a run's side effects.
func (c *Client) Effects(ctx context.Context, runID string) ([]Effect, error) {
	var out struct {
		Effects []Effect `json:"effects"`
	}
	err := c.call(ctx, get("/v1/runs/"+escape(runID)+"/effects", nil), &out)
	return out.Effects, err
}

// Message is one message of a run's conversation with its model.
type Message struct {
	Seq     int     `json:"seq"`
	Step    int     `json:"step"`
	Role    string  `json:"role"`
	Content []Block `json:"content"`
}

// Block is one content block of a message; which fields it has depends on
// its Type.
type Block struct {
	Type string `json:"type"`
	// Text of a text block.
	Text string `json:"text,omitempty"`
	// ID, Name and Input of a tool_use block.
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// ToolUseID, Content and IsError of a tool_result block.
	ToolUseID string `json:"tool_use_id,omitempty"`
	Content   string `json:"content,omitempty"`
	IsError   bool   `json:"is_error,omitempty"`
	// Thinking and Signature of a thinking block.
	Thinking  string `json:"thinking,omitempty"`
	Signature string `json:"signature,omitempty"`
	// Raw is the block's whole JSON object as the server sent it: the
	// fields of a provider's own block types are there.
	Raw json.RawMessage `json:"-"`
}

func (b *Block) UnmarshalJSON(data []byte) error {
	type plain Block
	if err := json.Unmarshal(data, (*plain)(b)); err != nil {
		return err
	}
	b.Raw = append(json.RawMessage(nil), data...)
	return nil
}

// Messages returns a run's messages, sensitive arguments redacted.
func (c *Client) Messages(ctx context.Context, runID string) ([]Message, error) {
	var out struct {
		Messages []Message `json:"messages"`
	}
	err := c.call(ctx, get("/v1/runs/"+escape(runID)+"/messages", nil), &out)
	return out.Messages, err
}

// CancelRun cancels a run: its pending approvals are rejected and its
// worker's next write is refused. note says why. A run that has ended
// answers ErrWrongStatus; the call is not retried, since a second cancel
// would answer that too.
func (c *Client) CancelRun(ctx context.Context, runID, note string) (Run, error) {
	var run Run
	body := struct {
		Note string `json:"note,omitempty"`
	}{note}
	err := c.call(ctx, post("/v1/runs/"+escape(runID)+"/cancel", body), &run)
	return run, err
}
