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
// still one trace. The spans' own ids are derived too: a step's span is a
// root of the run's trace, and its model and tool spans its children; a
// tool span's id is belay.ToolSpanID, the one an MCP server is told in the
// call's traceparent, so the server's spans join the trace under the call
// that made them. Every span's parent is exported. Message content is left
// out unless WithContent is given.
package tracing

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/store"
)

// Exporter turns a runtime's trace events into spans.
type Exporter struct {
	tracer  trace.Tracer
	content bool
	// tp is the exporter's own provider (NewExporter), which gives every
	// span the id the exporter chose; nil for one over a caller's (New).
	tp *sdktrace.TracerProvider

	mu    sync.Mutex
	steps map[string]*openStep // by run id
	// epochs is the lease epoch of each run's latest claim: a step run
	// again by another worker is another span.
	epochs map[string]int64
}

var _ belay.Observer = (*Exporter)(nil)

// Option configures an Exporter.
type Option func(*Exporter)

// WithContent records the model's text (its thoughts and answers) on model
// spans. Off by default: content may hold customer data.
func WithContent() Option { return func(e *Exporter) { e.content = true } }

// NewExporter returns an exporter that hands the spans it builds to sp: a
// batch processor over an OTLP exporter (sdktrace.NewBatchSpanProcessor), a
// test's recorder. Call Shutdown to flush it.
func NewExporter(sp sdktrace.SpanProcessor, opts ...Option) *Exporter {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sp), sdktrace.WithIDGenerator(chosenIDs{}),
		sdktrace.WithSampler(sdktrace.AlwaysSample()))
	e := New(tp, opts...)
	e.tp = tp
	return e
}

// New returns an exporter that starts spans with tp, which gives them ids
// of its own.
//
// Deprecated: a step's span then names a parent that is never exported,
// and an MCP server's traceparent names no exported span; use NewExporter.
func New(tp trace.TracerProvider, opts ...Option) *Exporter {
	e := &Exporter{tracer: tp.Tracer("github.com/belayrun/belay"), steps: map[string]*openStep{}, epochs: map[string]int64{}}
	for _, o := range opts {
		o(e)
	}
	return e
}

// Shutdown ends the spans of the exporter's own provider and flushes them.
// It does nothing for an exporter made by New.
func (e *Exporter) Shutdown(ctx context.Context) error {
	if e.tp == nil {
		return nil
	}
	return e.tp.Shutdown(ctx)
}

// idsKey carries the ids the exporter chose for the span it starts with
// the context.
type idsKey struct{}

type spanIDs struct {
	trace trace.TraceID
	span  trace.SpanID
}

// withIDs is ctx with the ids of the next span started with it.
func withIDs(ctx context.Context, traceID [16]byte, spanID [8]byte) context.Context {
	return context.WithValue(ctx, idsKey{}, spanIDs{trace: traceID, span: spanID})
}

// chosenIDs is the provider's IDGenerator: it gives each span the ids the
// exporter put in its context, and random ones to any other.
type chosenIDs struct{}

func (chosenIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if ids, ok := ctx.Value(idsKey{}).(spanIDs); ok {
		return ids.trace, ids.span
	}
	var t trace.TraceID
	var s trace.SpanID
	_, _ = rand.Read(t[:])
	_, _ = rand.Read(s[:])
	return t, s
}

func (chosenIDs) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if ids, ok := ctx.Value(idsKey{}).(spanIDs); ok {
		return ids.span
	}
	var s trace.SpanID
	_, _ = rand.Read(s[:])
	return s
}

// derivedSpanID is a span id from what names the span, never all zeros.
func derivedSpanID(parts ...string) [8]byte {
	var id [8]byte
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	copy(id[:], h[:8])
	if id == [8]byte{} {
		id[7] = 1
	}
	return id
}

// openStep is the step span of a run, open until its checkpoint or stop.
type openStep struct {
	ctx     context.Context
	trace   [16]byte
	epoch   int64
	span    trace.Span
	tools   map[string]time.Time // tool_use id -> tool_call time
	effects map[string]string    // tool_use id -> effect class
	tries   map[string]int       // tool name -> retries in this step
	keys    map[string]string    // tool name -> idempotency key in this step
}

