package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/store"
)

// How the demo tells a run's story: each trace event as a sentence a
// newcomer can read, under the step it belongs to, counted from 1 as
// `belay runs` counts them.

// tracePrinter prints a run's trace events as a readable account, each one
// once, as they appear in the store.
type tracePrinter struct {
	store store.Store
	runID string
	w     io.Writer
	quiet bool
	seen  int64
	// label is the step label last printed, so that the lines of one step
	// carry it once; empty after the demo printed lines of its own.
	label string
	// answered is the step whose model call answered without asking for a
	// tool (0: none yet): what follows it closes the run.
	answered int
	// saidCheckpoint: the first checkpoint says what it is for.
	saidCheckpoint bool
}

// section starts a new block of the account: the next line shows its step.
func (p *tracePrinter) section() { p.label = "" }

func (p *tracePrinter) flush(ctx context.Context) {
	events, err := p.store.Events(ctx, p.runID)
	if err != nil {
		return
	}
	for _, ev := range events {
		if ev.Seq <= p.seen {
			continue
		}
		p.seen = ev.Seq
		label, line := p.describe(ev)
		if line == "" || p.quiet {
			continue
		}
		if label == p.label {
			label = ""
		} else {
			p.label = label
		}
		fmt.Fprintf(p.w, "  %-7s %s\n", label, line)
	}
}

