// Package tracing exports what Belay's runtimes record as OpenTelemetry
// spans: a span per step, with the model call (GenAI semantic conventions)
// and each tool call as children, approvals and other decisions as span
// events. What happens while no step is open (a person's decision, an
// approval's expiry, a resume, a migration, a resolved outcome, a cancel)
// is a span of no length of its own, named after the event
// ("belay.approval_expired") and carrying it as its span event. It
// implements belay.Observer: the spans are built from the trace events that
// are the durable record, with their recorded times.
//
// Every span of a run is in one trace whose id is derived from the run id
// (belay.TraceIDs), so a run resumed by another worker, days later, is
// still one trace. Message content is left out unless WithContent is given.
package tracing

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/store"
)

// Exporter turns a runtime's trace events into spans.
type Exporter struct {
	tracer  trace.Tracer
	content bool

	mu    sync.Mutex
	steps map[string]*openStep // by run id
}

var _ belay.Observer = (*Exporter)(nil)

// Option configures an Exporter.
type Option func(*Exporter)

// WithContent records the model's text (its thoughts and answers) on model
// spans. Off by default: content may hold customer data.
func WithContent() Option { return func(e *Exporter) { e.content = true } }

// New returns an exporter that starts spans with tp.
func New(tp trace.TracerProvider, opts ...Option) *Exporter {
	e := &Exporter{tracer: tp.Tracer("github.com/belayrun/belay"), steps: map[string]*openStep{}}
	for _, o := range opts {
		o(e)
	}
	return e
}

// openStep is the step span of a run, open until its checkpoint or stop.
type openStep struct {
	ctx     context.Context
	span    trace.Span
	tools   map[string]time.Time // tool_use id -> tool_call time
	effects map[string]string    // tool_use id -> effect class
	tries   map[string]int       // tool name -> retries in this step
	keys    map[string]string    // tool name -> idempotency key in this step
}

// Checkpoint is not a span: checkpoint latency is a metric.
func (e *Exporter) Checkpoint(belay.ObservedRun, time.Duration) {}

// Event adds what ev records to the run's spans.
func (e *Exporter) Event(run belay.ObservedRun, ev store.Event) {
	var d map[string]any
	_ = json.Unmarshal(ev.Data, &d)
	str := func(k string) string { s, _ := d[k].(string); return s }
	num := func(k string) float64 { f, _ := d[k].(float64); return f }

	e.mu.Lock()
	defer e.mu.Unlock()
	step := e.steps[run.ID]
	start := ev.Time
	if ev.Type == "model_call" {
		start = ev.Time.Add(-time.Duration(num("latency_ms") * float64(time.Millisecond)))
	}
	if step == nil && opensStep(ev.Type) {
		step = e.openStep(run, ev.Step, start)
	}
	if step == nil {
		if betweenSteps(ev.Type) {
			e.between(run, ev, d)
		}
		return
	}
	switch ev.Type {
	case "model_call":
		attrs := []attribute.KeyValue{
			attribute.String("gen_ai.operation.name", "chat"),
			attribute.String("gen_ai.request.model", str("model")),
			attribute.Int64("gen_ai.usage.input_tokens", int64(num("input_tokens"))),
			attribute.Int64("gen_ai.usage.output_tokens", int64(num("output_tokens"))),
			attribute.StringSlice("gen_ai.response.finish_reasons", []string{str("stop_reason")}),
			attribute.Float64("belay.cost_usd", num("cost_usd")),
		}
		if e.content {
			attrs = append(attrs, attribute.String("gen_ai.output.text", str("thought")))
		}
		_, span := e.tracer.Start(step.ctx, "chat "+str("model"), trace.WithTimestamp(start),
			trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
		span.End(trace.WithTimestamp(ev.Time))
	case "tool_call":
		step.tools[str("id")] = ev.Time
		step.effects[str("id")] = str("effect")
	case "tool_retry":
		step.tries[str("tool")]++
	case "intent":
		step.keys[str("tool")] = str("key")
	case "effect_reused", "effect_unknown", "reconcile":
		step.keys[str("tool")] = str("key")
		step.span.AddEvent(ev.Type, trace.WithTimestamp(ev.Time), trace.WithAttributes(
			attribute.String("gen_ai.tool.name", str("tool")), attribute.String("belay.idempotency_key", str("key"))))
	case "tool_result":
		tool := str("tool")
		began, ok := step.tools[str("id")]
		if !ok {
			began = ev.Time
		}
		outcome := "ok"
		if isErr, _ := d["is_error"].(bool); isErr {
			outcome = "error"
		}
		_, span := e.tracer.Start(step.ctx, "execute_tool "+tool, trace.WithTimestamp(began), trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "execute_tool"),
			attribute.String("gen_ai.tool.name", tool),
			attribute.String("gen_ai.tool.call.id", str("id")),
			attribute.String("belay.tool.effect", step.effects[str("id")]),
			attribute.Int("belay.tool.attempts", step.tries[tool]+1),
			attribute.String("belay.tool.outcome", outcome),
			attribute.String("belay.idempotency_key", step.keys[tool]),
		))
		if outcome == "error" {
			span.SetStatus(codes.Error, str("preview"))
		}
		span.End(trace.WithTimestamp(ev.Time))
	case "approval_requested", "approval_decided", "approval_applied", "approval_expired", "loop_detected", "breaker", "verify",
		"resumed", "migrated", "outcome_resolved", "canceled", "model_fallback":
		step.span.AddEvent(ev.Type, trace.WithTimestamp(ev.Time), trace.WithAttributes(eventAttributes(d)...))
	case "checkpoint":
		step.span.End(trace.WithTimestamp(ev.Time))
		delete(e.steps, run.ID)
	case "stop", "released":
		step.span.SetAttributes(attribute.String("belay.run.status", str("status")), attribute.String("belay.stop_reason", str("reason")))
		if status := str("status"); status == string(store.StatusFailed) || status == string(store.StatusEscalated) {
			step.span.SetStatus(codes.Error, str("reason"))
		}
		step.span.End(trace.WithTimestamp(ev.Time))
		delete(e.steps, run.ID)
	}
}