// Checkpoint is not a span: checkpoint latency is a metric.
func (e *Exporter) Checkpoint(belay.ObservedRun, time.Duration) {}

// Event adds what ev records to the run's spans. The kinds a span is built
// from are decoded into the catalogue's types; the others become span
// events carrying their fields.
func (e *Exporter) Event(run belay.ObservedRun, ev store.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if ev.Type == store.EventClaimed {
		d, _ := store.DecodeEvent[store.ClaimedData](ev)
		e.epochs[run.ID] = d.Epoch
	}
	step := e.steps[run.ID]
	start := ev.Time
	var call store.ModelCallData
	if ev.Type == store.EventModelCall {
		call, _ = store.DecodeEvent[store.ModelCallData](ev)
		start = ev.Time.Add(-time.Duration(call.LatencyMS * float64(time.Millisecond)))
	}
	if step == nil && opensStep(ev.Type) {
		step = e.openStep(run, ev.Step, start)
	}
	if step == nil {
		if betweenSteps(ev.Type) {
			e.between(run, ev)
		}
		return
	}
	switch ev.Type {
	case store.EventModelCall:
		attrs := []attribute.KeyValue{
			attribute.String("gen_ai.operation.name", "chat"),
			attribute.String("gen_ai.request.model", call.Model),
			attribute.Int64("gen_ai.usage.input_tokens", call.InputTokens),
			attribute.Int64("gen_ai.usage.output_tokens", call.OutputTokens),
			attribute.StringSlice("gen_ai.response.finish_reasons", []string{call.StopReason}),
			attribute.Float64("belay.cost_usd", call.CostUSD),
		}
		if e.content {
			attrs = append(attrs, attribute.String("gen_ai.output.text", call.Thought))
		}
		ctx := withIDs(step.ctx, step.trace, derivedSpanID("belay model", run.ID, strconv.Itoa(ev.Step), strconv.FormatInt(step.epoch, 10)))
		_, span := e.tracer.Start(ctx, "chat "+call.Model, trace.WithTimestamp(start),
			trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
		span.End(trace.WithTimestamp(ev.Time))
	case store.EventToolCall:
		d, _ := store.DecodeEvent[store.ToolCallData](ev)
		step.tools[d.ID] = ev.Time
		step.effects[d.ID] = d.Effect
	case store.EventToolRetry:
		d, _ := store.DecodeEvent[store.ToolRetryData](ev)
		step.tries[d.Tool]++
	case store.EventIntent:
		d, _ := store.DecodeEvent[store.IntentData](ev)
		step.keys[d.Tool] = d.Key
	case store.EventEffectReused, store.EventEffectUnknown, store.EventReconcile, store.EventEffectInFlight:
		d, _ := store.DecodeEvent[store.EffectData](ev)
		step.keys[d.Tool] = d.Key
		step.span.AddEvent(ev.Type, trace.WithTimestamp(ev.Time), trace.WithAttributes(
			attribute.String("gen_ai.tool.name", d.Tool), attribute.String("belay.idempotency_key", d.Key)))
	case store.EventToolResult:
		d, _ := store.DecodeEvent[store.ToolResultData](ev)
		began, ok := step.tools[d.ID]
		if !ok {
			began = ev.Time
		}
		outcome := "ok"
		if d.IsError {
			outcome = "error"
		}
		ctx := withIDs(step.ctx, step.trace, belay.ToolSpanID(run.ID, ev.Step, d.ID, step.epoch))
		_, span := e.tracer.Start(ctx, "execute_tool "+d.Tool, trace.WithTimestamp(began), trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "execute_tool"),
			attribute.String("gen_ai.tool.name", d.Tool),
			attribute.String("gen_ai.tool.call.id", d.ID),
			attribute.String("belay.tool.effect", step.effects[d.ID]),
			attribute.Int("belay.tool.attempts", step.tries[d.Tool]+1),
			attribute.String("belay.tool.outcome", outcome),
			attribute.String("belay.idempotency_key", step.keys[d.Tool]),
		))
		if outcome == "error" {
			span.SetStatus(codes.Error, d.Preview)
		}
		span.End(trace.WithTimestamp(ev.Time))
	case store.EventApprovalRequested, store.EventApprovalDecided, store.EventApprovalApplied, store.EventApprovalExpired,
		store.EventLoopDetected, store.EventBreaker, store.EventVerify, store.EventResumed, store.EventMigrated,
		store.EventOutcomeResolved, store.EventCanceled, store.EventModelFallback:
		step.span.AddEvent(ev.Type, trace.WithTimestamp(ev.Time), trace.WithAttributes(eventAttributes(ev)...))
	case store.EventCheckpoint:
		step.span.End(trace.WithTimestamp(ev.Time))
		delete(e.steps, run.ID)
	case store.EventStop, store.EventReleased:
		// The run's next execution starts with a claim, which names its
		// epoch again.
		delete(e.epochs, run.ID)
		d, _ := store.DecodeEvent[store.StopData](ev)
		step.span.SetAttributes(attribute.String("belay.run.status", string(d.Status)), attribute.String("belay.stop_reason", d.Reason))
		if d.Status == store.StatusFailed || d.Status == store.StatusEscalated {
			step.span.SetStatus(codes.Error, d.Reason)
		}
		step.span.End(trace.WithTimestamp(ev.Time))
		delete(e.steps, run.ID)
	}
}