// describe renders one trace event for a person, under its step's label,
// or returns no line to skip it. A step's events are written while the
// run has ev.Step steps behind it, so they belong to step ev.Step+1; the
// checkpoint that ends a step is written with the step counted.
func (p *tracePrinter) describe(ev store.Event) (label, line string) {
	label = fmt.Sprintf("step %d", ev.Step+1)
	if p.answered == ev.Step+1 {
		label = "answer"
	}
	// What concludes a step (a stop, a check of the world) stays under
	// the step it concludes.
	concluding := p.label
	if concluding == "" {
		concluding = label
	}
	switch ev.Type {
	case store.EventClaimed:
		d, _ := store.DecodeEvent[store.ClaimedData](ev)
		if d.Resumed {
			return label, "a worker picks the run up from its last checkpoint"
		}
		return label, "a worker picks up the run"
	case store.EventModelCall:
		d, _ := store.DecodeEvent[store.ModelCallData](ev)
		if len(d.ToolCalls) == 0 {
			p.answered = ev.Step + 1
			return "answer", fmt.Sprintf("the model writes its answer (%d tokens in, %d out)", d.InputTokens, d.OutputTokens)
		}
		var calls []string
		for _, c := range d.ToolCalls {
			calls = append(calls, c.Name)
		}
		line = "the model asks for " + strings.Join(calls, " and ")
		if thought := firstLine(strings.TrimPrefix(d.Thought, "Thought: ")); thought != "" {
			line += ": " + thought
		}
		return label, line
	case store.EventToolResult:
		d, _ := store.DecodeEvent[store.ToolResultData](ev)
		if d.IsError {
			return label, fmt.Sprintf("  %s fails: %s", d.Tool, firstLine(d.Preview))
		}
		return label, fmt.Sprintf("  %s answers %s", d.Tool, firstLine(d.Preview))
	case store.EventToolRetry:
		d, _ := store.DecodeEvent[store.ToolRetryData](ev)
		return label, fmt.Sprintf("  %s failed (%s); it is called again in %.1fs", d.Tool, firstLine(d.Error), d.BackoffS)
	case store.EventEffectReused:
		d, _ := store.DecodeEvent[store.EffectData](ev)
		return label, fmt.Sprintf("  %s was done already: the ledger answers with what it returned, and it is not called again", d.Tool)
	case store.EventEffectUnknown:
		d, _ := store.DecodeEvent[store.EffectUnknownData](ev)
		return label, fmt.Sprintf("  %s gets %s: it may have happened. The ledger marks it unknown; it is not sent again blindly", d.Tool, cause(d.Error))
	case store.EventEffectInFlight:
		d, _ := store.DecodeEvent[store.EffectInFlightData](ev)
		return label, fmt.Sprintf("  %s may still be on its way from the previous worker: the run waits until %s", d.Tool, d.Until.Local().Format("15:04:05"))
	case store.EventReconcile:
		d, _ := store.DecodeEvent[store.ReconcileData](ev)
		switch {
		case d.Error != "":
			return label, fmt.Sprintf("  asking the downstream system whether %s happened failed: %s", d.Tool, firstLine(d.Error))
		case d.Found:
			return label, fmt.Sprintf("  asked by the call's idempotency key, the downstream system says %s happened: recorded as done, not sent again", d.Tool)
		}
		return label, fmt.Sprintf("  asked by the call's idempotency key, the downstream system says %s did not happen: it is safe to call", d.Tool)
	case store.EventCheckpoint:
		if !p.saidCheckpoint {
			p.saidCheckpoint = true
			return fmt.Sprintf("step %d", ev.Step), "saved (a checkpoint): a worker that dies from here on resumes after this step"
		}
		return fmt.Sprintf("step %d", ev.Step), "saved"
	case store.EventVerify:
		d, _ := store.DecodeEvent[store.VerifyData](ev)
		if d.OK {
			return concluding, "checked in the world: " + d.Requirement
		}
		return concluding, "NOT so in the world: " + d.Requirement
	case store.EventStop:
		d, _ := store.DecodeEvent[store.StopData](ev)
		return concluding, stopWords(d)
	case store.EventLoopDetected:
		d, _ := store.DecodeEvent[store.LoopDetectedData](ev)
		if d.Action == "replan" {
			return label, fmt.Sprintf("the loop detector (%s) fires: the model is told to change course (REPLAN)", d.Detector)
		}
		return label, fmt.Sprintf("the loop detector (%s) fires again: the run goes to a person", d.Detector)
	case store.EventApprovalRequested:
		d, _ := store.DecodeEvent[store.ApprovalRequestedData](ev)
		return label, fmt.Sprintf("the policy holds %s for a person: %s", d.Tool, d.Reason)
	case store.EventApprovalDecided:
		d, _ := store.DecodeEvent[store.ApprovalDecidedData](ev)
		switch d.Status {
		case store.ApprovalRejected:
			return label, fmt.Sprintf("%s rejected by %s: %s", d.Tool, d.By, d.Note)
		case store.ApprovalEdited:
			return label, fmt.Sprintf("%s approved by %s with these arguments: %s", d.Tool, d.By, firstLine(compact(d.EditedArgs)))
		}
		return label, fmt.Sprintf("%s %s by %s", d.Tool, d.Status, d.By)
	case store.EventResumed:
		d, _ := store.DecodeEvent[store.ResumedData](ev)
		var raised []string
		if d.AddUSD > 0 {
			raised = append(raised, fmt.Sprintf("$%g", d.AddUSD))
		}
		if d.AddTurns > 0 {
			raised = append(raised, fmt.Sprintf("%d model calls", d.AddTurns))
		}
		if len(raised) == 0 {
			return label, "resumed by " + d.By
		}
		return label, fmt.Sprintf("resumed by %s, who adds %s to its budget", d.By, strings.Join(raised, " and "))
	case store.EventOutcomeResolved:
		d, _ := store.DecodeEvent[store.OutcomeResolvedData](ev)
		if d.Applied {
			return label, fmt.Sprintf("%s says %s happened: recorded as done", d.By, d.Tool)
		}
		return label, fmt.Sprintf("%s says %s did not happen: it is called again under the same key", d.By, d.Tool)
	case store.EventCanceled:
		d, _ := store.DecodeEvent[store.CanceledData](ev)
		return concluding, fmt.Sprintf("canceled by %s: %s", d.By, d.Note)
	case store.EventReleased:
		return concluding, "the worker lets go of the run"
	}
	return "", ""
}

