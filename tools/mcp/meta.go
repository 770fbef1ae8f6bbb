package mcp

import (
	"context"
	"encoding/hex"

	"go.opentelemetry.io/otel/propagation"

	"github.com/belayrun/belay"
)

// Keys Belay sets in the _meta of every tools/call request.
const (
	// MetaTraceparent and MetaTracestate carry the W3C trace context of the
	// step that makes the call, as the MCP convention for OpenTelemetry has
	// it, so a server's spans join the run's trace.
	MetaTraceparent = "traceparent"
	MetaTracestate  = "tracestate"
	// MetaIdempotencyKey carries the call's idempotency key (side-effecting
	// tools only). A server that deduplicates by it lets Belay retry a call
	// whose outcome was lost; declare that with ToolConfig.HonorsKey.
	MetaIdempotencyKey = "belay/idempotency_key"
)

// requestMeta builds the _meta of a tools/call. The trace context is the
// OpenTelemetry span in ctx if there is one; otherwise it is derived from
// the call Belay is serving, so that every call names its run and step even
// with tracing off.
func requestMeta(ctx context.Context) map[string]any {
	meta := map[string]any{}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	ci, hasCall := belay.CallInfoFrom(ctx)
	if tp := carrier.Get(MetaTraceparent); tp != "" {
		meta[MetaTraceparent] = tp
		if ts := carrier.Get(MetaTracestate); ts != "" {
			meta[MetaTracestate] = ts
		}
	} else if hasCall && ci.RunID != "" {
		meta[MetaTraceparent] = traceparent(ci)
	}
	if hasCall && ci.IdempotencyKey != "" {
		meta[MetaIdempotencyKey] = ci.IdempotencyKey
	}
	if len(meta) == 0 {
		return nil
	}
	return meta
}

// traceparent derives a W3C traceparent from a call: the trace id is the
// run's (belay.TraceIDs) and the span id the call's (belay.ToolSpanID), the
// ids the tracing package exports the run's spans under, so the server's
// spans join the run's trace as children of the call that made them. The
// same call under one lease gets the same span id in every attempt.
// Sampled, since nothing here decides otherwise.
func traceparent(ci belay.CallInfo) string {
	trace, _ := belay.TraceIDs(ci.RunID, ci.Step)
	span := belay.ToolSpanID(ci.RunID, ci.Step, ci.ToolUseID, ci.FencingToken)
	traceID := trace[:]
	// All zeros is the one invalid id; a hash yields it with probability
	// 2^-128, but the format forbids it.
	traceID[15] |= allZero(traceID)
	return "00-" + hex.EncodeToString(traceID) + "-" + hex.EncodeToString(span[:]) + "-01"
}

func allZero(b []byte) byte {
	for _, c := range b {
		if c != 0 {
			return 0
		}
	}
	return 1
}