// opensStep reports whether an event can be the first of a step.
func opensStep(typ string) bool {
	switch typ {
	case store.EventClaimed, store.EventModelCall, store.EventToolCall:
		return true
	}
	return false
}

// betweenSteps reports whether an event may come while no step of its run
// is open: a person's decision or operation, or an approval's expiry.
func betweenSteps(typ string) bool {
	switch typ {
	case store.EventApprovalDecided, store.EventApprovalExpired, store.EventResumed, store.EventMigrated,
		store.EventOutcomeResolved, store.EventCanceled:
		return true
	}
	return false
}

// root is the context and option that start a root span of the run's
// trace with id spanID. Over a caller's provider (New), whose ids are its
// own, the span is the child of a remote parent that names the run's trace
// instead, and that parent is never exported.
func (e *Exporter) root(runID string, spanID [8]byte) (context.Context, trace.SpanStartOption) {
	traceID, parentID := belay.TraceIDs(runID, -1)
	if e.tp != nil {
		return withIDs(context.Background(), traceID, spanID), trace.WithNewRoot()
	}
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: parentID, TraceFlags: trace.FlagsSampled, Remote: true})
	return trace.ContextWithRemoteSpanContext(context.Background(), parent), trace.WithAttributes()
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
func (e *Exporter) between(run belay.ObservedRun, ev store.Event) {
	ctx, root := e.root(run.ID, derivedSpanID("belay between", run.ID, ev.Type, strconv.FormatInt(ev.Seq, 10), ev.Time.String()))
	_, span := e.tracer.Start(ctx, "belay."+ev.Type, root, trace.WithTimestamp(ev.Time), runAttributes(run, ev.Step))
	span.AddEvent(ev.Type, trace.WithTimestamp(ev.Time), trace.WithAttributes(eventAttributes(ev)...))
	span.End(trace.WithTimestamp(ev.Time))
}

func (e *Exporter) openStep(run belay.ObservedRun, step int, at time.Time) *openStep {
	traceID, _ := belay.TraceIDs(run.ID, step)
	epoch := e.epochs[run.ID]
	ctx, root := e.root(run.ID, derivedSpanID("belay step", run.ID, strconv.Itoa(step), strconv.FormatInt(epoch, 10)))
	ctx, span := e.tracer.Start(ctx, "belay.step", root, trace.WithTimestamp(at), runAttributes(run, step))
	s := &openStep{ctx: ctx, trace: traceID, epoch: epoch, span: span, tools: map[string]time.Time{}, effects: map[string]string{},
		tries: map[string]int{}, keys: map[string]string{}}
	e.steps[run.ID] = s
	return s
}

// eventAttributes keeps an event's scalar fields, never message content:
// whatever kind it is, its fields as the trace has them.
func eventAttributes(ev store.Event) []attribute.KeyValue {
	var d map[string]any
	_ = json.Unmarshal(ev.Data, &d)
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