// stopWords says why a run stopped, and what it waits for.
func stopWords(d store.StopData) string {
	switch {
	case d.Status == store.StatusWaitingApproval:
		return "the run waits for the decision; no worker holds it meanwhile"
	case d.Used != nil:
		var next, limit float64
		if d.NextCall != nil {
			next = *d.NextCall
		}
		if d.Limit != nil {
			limit = *d.Limit
		}
		if d.Unit == "usd" {
			return fmt.Sprintf("the run pauses: it has spent $%.6f, the next model call would cost $%.6f, and its budget is $%.6f",
				*d.Used, next, limit)
		}
		return fmt.Sprintf("the run pauses: it has used %g %s, the next model call would take %g, and its limit is %g",
			*d.Used, d.Unit, next, limit)
	case d.Status == store.StatusDone && d.Reason == "verified":
		return "the run is done: every requirement holds in the world"
	case d.Status == store.StatusEscalated:
		return "the run is handed to a person: " + reasonWords(d.Reason)
	case d.Status == store.StatusPaused:
		return "the run pauses: " + reasonWords(d.Reason)
	}
	return fmt.Sprintf("the run is %s: %s", d.Status, reasonWords(d.Reason))
}

// reasonWords is a stop reason in plain words.
func reasonWords(reason string) string {
	switch reason {
	case "verified":
		return "verified in the world"
	case "stuck_loop":
		return "it was going round in circles"
	case "unverified":
		return "the model said it was done, and the world says otherwise"
	case "budget_usd":
		return "it reached its dollar budget"
	case "budget_turns", "max_turns":
		return "it reached its limit of model calls"
	case "unknown_outcome":
		return "nobody knows whether a side effect happened"
	case "kill_switch":
		return "the kill switch is engaged"
	case "waiting_approval":
		return "it waits for a person's approval"
	}
	return strings.ReplaceAll(reason, "_", " ")
}

// statusWords is a run's status and stop reason, each said once.
func statusWords(run store.Run) string {
	if run.StopReason == "" || run.StopReason == string(run.Status) {
		return string(run.Status)
	}
	return fmt.Sprintf("%s: %s", run.Status, reasonWords(run.StopReason))
}

// printPacket renders an escalation packet as the demo tells it: what the
// customer asked, what was tried (steps counted from 1), what was done and
// must not be done again, and what the customer is told.
func printPacket(w io.Writer, raw json.RawMessage) {
	var e belay.Escalation
	if err := json.Unmarshal(raw, &e); err != nil {
		fmt.Fprintf(w, "the packet for a person (unreadable: %v)\n", err)
		return
	}
	fmt.Fprintf(w, "the packet for a person (the run is %s: %s)\n", e.Status, reasonWords(e.Reason))
	fmt.Fprintf(w, "  why        %s\n", packetWhy(e))
	fmt.Fprintf(w, "  asked      %s\n", oneLine(e.Asked, previewLen))
	fmt.Fprintf(w, "  tried      %d tool calls\n", len(e.Tried))
	for _, c := range e.Tried {
		fmt.Fprintf(w, "    step %-2d  %s %s -> %s\n", c.Step+1, c.Tool, oneLine(string(c.Args), 50), oneLine(c.Outcome, 60))
	}
	if len(e.SideEffects) == 0 {
		fmt.Fprintln(w, "  done       nothing yet changed in the world")
	} else {
		fmt.Fprintf(w, "  done       %d side effects, which must not be done again:\n", len(e.SideEffects))
		for _, se := range e.SideEffects {
			fmt.Fprintf(w, "    %s (%s): %s\n", se.Tool, se.State, oneLine(se.Result, 70))
		}
	}
	fmt.Fprintf(w, "  trace      %s\n", e.Trace)
	fmt.Fprintf(w, "  customer   \"%s\"\n", e.CustomerMessage)
}

// packetWhy is the packet's reason in words: its detail, or for a run the
// world did not verify, what the world lacks (the detail is then the
// verification's JSON).
func packetWhy(e belay.Escalation) string {
	if len(e.Missing) > 0 {
		return "the world does not show: " + strings.Join(e.Missing, "; ")
	}
	if d := strings.TrimSpace(e.Detail); d != "" && !json.Valid([]byte(d)) {
		return oneLine(d, 0)
	}
	return reasonWords(e.Reason)
}

// cause drops the context a tool error carries around its cause: "refund
// charge CH-2: no response: outcome unknown: ..." becomes "no response".
func cause(s string) string {
	s = strings.TrimSuffix(s, ": "+belay.ErrUnknownOutcome.Error())
	if _, rest, ok := strings.Cut(s, ": "); ok {
		return rest
	}
	return s
}

// firstLine is the first line of s, cut to 110 characters.
func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return oneLine(s, 110)
}
