package server

// A run's timeline as a person reads it: one line per trace event, in plain
// words, with its time, and the event's fields on demand.

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/belayrun/belay/internal/text"
	"github.com/belayrun/belay/store"
)

type timelineEntry struct {
	// Seq names the event in its run, so that a line a person opened stays
	// open when the page updates.
	Seq  int64
	Step int
	Type string
	Time time.Time
	// Since is how long after the run's first event this one came, as a
	// person reads it ("+1 min 05 s"); the absolute time is in Time.
	Since string
	// Say is the event in a sentence, Note a second line where the event
	// has more to tell (the model's thought, an error).
	Say   string
	Note  string
	Class string
	// Fields are the event's data, field by field, for its details.
	Fields []field
}

// timelineOf turns a run's trace into its timeline; times are measured
// from the first event.
func timelineOf(events []store.Event) []timelineEntry {
	var start time.Time
	if len(events) > 0 {
		start = events[0].Time
	}
	out := make([]timelineEntry, 0, len(events))
	for _, e := range events {
		t := timeline(e)
		t.Since = sinceStart(e.Time.Sub(start))
		out = append(out, t)
	}
	return out
}

// sinceStart says how long after the start of a run something happened:
// to the tenth of a second early on, in hours and days later.
func sinceStart(d time.Duration) string {
	switch {
	case d < 0:
		return "+0 s"
	case d < 10*time.Second:
		return fmt.Sprintf("+%.1f s", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("+%d s", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("+%d min %02d s", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("+%d h %02d min", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("+%d d %d h", int(d.Hours())/24, int(d.Hours())%24)
}

// timeline says what one trace event was, in a sentence, from its data as
// the catalogue types it. A kind the console does not know yet is shown by
// its name, with its fields in the details.
func timeline(e store.Event) timelineEntry {
	t := timelineEntry{Seq: e.Seq, Step: e.Step, Type: e.Type, Time: e.Time, Class: "ev-other", Fields: fields(e.Data)}
	switch e.Type {
	case store.EventRunCreated:
		d, _ := store.DecodeEvent[store.RunCreatedData](e)
		t.Say = "Run created for " + orSomeone(d.User) + ", agent " + d.Agent
		if d.DryRun {
			t.Say += " (a dry run: nothing is executed)"
		}
	case store.EventClaimed:
		d, _ := store.DecodeEvent[store.ClaimedData](e)
		t.Say = "Worker " + d.Owner + " picked the run up"
		if d.Resumed {
			t.Say = "Worker " + d.Owner + " picked the run up and continued from its last saved step"
		}
	case store.EventReleased:
		t.Say = "The worker let go of the run for another to take"
	case store.EventModelCall:
		d, _ := store.DecodeEvent[store.ModelCallData](e)
		t.Class = "ev-model"
		var calls []string
		for _, c := range d.ToolCalls {
			calls = append(calls, c.Name)
		}
		if len(calls) > 0 {
			t.Say = "The model asks for " + strings.Join(calls, ", ")
		} else {
			t.Say = "The model answers in words"
		}
		t.Say += fmt.Sprintf(" (%s, %d tokens in, %d out, $%.4f)", d.Model, d.InputTokens, d.OutputTokens, d.CostUSD)
		t.Note = text.Clip(d.Thought, 240)
	case store.EventModelFallback:
		d, _ := store.DecodeEvent[store.ModelFallbackData](e)
		t.Class = "ev-retry"
		t.Say = "The model " + d.From + " did not answer; " + d.To + " answered instead"
		t.Note = text.Clip(d.Error, 240)
	case store.EventToolCall:
		d, _ := store.DecodeEvent[store.ToolCallData](e)
		t.Class = "ev-tool"
		t.Say = "Calls " + withArgs(d.Tool, d.Args, 160)
	case store.EventToolResult:
		d, _ := store.DecodeEvent[store.ToolResultData](e)
		t.Class = "ev-tool"
		t.Say = d.Tool + " answered"
		if d.IsError {
			t.Class = "ev-error"
			t.Say = d.Tool + " answered with an error"
		}
		t.Note = text.Clip(d.Preview, 240)
	case store.EventToolRetry:
		d, _ := store.DecodeEvent[store.ToolRetryData](e)
		t.Class = "ev-retry"
		t.Say = fmt.Sprintf("%s failed (attempt %d); calling again in %.1f s", d.Tool, d.Attempt, d.BackoffS)
		t.Note = text.Clip(d.Error, 240)
	case store.EventBreaker:
		d, _ := store.DecodeEvent[store.BreakerData](e)
		t.Class = "ev-retry"
		t.Say = fmt.Sprintf("The circuit breaker of %s went from %s to %s", d.Tool, d.From, d.To)
	case store.EventIntent:
		d, _ := store.DecodeEvent[store.IntentData](e)
		t.Class = "ev-tool"
		t.Say = "Recorded the intent to call " + d.Tool + " before calling it, so it is never done twice"
	case store.EventEffectReused:
		d, _ := store.DecodeEvent[store.EffectData](e)
		t.Class = "ev-tool"
		t.Say = d.Tool + " was done already: its recorded result is used, nothing is called again"
	case store.EventEffectUnknown:
		d, _ := store.DecodeEvent[store.EffectUnknownData](e)
		t.Class = "ev-retry"
		t.Say = d.Tool + " went out and no answer came back: whether it happened is not known"
		t.Note = text.Clip(d.Error, 240)
	case store.EventEffectInFlight:
		d, _ := store.DecodeEvent[store.EffectInFlightData](e)
		t.Class = "ev-retry"
		t.Say = fmt.Sprintf("Waits until %s: an earlier worker's %s call may still be on its way", d.Until.UTC().Format("15:04:05 UTC"), d.Tool)
	case store.EventReconcile:
		d, _ := store.DecodeEvent[store.ReconcileData](e)
		t.Class = "ev-retry"
		switch {
		case d.Error != "":
			t.Say = "Asked what became of " + d.Tool + ", and got no answer"
			t.Note = text.Clip(d.Error, 240)
		case d.Found:
			t.Say = "Asked what became of " + d.Tool + ": it happened"
		default:
			t.Say = "Asked what became of " + d.Tool + ": it did not happen"
		}
	case store.EventCheckpoint:
		d, _ := store.DecodeEvent[store.CheckpointData](e)
		t.Class = "ev-checkpoint"
		t.Say = fmt.Sprintf("Step %d saved: %d messages, $%.4f spent so far", e.Step, d.Messages, d.CostUSD)
	case store.EventLoopDetected:
		d, _ := store.DecodeEvent[store.LoopDetectedData](e)
		t.Class = "ev-retry"
		t.Say = fmt.Sprintf("The run looks stuck (%s, %s); it was told to %s", d.Detector, times(d.Fired), d.Action)
	case store.EventApprovalRequested:
		d, _ := store.DecodeEvent[store.ApprovalRequestedData](e)
		t.Class = "ev-approval"
		t.Say = "Asks a person to approve: " + text.Clip(d.Summary, 200)
		t.Note = d.Reason
	case store.EventApprovalDecided:
		d, _ := store.DecodeEvent[store.ApprovalDecidedData](e)
		t.Class = "ev-approval"
		t.Say = fmt.Sprintf("%s %s it after %s", who(d.By), d.Status, waited(d.DecisionS))
		t.Note = d.Note
	case store.EventApprovalApplied:
		d, _ := store.DecodeEvent[store.ApprovalAppliedData](e)
		t.Class = "ev-approval"
		t.Say = fmt.Sprintf("The decision (%s by %s) is applied to the call", d.Status, who(d.By))
	case store.EventApprovalExpired:
		d, _ := store.DecodeEvent[store.ApprovalExpiredData](e)
		t.Class = "ev-approval"
		t.Say = "Nobody decided the approval of " + d.Tool + " in time: it expired"
	case store.EventVerify:
		d, _ := store.DecodeEvent[store.VerifyData](e)
		t.Class = "ev-verify"
		switch {
		case d.Error != "":
			t.Class = "ev-error"
			t.Say = fmt.Sprintf("Could not check %q", d.Requirement)
			t.Note = text.Clip(d.Error, 240)
		case d.OK:
			t.Say = fmt.Sprintf("Checked %q: holds", d.Requirement)
		default:
			t.Class = "ev-error"
			t.Say = fmt.Sprintf("Checked %q: does not hold", d.Requirement)
		}
	case store.EventStop:
		d, _ := store.DecodeEvent[store.StopData](e)
		t.Class = "ev-stop"
		t.Say = stopSentence(d.Status, d.Reason)
		t.Note = text.Clip(detailWords(d.Detail), 240)
	case store.EventResumed:
		d, _ := store.DecodeEvent[store.ResumedData](e)
		t.Class = "ev-stop"
		t.Say = d.By + " resumed the run"
		if d.StopReason != "" {
			t.Say += " (it had stopped: " + reasonWords(d.StopReason) + ")"
		}
	case store.EventMigrated:
		d, _ := store.DecodeEvent[store.MigratedData](e)
		t.Class = "ev-stop"
		t.Say = fmt.Sprintf("%s moved the run from version %s to %s", d.By, d.From, d.To)
	case store.EventOutcomeResolved:
		d, _ := store.DecodeEvent[store.OutcomeResolvedData](e)
		t.Class = "ev-stop"
		t.Say = d.By + " said " + d.Tool + " did not happen"
		if d.Applied {
			t.Say = d.By + " said " + d.Tool + " happened"
		}
	case store.EventCanceled:
		d, _ := store.DecodeEvent[store.CanceledData](e)
		t.Class = "ev-stop"
		t.Say = d.By + " canceled the run"
		t.Note = d.Note
	default:
		t.Say = humanize(e.Type)
	}
	return t
}

// who names a decider as a person reads it: a person by their name, a
// policy as policy:<name>.
func who(by string) string { return strings.TrimPrefix(by, "human:") }

func orSomeone(user string) string {
	if user == "" {
		return "no one in particular"
	}
	return user
}

func times(n int) string {
	if n == 1 {
		return "once"
	}
	return fmt.Sprintf("%d times", n)
}

// waited says how long a decision took, rounded as a person says it.
func waited(seconds float64) string {
	d := time.Duration(seconds * float64(time.Second))
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d.Minutes()))
	}
	return fmt.Sprintf("%.1f h", d.Hours())
}

// plainArgs says a call's arguments in a line, "charge id: CH-2, amount
// usd: 288", clipped to n bytes.
func plainArgs(args json.RawMessage, n int) string {
	fs := fields(args)
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = strings.ToLower(f.Name) + ": " + f.Value
	}
	return text.Clip(strings.Join(parts, ", "), n)
}

// withArgs is a tool's name followed by its arguments in brackets.
func withArgs(tool string, args json.RawMessage, n int) string {
	if line := plainArgs(args, n); line != "" {
		return tool + " (" + line + ")"
	}
	return tool
}

// reasons say the stop reasons of a run in plain words: short, for a list,
// and as a sentence, for the run's page. The runtime names them (store.Run's
// StopReason); a reason not here is shown as it is.
var reasons = map[string][2]string{
	"verified":          {"verified", "its checks against the world held"},
	"no_requirements":   {"nothing to check", "its agent has no requirements to check"},
	"dry_run":           {"dry run", "it was a dry run: nothing was executed"},
	"unverified":        {"checks failed", "the agent said it was done, but checks against the world did not hold"},
	"max_turns":         {"turn limit", "it reached its limit of model calls"},
	"budget_usd":        {"spend limit", "its next model call would have gone over its spending limit"},
	"budget_tokens":     {"token limit", "its next model call would have gone over its token limit"},
	"deadline":          {"out of time", "its next model call could have outlasted its deadline"},
	"stuck_loop":        {"stuck", "it kept going round in circles"},
	"unknown_outcome":   {"outcome unknown", "a side effect's call went out and whether it happened is not known"},
	"call_in_flight":    {"call in flight", "an earlier worker's call may still be on its way"},
	"kill_switch":       {"kill switch", "the kill switch is engaged"},
	"tenant_spend_cap":  {"tenant spend cap", "its tenant's runs reached their spend cap for the day or month: it goes on when the window rolls over or the cap is raised"},
	"provider_limit":    {"provider limit", "its provider account's requests or tokens per minute are used up: it goes on when they have room"},
	"model_unavailable": {"model unavailable", "the model could not be reached"},
	"model_error":       {"model error", "the model refused the request"},
	"empty_response":    {"empty answer", "the model returned nothing"},
	"approval_expired":  {"approval expired", "nobody decided its approval in time"},
	"version_mismatch":  {"new agent version", "its agent changed version since it started"},
	"step_failed":       {"step failed", "a step failed"},
	"canceled":          {"canceled", "it was canceled"},
}

// reasonLabel is a stop reason for a list; empty where the status says it
// already.
func reasonLabel(status store.Status, reason string) string {
	if reason == "" || reason == string(status) {
		return ""
	}
	if r, ok := reasons[reason]; ok {
		return r[0]
	}
	return humanize(reason)
}

func reasonWords(reason string) string {
	if r, ok := reasons[reason]; ok {
		return r[1]
	}
	return strings.ReplaceAll(reason, "_", " ")
}

// stopSentence says why a run stopped, by its status and reason.
func stopSentence(status store.Status, reason string) string {
	why := reasonWords(reason)
	switch status {
	case store.StatusDone:
		return "Finished: " + why
	case store.StatusWaitingApproval:
		return "Waits for a person's decision; no worker holds it meanwhile"
	case store.StatusWaitingInput:
		return "Waits for the user's reply; no worker holds it meanwhile"
	case store.StatusPaused:
		return "Paused: " + why
	case store.StatusEscalated:
		return "Handed to a person: " + why
	case store.StatusFailed:
		return "Failed: " + why
	case store.StatusCanceled:
		return "Canceled"
	}
	return humanize(string(status)) + ": " + why
}