// opensStep reports whether an event can be the first of a step.
func opensStep(typ string) bool {
	switch typ {
	case "claimed", "model_call", "tool_call":
		return true
	}
	return false
}

// betweenSteps reports whether an event may come while no step of its run
// is open: a person's decision or operation, or an approval's expiry.
func betweenSteps(typ string) bool {
	switch typ {
	case "approval_decided", "approval_expired", "resumed", "migrated", "outcome_resolved", "canceled":
		return true
	}
	return false
}

// runContext is the parent of every span of a run: one trace per run,
// whichever process exports the span.
func runContext(runID string) context.Context {
	traceID, spanID := belay.TraceIDs(runID, -1)
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: spanID, TraceFlags: trace.FlagsSampled, Remote: true})
	return trace.ContextWithRemoteSpanContext(context.Background(), parent)
}

func runAttributes(run belay.ObservedRun, step int) trace.SpanStartEventOption {
	return trace.WithAttributes(
		attribute.String("belay.run.id", run.ID),
		attribute.String("belay.tenant", run.Tenant),
		attribute.String("gen_ai.agent.name", run.Agent),
		attribute.Int("belay.step", step),
	)
}

// between records an event that came while no step of its run was open
// (the run waited for a person, or had stopped) as a span of its own, of no
// length, named after the event and carrying it as its span event: a
// step's span has ended by then, and its events cannot change.
func (e *Exporter) between(run belay.ObservedRun, ev store.Event, d map[string]any) {
	_, span := e.tracer.Start(runContext(run.ID), "belay."+ev.Type, trace.WithTimestamp(ev.Time), runAttributes(run, ev.Step))
	span.AddEvent(ev.Type, trace.WithTimestamp(ev.Time), trace.WithAttributes(eventAttributes(d)...))
	span.End(trace.WithTimestamp(ev.Time))
}

func (e *Exporter) openStep(run belay.ObservedRun, step int, at time.Time) *openStep {
	ctx, span := e.tracer.Start(runContext(run.ID), "belay.step", trace.WithTimestamp(at), runAttributes(run, step))
	s := &openStep{ctx: ctx, span: span, tools: map[string]time.Time{}, effects: map[string]string{},
		tries: map[string]int{}, keys: map[string]string{}}
	e.steps[run.ID] = s
	return s
}

// eventAttributes keeps an event's scalar fields, never message content.
func eventAttributes(d map[string]any) []attribute.KeyValue {
	var attrs []attribute.KeyValue
	for k, v := range d {
		switch x := v.(type) {
		case string:
			if k == "args" || k == "summary" || k == "note" {
				continue
			}
			attrs = append(attrs, attribute.String("belay."+k, x))
		case float64:
			attrs = append(attrs, attribute.Float64("belay."+k, x))
		case bool:
			attrs = append(attrs, attribute.Bool("belay."+k, x))
		}
	}
	return attrs
}
