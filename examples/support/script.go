package support

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
)

// Script returns the scripted model of the scenario: search the knowledge
// base, read the policy, look up the account and the invoice, refund the
// duplicate charge, note why on the ticket, reply to the customer, and end
// with a message that names the refund.
//
// Each reply is computed from the conversation alone: the ticket and the
// tool results so far. A run resumed in a new process, from the stored
// conversation, gets the reply the crashed one would have got.
func Script() scripted.Script { return script(true) }

// ScriptConversation is Script that, having found the duplicate charge,
// asks the customer (ask_user) whether to refund it to their card or as
// store credit, and refunds once they have answered. The agent needs a
// Conversation.
func ScriptConversation() scripted.Script {
	return func(req model.Request) (scripted.Reply, error) {
		t := readTranscript(req.Messages)
		t.ask = true
		return t.next(true), nil
	}
}

// RefundQuestion is what ScriptConversation asks the customer.
const RefundQuestion = "We found the duplicate charge. Should we refund it to your card, or as store credit?"

// ScriptWithoutNote is Script without the internal note: the model says it
// is done while "reason in CRM" does not hold, which verification catches.
func ScriptWithoutNote() scripted.Script { return script(false) }

func script(withNote bool) scripted.Script {
	return func(req model.Request) (scripted.Reply, error) {
		return readTranscript(req.Messages).next(withNote), nil
	}
}

