package main

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/store"
)

// runLog writes the life of the runs a server works on to its log, at info
// level: created, claimed, waiting for a person, paused, done, escalated,
// failed, released, and what people did to them. It names runs, approvals
// and tools, and the reasons Belay gave; never an argument, an input, an
// answer or a note, which may carry what the log must not.
type runLog struct{ logger *slog.Logger }

func (l runLog) Event(run belay.ObservedRun, ev store.Event) {
	ctx := context.Background()
	if !l.logger.Enabled(ctx, slog.LevelInfo) {
		return
	}
	attrs := []slog.Attr{slog.String("run", run.ID), slog.String("tenant", run.Tenant), slog.String("agent", run.Agent),
		slog.Int("step", ev.Step)}
	var msg string
	switch ev.Type {
	case store.EventRunCreated:
		msg = "run created"
	case store.EventClaimed:
		d, _ := store.DecodeEvent[store.ClaimedData](ev)
		msg = "run claimed"
		attrs = append(attrs, slog.Int64("epoch", d.Epoch), slog.Bool("resumed", d.Resumed))
	case store.EventReleased:
		d, _ := store.DecodeEvent[store.ReleasedData](ev)
		msg = "run released"
		attrs = append(attrs, slog.Int64("epoch", d.Epoch))
	case store.EventStop:
		d, _ := store.DecodeEvent[store.StopData](ev)
		// "run done", "run waiting approval", "run escalated", ...
		msg = "run " + strings.ReplaceAll(string(d.Status), "_", " ")
		attrs = append(attrs, slog.String("reason", d.Reason))
		if d.ResumeAfter != nil {
			attrs = append(attrs, slog.Time("resume_after", *d.ResumeAfter))
		}
	case store.EventApprovalRequested:
		d, _ := store.DecodeEvent[store.ApprovalRequestedData](ev)
		msg = "approval requested"
		attrs = append(attrs, slog.String("approval", d.ApprovalID), slog.String("tool", d.Tool), slog.String("category", d.Category))
	case store.EventApprovalDecided:
		d, _ := store.DecodeEvent[store.ApprovalDecidedData](ev)
		msg = "approval decided"
		attrs = append(attrs, slog.String("approval", d.ApprovalID), slog.String("tool", d.Tool), slog.String("status", string(d.Status)),
			slog.String("by", d.By))
	case store.EventApprovalExpired:
		msg = "approval expired"
	case store.EventResumed:
		d, _ := store.DecodeEvent[store.ResumedData](ev)
		msg = "run resumed"
		attrs = append(attrs, slog.String("by", d.By), slog.String("stop_reason", d.StopReason))
	case store.EventCanceled:
		d, _ := store.DecodeEvent[store.CanceledData](ev)
		msg = "run canceled"
		attrs = append(attrs, slog.String("by", d.By), slog.String("was", string(d.Was)))
	case store.EventMigrated:
		d, _ := store.DecodeEvent[store.MigratedData](ev)
		msg = "run migrated"
		attrs = append(attrs, slog.String("by", d.By), slog.String("from", d.From), slog.String("to", d.To))
	case store.EventOutcomeResolved:
		d, _ := store.DecodeEvent[store.OutcomeResolvedData](ev)
		msg = "outcome resolved"
		attrs = append(attrs, slog.String("by", d.By), slog.String("tool", d.Tool), slog.Bool("applied", d.Applied))
	case store.EventEffectUnknown:
		d, _ := store.DecodeEvent[store.EffectUnknownData](ev)
		msg = "side effect outcome unknown"
		attrs = append(attrs, slog.String("tool", d.Tool))
	default:
		return
	}
	l.logger.LogAttrs(ctx, slog.LevelInfo, msg, attrs...)
}

func (runLog) Checkpoint(belay.ObservedRun, time.Duration) {}
