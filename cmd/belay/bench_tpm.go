package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/model"
)

// The tpm scenario: runs on one provider account whose tokens per minute are
// below their demand, with Belay's shared limit and without.

// Each call of the scenario's model is charged as the runtime projects it:
// its input, as the model counts it, and its output cap.
const (
	tpmInputTokens  = 1000
	tpmOutputTokens = 200
	tpmCallTokens   = tpmInputTokens + tpmOutputTokens
)

// fakeProvider is a provider account that answers 429 above its own tokens
// per minute, over a sliding minute, with a Retry-After.
type fakeProvider struct {
	tpm   float64
	start time.Time

	mu       sync.Mutex
	admitted []time.Time // each admitted call, charged tpmCallTokens
	calls    []tpmCall
}

// tpmCall is one call the provider answered: when, and whether with 429.
type tpmCall struct {
	at      time.Time
	limited bool
}

func (p *fakeProvider) take(now time.Time) (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	minuteAgo := now.Add(-time.Minute)
	i := 0
	for i < len(p.admitted) && !p.admitted[i].After(minuteAgo) {
		i++
	}
	p.admitted = p.admitted[i:]
	if float64((len(p.admitted)+1)*tpmCallTokens) > p.tpm {
		p.calls = append(p.calls, tpmCall{at: now, limited: true})
		// Room comes when the oldest call of the minute leaves it.
		return max(time.Second, p.admitted[0].Add(time.Minute).Sub(now).Round(time.Second)), false
	}
	p.admitted = append(p.admitted, now)
	p.calls = append(p.calls, tpmCall{at: now})
	return 0, true
}

// tpmModel calls the no-op tool at every turn, through the provider.
type tpmModel struct {
	p       *fakeProvider
	latency time.Duration
}

func (m tpmModel) Name() string { return "tpm-bench" }

func (m tpmModel) CountTokens(context.Context, model.Request) (int64, error) {
	return tpmInputTokens, nil
}

func (m tpmModel) Generate(ctx context.Context, req model.Request) (model.Response, error) {
	if wait, ok := m.p.take(time.Now()); !ok {
		return model.Response{}, &model.Error{Class: model.ClassRateLimited, StatusCode: 429, RetryAfter: wait,
			Err: errors.New("429: tokens per minute exceeded")}
	}
	if err := sleepCtx(ctx, m.latency); err != nil {
		return model.Response{}, err
	}
	return model.Response{StopReason: model.StopToolUse, Usage: model.Usage{InputTokens: tpmInputTokens, OutputTokens: tpmOutputTokens},
		Content: []model.Block{{Type: model.TypeToolUse, ID: "call-" + strconv.FormatInt(time.Now().UnixNano(), 36), Name: "noop",
			Input: json.RawMessage(`{}`)}}}, nil
}

// tpmPhase is one half of the tpm scenario.
type tpmPhase struct {
	SharedLimit bool `json:"shared_limit"`
	ModelCalls  int  `json:"model_calls"`
	Answered429 int  `json:"answered_429"`
	// After429 counts the 429s after the first minute (0 expected with the
	// shared limit); AdmittedTPM is the tokens the provider admitted a
	// minute after the first, against the limit.
	After429    int     `json:"answered_429_after_first_minute"`
	AdmittedTPM float64 `json:"admitted_tokens_per_minute_after_first_minute"`
}

// tpmResult is what `belay bench --scenario tpm --json` prints.
type tpmResult struct {
	Scenario string     `json:"scenario"`
	Store    string     `json:"store"`
	Runs     int        `json:"runs"`
	TPM      float64    `json:"tpm_limit"`
	Seconds  float64    `json:"seconds_each"`
	Phases   []tpmPhase `json:"phases"`
}

func (r tpmResult) print(w io.Writer) {
	fmt.Fprintf(w, "belay bench --scenario tpm: %d runs on one account limited to %.0f tokens/min, %.0f s each way, store %s\n\n",
		r.Runs, r.TPM, r.Seconds, r.Store)
	for _, p := range r.Phases {
		name := "without a shared limit"
		if p.SharedLimit {
			name = "with Belay's shared limit"
		}
		fmt.Fprintf(w, "  %-26s %5d calls, %5d answered 429, %5d after the first minute; %.0f tokens/min admitted after it\n",
			name, p.ModelCalls, p.Answered429, p.After429, p.AdmittedTPM)
	}
}

// benchTPM runs the scenario twice, with the limit and without, each on a
// new store for d.
func benchTPM(ctx context.Context, cfg benchConfig, tpm float64, d time.Duration) (tpmResult, error) {
	res := tpmResult{Scenario: "tpm", Runs: cfg.runs, TPM: tpm, Seconds: d.Seconds()}
	for _, shared := range []bool{true, false} {
		c := cfg
		c.schema = ""
		if c.url == "" {
			c.path = cfg.path + map[bool]string{true: "-limited", false: "-unlimited"}[shared]
		}
		kind, phase, err := tpmRun(ctx, c, tpm, d, shared)
		if err != nil {
			return tpmResult{}, err
		}
		res.Store = kind
		res.Phases = append(res.Phases, phase)
	}
	return res, nil
}

func tpmRun(ctx context.Context, cfg benchConfig, tpm float64, d time.Duration, shared bool) (string, tpmPhase, error) {
	s, kind, cleanup, err := openBenchStore(ctx, cfg)
	if err != nil {
		return "", tpmPhase{}, err
	}
	defer cleanup()
	p := &fakeProvider{tpm: tpm}
	agent := benchAgent(1, 0, func() {})
	agent.Name, agent.Model, agent.MaxOutputTokens = "tpm", tpmModel{p: p, latency: cfg.modelLatency}, tpmOutputTokens
	agent.Budget.MaxTurns = 1 << 30 // the runs call until the scenario ends
	if shared {
		agent.Limits = []belay.ProviderLimit{{Name: "account", TokensPerMinute: tpm}}
	}
	rt, err := belay.New(belay.Config{Store: s, Workers: cfg.concurrency, Logger: cfg.log, Agents: []*belay.Agent{agent}})
	if err != nil {
		return "", tpmPhase{}, fmt.Errorf("bench: %w", err)
	}
	for i := range cfg.runs {
		if _, _, err := rt.StartRun(ctx, belay.RunRequest{Agent: "tpm", Input: "tpm run " + strconv.Itoa(i)}); err != nil {
			return "", tpmPhase{}, fmt.Errorf("bench: create runs: %w", err)
		}
	}
	p.start = time.Now()
	if err := rt.Start(ctx); err != nil {
		return "", tpmPhase{}, fmt.Errorf("bench: %w", err)
	}
	err = sleepCtx(ctx, d)
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if stopErr := rt.Stop(stopCtx); stopErr != nil {
		return "", tpmPhase{}, fmt.Errorf("bench: stop runtime: %w", stopErr)
	}
	if err != nil {
		return "", tpmPhase{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	phase := tpmPhase{SharedLimit: shared, ModelCalls: len(p.calls)}
	warm := p.start.Add(time.Minute)
	admittedAfter := 0
	for _, c := range p.calls {
		if c.limited {
			phase.Answered429++
		}
		if c.at.After(warm) {
			if c.limited {
				phase.After429++
			} else {
				admittedAfter++
			}
		}
	}
	if after := d - time.Minute; after > 0 {
		phase.AdmittedTPM = round(float64(admittedAfter*tpmCallTokens)/after.Minutes(), 0)
	}
	return kind, phase, nil
}