var (
	emailPattern   = regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}`)
	invoicePattern = regexp.MustCompile(`\bINV-\d{4}-\d+\b`)
	ticketPattern  = regexp.MustCompile(`\bT-\d+\b`)
)

// next is the scenario as a sequence of calls. Each step either has its
// answer in the transcript, decoded into the step's result, or is the reply.
func (t transcript) next(withNote bool) scripted.Reply {
	plan := []string{"search_kb", "read_article", "get_account", "get_invoice", "issue_refund", "add_internal_note", "reply"}
	if !withNote {
		plan = []string{"search_kb", "read_article", "get_account", "get_invoice", "issue_refund", "reply"}
	}
	var found searchKBOut
	if r, done := t.step("search_kb", searchKBIn{Query: "charged twice"}, &found,
		"Thought: customer reports a double charge. Find the refund policy first.\nPLAN: "+strings.Join(plan, "; ")); !done {
		return r
	}
	if len(found.Articles) == 0 {
		return giveUp("the knowledge base has no article on double charges")
	}

	var policy articleOut
	if r, done := t.step("read_article", readArticleIn{ID: found.Articles[0].ID}, &policy,
		fmt.Sprintf("Thought: %s looks like the policy. Read it.", found.Articles[0].ID)); !done {
		return r
	}

	email := emailPattern.FindString(t.input)
	if email == "" {
		return giveUp("the ticket does not say who the customer is")
	}
	var account accountOut
	if r, done := t.step("get_account", getAccountIn{Email: email}, &account,
		"Thought: duplicates are refunded in full. Find the customer's account."); !done {
		return r
	}

	invoiceID := invoicePattern.FindString(t.input)
	if invoiceID == "" && len(account.Invoices) > 0 {
		invoiceID = account.Invoices[0].InvoiceID
	}
	if invoiceID == "" {
		return giveUp(fmt.Sprintf("account %s has no invoices", account.AccountID))
	}
	var invoice invoiceOut
	if r, done := t.step("get_invoice", getInvoiceIn{InvoiceID: invoiceID}, &invoice,
		fmt.Sprintf("Thought: check the charges on %s.", invoiceID)); !done {
		return r
	}

	dup, ok := duplicateCharge(invoice)
	if !ok {
		return giveUp(fmt.Sprintf("invoice %s shows no duplicate charge", invoiceID))
	}
	if t.ask {
		// The reply is the call's result, as the customer wrote it.
		if _, answered := t.result("ask_user"); !answered {
			return scripted.Reply{Text: "Thought: ask the customer how they want the money back.",
				Calls: []scripted.Call{{Name: "ask_user", Args: map[string]string{"question": RefundQuestion}}}}
		}
	}
	var refund refundOut
	if r, done := t.step("issue_refund", issueRefundIn{
		InvoiceID: invoice.InvoiceID, ChargeID: dup.ChargeID, AmountUSD: dup.AmountUSD,
		Reason: fmt.Sprintf("%s duplicates %s on invoice %s; %s: duplicates are refunded in full",
			dup.ChargeID, dup.DuplicateOf, invoice.InvoiceID, policy.ID),
	}, &refund, fmt.Sprintf("Thought: %s repeats %s. Refund the duplicate, %s USD.",
		dup.ChargeID, dup.DuplicateOf, dup.AmountUSD)); !done {
		return r
	}

	ticketID := ticketPattern.FindString(t.input)
	if ticketID == "" {
		ticketID = TicketID
	}
	if withNote {
		var note noteOut
		if r, done := t.step("add_internal_note", addNoteIn{TicketID: ticketID, Text: fmt.Sprintf(
			"Customer was charged twice on invoice %s. Refunded the duplicate charge %s (%s USD) per %s: refund %s.",
			refund.InvoiceID, refund.ChargeID, refund.AmountUSD, policy.ID, refund.RefundID),
		}, &note, "Thought: record the reason on the ticket."); !done {
			return r
		}
	}

	message := fmt.Sprintf("Hi, sorry about the double charge. We refunded the duplicate payment of %s USD on invoice %s (refund %s). "+
		"It goes back to your original card within 5 to 10 business days.", refund.AmountUSD, refund.InvoiceID, refund.RefundID)
	var sent replyOut
	if r, done := t.step("reply", replyIn{TicketID: ticketID, To: email,
		Subject: "Your refund for invoice " + refund.InvoiceID, Body: message,
	}, &sent, "Thought: tell the customer what was done."); !done {
		return r
	}
	return scripted.Reply{Text: message}
}

// duplicateCharge returns the charge of an invoice that repeats another.
func duplicateCharge(inv invoiceOut) (chargeOut, bool) {
	for _, c := range inv.Charges {
		if c.DuplicateOf != "" {
			return c, true
		}
	}
	return chargeOut{}, false
}

// transcript is what the conversation says has happened: the customer's
// message and every tool call that has a result. It is all the script knows.
type transcript struct {
	input string
	calls []toolCall // oldest first
	// ask: the customer is asked how to refund before the refund.
	ask bool
}

// result returns the latest good result of tool.
func (t transcript) result(tool string) (string, bool) {
	for i := len(t.calls) - 1; i >= 0; i-- {
		if c := t.calls[i]; c.name == tool && !c.failed {
			return c.result, true
		}
	}
	return "", false
}

type toolCall struct {
	name   string
	result string
	failed bool
}

func readTranscript(msgs []model.Message) transcript {
	var t transcript
	if len(msgs) > 0 && msgs[0].Role == model.RoleUser {
		t.input = model.JoinText(msgs[0].Content)
	}
	names := make(map[string]string) // tool_use id -> tool
	for _, m := range msgs {
		for _, b := range m.Content {
			switch b.Type {
			case model.TypeToolUse:
				names[b.ID] = b.Name
			case model.TypeToolResult:
				if name, ok := names[b.ToolUseID]; ok {
					t.calls = append(t.calls, toolCall{name: name, result: b.Content, failed: b.IsError})
				}
			}
		}
	}
	return t
}

// readTools may be asked again after a failure: reading twice changes
// nothing. A failed write is never repeated by the script.
var readTools = map[string]bool{"search_kb": true, "read_article": true, "get_account": true, "get_invoice": true}

// step decodes the latest result of tool into out and reports done. Until
// there is a good result it returns the reply that moves the run on instead:
// the call (with thought as its text) if it was never made, the call once
// more if a read failed once, and giving up otherwise.
func (t transcript) step(tool string, args, out any, thought string) (reply scripted.Reply, done bool) {
	call := []scripted.Call{{Name: tool, Args: args}}
	var last *toolCall
	failures := 0
	for i := range t.calls {
		if t.calls[i].name == tool {
			last = &t.calls[i]
			if last.failed {
				failures++
			}
		}
	}
	switch {
	case last == nil:
		return scripted.Reply{Text: thought, Calls: call}, false
	case last.failed && readTools[tool] && failures < 2:
		return scripted.Reply{Text: fmt.Sprintf("Thought: %s failed; reading is safe to try once more.", tool), Calls: call}, false
	case last.failed:
		return giveUp(fmt.Sprintf("%s failed: %s", tool, last.result)), false
	}
	if err := json.Unmarshal([]byte(last.result), out); err != nil {
		return giveUp(fmt.Sprintf("%s returned a result I cannot read (%v)", tool, err)), false
	}
	return scripted.Reply{}, true
}

// giveUp ends the run with a message that promises nothing: verification
// then finds what is missing and a person takes over.
func giveUp(why string) scripted.Reply {
	return scripted.Reply{Text: fmt.Sprintf("I could not finish this ticket: %s. I am stopping here so that a person can take over.", why)}
}

// ScriptStuck is a model that drifts: after the knowledge base answers, it
// keeps searching with ever-new wording and never acts on what it found.
// Every query differs, so only the no-progress detector catches it.
func ScriptStuck() scripted.Script {
	return func(req model.Request) (scripted.Reply, error) {
		n := 0
		for _, m := range req.Messages {
			if m.Role == model.RoleAssistant {
				n++
			}
		}
		return scripted.Reply{
			Text:  fmt.Sprintf("Thought: maybe another search will settle it (attempt %d).", n+1),
			Calls: []scripted.Call{{Name: "search_kb", Args: searchKBIn{Query: fmt.Sprintf("duplicate charge refund question %d", n+1)}}},
		}, nil
	}
}
