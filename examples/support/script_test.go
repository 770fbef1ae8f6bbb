package support

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
)

// demoInput is the ticket as `belay demo` submits it.
const demoInput = DoubleChargeRequest

const wantFinal = "Hi, sorry about the double charge. We refunded the duplicate payment of 288.00 USD on invoice INV-2026-004512 " +
	"(refund RF-00001). It goes back to your original card within 5 to 10 business days."

// drive plays the runtime's part without a store: it asks the model, runs
// the calls against the world, returns their results (errors as is_error
// results, as the runtime does) and stops when the model calls no tool.
func drive(t *testing.T, w *World, s scripted.Script, input string) (conversation []model.Message, calls []string) {
	t.Helper()
	m := scripted.Func(s)
	tools := Tools(w)
	msgs := []model.Message{{Role: model.RoleUser, Content: []model.Block{model.TextBlock(input)}}}
	for range 20 {
		resp, err := m.Generate(t.Context(), model.Request{Messages: msgs})
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, model.Message{Role: model.RoleAssistant, Content: resp.Content})
		uses := model.ToolUses(resp.Content)
		if len(uses) == 0 {
			return msgs, calls
		}
		var results []model.Block
		for _, use := range uses {
			calls = append(calls, use.Name)
			i := slices.IndexFunc(tools, func(tool belay.Tool) bool { return tool.Name == use.Name })
			out, err := tools[i].Call(t.Context(), use.Input)
			if err != nil {
				results = append(results, model.ToolResultBlock(use.ID, err.Error(), true))
				continue
			}
			results = append(results, model.ToolResultBlock(use.ID, string(out), false))
		}
		msgs = append(msgs, model.Message{Role: model.RoleUser, Content: results})
	}
	t.Fatal("the script did not finish in 20 turns")
	return nil, nil
}

func finalText(msgs []model.Message) string { return model.JoinText(msgs[len(msgs)-1].Content) }

func TestScriptRunsTheScenario(t *testing.T) {
	t.Parallel()
	for _, input := range []string{
		demoInput,
		// Without an invoice id the script takes the account's latest.
		"Hello, you took my money twice this month! Ada Lovelace <ada@example.com>",
	} {
		w := newWorld(t)
		msgs, calls := drive(t, w, Script(), input)
		want := []string{"search_kb", "read_article", "get_account", "get_invoice", "issue_refund", "add_internal_note", "reply"}
		if !slices.Equal(calls, want) {
			t.Fatalf("calls = %v, want %v", calls, want)
		}
		if got := finalText(msgs); got != wantFinal {
			t.Fatalf("final = %q\nwant %q", got, wantFinal)
		}
		if got := mustCounts(t, w); got != (Counts{Refunds: 1, Emails: 1, Notes: 1}) {
			t.Fatalf("counts = %+v, want one of each", got)
		}
		first := msgs[1].Content
		if got := model.JoinText(first); got != "Thought: customer reports a double charge. Find the refund policy first.\n"+
			"PLAN: search_kb; read_article; get_account; get_invoice; issue_refund; add_internal_note; reply" {
			t.Fatalf("first turn text = %q", got)
		}
		if got := string(model.ToolUses(first)[0].Input); got != `{"query":"charged twice"}` {
			t.Fatalf("first call input = %s", got)
		}
		// The refund asks for the duplicate, for the amount the invoice shows.
		refund := model.ToolUses(msgs[9].Content)[0]
		var args map[string]any
		if err := json.Unmarshal(refund.Input, &args); err != nil {
			t.Fatal(err)
		}
		if args["charge_id"] != "CH-2" || args["invoice_id"] != InvoiceID || !strings.Contains(string(refund.Input), `"amount_usd":288.00`) {
			t.Fatalf("issue_refund input = %s", refund.Input)
		}
		emails, _ := w.Emails(t.Context(), CustomerEmail)
		if len(emails) != 1 || !strings.Contains(emails[0].Body, "RF-00001") {
			t.Fatalf("emails = %+v, want one naming RF-00001", emails)
		}
	}
}

func TestScriptWithoutNoteSkipsTheNote(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	msgs, calls := drive(t, w, ScriptWithoutNote(), demoInput)
	if slices.Contains(calls, "add_internal_note") || !slices.Contains(calls, "reply") {
		t.Fatalf("calls = %v, want a reply and no note", calls)
	}
	if finalText(msgs) != wantFinal {
		t.Fatalf("final = %q", finalText(msgs))
	}
	if got := mustCounts(t, w); got != (Counts{Refunds: 1, Emails: 1}) {
		t.Fatalf("counts = %+v, want a refund and an email, no note", got)
	}
}

func TestScriptReadsTheInvoiceAgainOnce(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	if err := w.SetInvoiceFailures(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	msgs, calls := drive(t, w, Script(), demoInput)
	if n := strings.Count(strings.Join(calls, " "), "get_invoice"); n != 2 {
		t.Fatalf("calls = %v, want get_invoice twice", calls)
	}
	if finalText(msgs) != wantFinal {
		t.Fatalf("final = %q", finalText(msgs))
	}
}

func TestScriptStopsWhenTheInvoiceKeepsFailing(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	if err := w.SetInvoiceFailures(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	msgs, calls := drive(t, w, Script(), demoInput)
	if want := []string{"search_kb", "read_article", "get_account", "get_invoice", "get_invoice"}; !slices.Equal(calls, want) {
		t.Fatalf("calls = %v, want %v", calls, want)
	}
	final := finalText(msgs)
	if !strings.HasPrefix(final, "I could not finish this ticket: get_invoice failed") || strings.Contains(final, "refunded") {
		t.Fatalf("final = %q, want an admission that promises nothing", final)
	}
	if got := mustCounts(t, w); got != (Counts{}) {
		t.Fatalf("counts = %+v, want nothing done", got)
	}
}

// A resumed run is a new process with a new model: from any checkpoint, it
// must ask for exactly what the first process asked for next.
func TestScriptDependsOnlyOnTheConversation(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	msgs, _ := drive(t, w, Script(), demoInput)
	for k := 1; k < len(msgs); k++ {
		if msgs[k].Role != model.RoleAssistant {
			continue
		}
		resumed, err := scripted.Func(Script()).Generate(t.Context(), model.Request{Messages: msgs[:k]})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := describe(resumed.Content), describe(msgs[k].Content); got != want {
			t.Errorf("after %d messages a new model replies\n%s\nwant\n%s", k, got, want)
		}
	}
}

// describe renders a reply without its tool_use ids, which differ between
// model instances by design.
func describe(blocks []model.Block) string {
	var b strings.Builder
	b.WriteString(model.JoinText(blocks))
	for _, u := range model.ToolUses(blocks) {
		b.WriteString("\n" + u.Name + " " + string(u.Input))
	}
	return b.String()
}
