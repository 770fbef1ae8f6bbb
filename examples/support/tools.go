package support

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/belayrun/belay"
)

// Tools returns the support desk's tools over w: four reads, the refund
// (irreversible), the internal note and the reply to the customer.
//
// Errors the model can fix (an unknown id, a refund larger than its charge)
// come back as errors that say what to do instead.
func Tools(w *World) []belay.Tool {
	d := desk{w: w}

	refund := belay.NewTool("issue_refund",
		"Refund a charge to the customer's original payment method. Irreversible: money leaves. "+
			"Refund only a charge that get_invoice lists, for at most its amount. A charge is refunded at most "+
			"once: asking again returns the existing refund. The reason is shown to whoever approves the refund.",
		belay.Irreversible, d.issueRefund)
	// The intent is "this much back for this charge"; a reworded reason is
	// the same refund.
	refund.KeyFields = []string{"charge_id", "amount_usd"}
	refund.Reconcile = d.reconcileRefund
	refund.Summarize = summarizeRefund

	// The CRM has no idempotency keys, so after a lost answer the runtime
	// must ask it whether the note is there.
	note := belay.NewTool("add_internal_note",
		"Add an internal note to a ticket, visible to staff only. Record what was done and why.",
		belay.Write, d.addNote)
	note.Reconcile = d.reconcileNote

	reply := belay.NewTool("reply",
		"Email the customer who opened the ticket. Tell them only what has actually been done.",
		belay.Write, d.reply)
	reply.HonorsKey = true // the mailbox sends once per key

	// The desk's systems answer in well under a second; a call that takes
	// ten is given up on. The timeout also bounds how long a worker that
	// takes a run over waits for a call its predecessor may still have in
	// flight, before it asks what happened.
	for _, t := range []*belay.Tool{&refund, &note, &reply} {
		t.Timeout = 10 * time.Second
	}

	return []belay.Tool{
		belay.NewTool("search_kb",
			"Search the knowledge base for articles about a customer's problem. Returns ids and titles; read one with read_article.",
			belay.Read, d.searchKB),
		belay.NewTool("read_article", "Read a knowledge base article by its id.", belay.Read, d.readArticle),
		belay.NewTool("get_account",
			"Look up a customer's account by email: name, plan and invoices, newest first.",
			belay.Read, d.getAccount),
		belay.NewTool("get_invoice",
			"Get an invoice with its charges. A charge with duplicate_of repeats that charge by mistake; "+
				"refund_id is set on a charge that was already refunded.",
			belay.Read, d.getInvoice),
		refund,
		note,
		reply,
	}
}

// desk implements the tools; each method is one tool's typed function.
type desk struct{ w *World }

type searchKBIn struct {
	Query string `json:"query" jsonschema:"words for the customer's problem, like charged twice"`
}

type searchKBOut struct {
	Articles []articleRef `json:"articles"`
}

type articleRef struct {
	ID    string `json:"id"`
	Title string `json:"title"`
}

func (d desk) searchKB(ctx context.Context, in searchKBIn) (searchKBOut, error) {
	found, err := d.w.SearchKB(ctx, in.Query, 3)
	if err != nil {
		return searchKBOut{}, err
	}
	out := searchKBOut{Articles: make([]articleRef, len(found))}
	for i, a := range found {
		out.Articles[i] = articleRef{ID: a.ID, Title: a.Title}
	}
	return out, nil
}

type readArticleIn struct {
	ID string `json:"id" jsonschema:"article id from search_kb, like KB-14"`
}

type articleOut struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	Body  string `json:"body"`
}

func (d desk) readArticle(ctx context.Context, in readArticleIn) (articleOut, error) {
	a, err := d.w.Article(ctx, in.ID)
	if errors.Is(err, ErrNotFound) {
		return articleOut{}, fmt.Errorf("%w; search_kb returns article ids", err)
	}
	if err != nil {
		return articleOut{}, err
	}
	return articleOut{ID: a.ID, Title: a.Title, Body: a.Body}, nil
}

type getAccountIn struct {
	Email string `json:"email" jsonschema:"the customer's email address"`
}

type accountOut struct {
	AccountID string       `json:"account_id"`
	Name      string       `json:"name"`
	Email     string       `json:"email"`
	Plan      string       `json:"plan"`
	Invoices  []invoiceRef `json:"invoices"`
}

type invoiceRef struct {
	InvoiceID   string  `json:"invoice_id"`
	Description string  `json:"description"`
	AmountUSD   dollars `json:"amount_usd"`
	Status      string  `json:"status"`
	IssuedOn    string  `json:"issued_on"`
}

func (d desk) getAccount(ctx context.Context, in getAccountIn) (accountOut, error) {
	a, err := d.w.AccountByEmail(ctx, in.Email)
	if errors.Is(err, ErrNotFound) {
		return accountOut{}, fmt.Errorf("%w; use the address the customer wrote from", err)
	}
	if err != nil {
		return accountOut{}, err
	}
	out := accountOut{AccountID: a.ID, Name: a.Name, Email: a.Email, Plan: a.Plan, Invoices: make([]invoiceRef, len(a.Invoices))}
	for i, inv := range a.Invoices {
		out.Invoices[i] = invoiceRef{InvoiceID: inv.ID, Description: inv.Description,
			AmountUSD: dollarsOf(inv.AmountCents), Status: inv.Status, IssuedOn: inv.IssuedOn}
	}
	return out, nil
}

type getInvoiceIn struct {
	InvoiceID string `json:"invoice_id" jsonschema:"invoice id, like INV-2026-004512"`
}

type invoiceOut struct {
	InvoiceID   string      `json:"invoice_id"`
	AccountID   string      `json:"account_id"`
	Description string      `json:"description"`
	AmountUSD   dollars     `json:"amount_usd"`
	Currency    string      `json:"currency"`
	Status      string      `json:"status"`
	Charges     []chargeOut `json:"charges"`
}

type chargeOut struct {
	ChargeID    string  `json:"charge_id"`
	AmountUSD   dollars `json:"amount_usd"`
	ChargedAt   string  `json:"charged_at"`
	DuplicateOf string  `json:"duplicate_of,omitempty"`
	RefundID    string  `json:"refund_id,omitempty"`
}

func (d desk) getInvoice(ctx context.Context, in getInvoiceIn) (invoiceOut, error) {
	inv, err := d.w.Invoice(ctx, in.InvoiceID)
	if errors.Is(err, ErrNotFound) {
		return invoiceOut{}, fmt.Errorf("%w; get_account lists the customer's invoices", err)
	}
	if err != nil {
		return invoiceOut{}, err
	}
	out := invoiceOut{InvoiceID: inv.ID, AccountID: inv.AccountID, Description: inv.Description,
		AmountUSD: dollarsOf(inv.AmountCents), Currency: inv.Currency, Status: inv.Status,
		Charges: make([]chargeOut, len(inv.Charges))}
	for i, c := range inv.Charges {
		out.Charges[i] = chargeOut{ChargeID: c.ID, AmountUSD: dollarsOf(c.AmountCents), ChargedAt: c.ChargedAt,
			DuplicateOf: c.DuplicateOf, RefundID: c.RefundID}
	}
	return out, nil
}

type issueRefundIn struct {
	InvoiceID string  `json:"invoice_id" jsonschema:"the invoice the charge belongs to"`
	ChargeID  string  `json:"charge_id" jsonschema:"the charge to refund, from get_invoice"`
	AmountUSD dollars `json:"amount_usd" jsonschema:"amount to refund in US dollars, like 288.00; at most the charge"`
	Reason    string  `json:"reason" jsonschema:"why the refund is due, for the approver"`
}

type refundOut struct {
	RefundID  string  `json:"refund_id"`
	ChargeID  string  `json:"charge_id"`
	InvoiceID string  `json:"invoice_id"`
	AmountUSD dollars `json:"amount_usd"`
	Currency  string  `json:"currency"`
	Status    string  `json:"status"`
	Arrives   string  `json:"arrives"`
}

func refundResult(r Refund) refundOut {
	return refundOut{RefundID: r.ID, ChargeID: r.ChargeID, InvoiceID: r.InvoiceID,
		AmountUSD: dollarsOf(r.AmountCents), Currency: r.Currency, Status: "succeeded",
		Arrives: "on the original payment method within 5 to 10 business days"}
}

func (d desk) issueRefund(ctx context.Context, in issueRefundIn) (refundOut, error) {
	cents, err := in.AmountUSD.cents()
	if err != nil {
		return refundOut{}, err
	}
	ch, err := d.w.Charge(ctx, in.ChargeID)
	if errors.Is(err, ErrNotFound) {
		return refundOut{}, fmt.Errorf("%w; get_invoice lists an invoice's charges", err)
	}
	if err != nil {
		return refundOut{}, err
	}
	if ch.InvoiceID != in.InvoiceID {
		return refundOut{}, fmt.Errorf("charge %s belongs to invoice %s, not %s; check the ids with get_invoice",
			in.ChargeID, ch.InvoiceID, in.InvoiceID)
	}
	// Outside a run there is no key; billing still refunds a charge once.
	ci, _ := belay.CallInfoFrom(ctx)
	r, err := d.w.Refund(ctx, in.ChargeID, cents, ci.IdempotencyKey)
	if errors.Is(err, ErrRefundExceedsCharge) {
		return refundOut{}, fmt.Errorf("%w; refund at most the charged amount", err)
	}
	if err != nil {
		return refundOut{}, err
	}
	return refundResult(r), nil
}

// reconcileRefund asks billing what became of a refund whose answer was
// lost: first by the request's key, then by the charge, since billing refunds
// a charge once and a refund of it under any key is the one this call would
// get.
func (d desk) reconcileRefund(ctx context.Context, key string, args json.RawMessage) (json.RawMessage, bool, error) {
	r, found, err := d.w.FindRefundByKey(ctx, key)
	if err != nil {
		return nil, false, err
	}
	if !found {
		var in issueRefundIn
		if err := json.Unmarshal(args, &in); err != nil {
			return nil, false, fmt.Errorf("reconcile refund: %w", err)
		}
		refunds, err := d.w.RefundsOf(ctx, in.ChargeID)
		if err != nil || len(refunds) == 0 {
			return nil, false, err
		}
		r = refunds[0]
	}
	out, err := json.Marshal(refundResult(r))
	return out, err == nil, err
}

type addNoteIn struct {
	TicketID string `json:"ticket_id" jsonschema:"the ticket, like T-1001"`
	Text     string `json:"text" jsonschema:"what was done and why"`
}

type noteOut struct {
	NoteID   string `json:"note_id"`
	TicketID string `json:"ticket_id"`
	Saved    bool   `json:"saved"`
}

func (d desk) addNote(ctx context.Context, in addNoteIn) (noteOut, error) {
	n, err := d.w.AddNote(ctx, in.TicketID, in.Text)
	if errors.Is(err, ErrNotFound) {
		return noteOut{}, fmt.Errorf("%w; the ticket id is in the customer's message", err)
	}
	if err != nil {
		return noteOut{}, err
	}
	return noteOut{NoteID: n.ID, TicketID: n.TicketID, Saved: true}, nil
}

// reconcileNote looks in the CRM for the note a lost call would have added.
func (d desk) reconcileNote(ctx context.Context, _ string, args json.RawMessage) (json.RawMessage, bool, error) {
	var in addNoteIn
	if err := json.Unmarshal(args, &in); err != nil {
		return nil, false, fmt.Errorf("reconcile note: %w", err)
	}
	n, found, err := d.w.FindNote(ctx, in.TicketID, in.Text)
	if err != nil || !found {
		return nil, false, err
	}
	out, err := json.Marshal(noteOut{NoteID: n.ID, TicketID: n.TicketID, Saved: true})
	return out, err == nil, err
}

type replyIn struct {
	TicketID string `json:"ticket_id" jsonschema:"the ticket being answered"`
	To       string `json:"to" jsonschema:"the customer's email address"`
	Subject  string `json:"subject" jsonschema:"subject line"`
	Body     string `json:"body" jsonschema:"the message; state only what has been done"`
}

type replyOut struct {
	EmailID string `json:"email_id"`
	To      string `json:"to"`
	Subject string `json:"subject"`
	Sent    bool   `json:"sent"`
}

func (d desk) reply(ctx context.Context, in replyIn) (replyOut, error) {
	t, err := d.w.Ticket(ctx, in.TicketID)
	if errors.Is(err, ErrNotFound) {
		return replyOut{}, fmt.Errorf("%w; the ticket id is in the customer's message", err)
	}
	if err != nil {
		return replyOut{}, err
	}
	if in.To != t.Email {
		return replyOut{}, fmt.Errorf("ticket %s was opened by %s; reply to the ticket's customer, not %s", t.ID, t.Email, in.To)
	}
	ci, _ := belay.CallInfoFrom(ctx)
	e, err := d.w.SendEmail(ctx, ci.IdempotencyKey, in.To, in.Subject, in.Body)
	if err != nil {
		return replyOut{}, err
	}
	return replyOut{EmailID: e.ID, To: e.To, Subject: e.Subject, Sent: true}, nil
}

// dollars is an amount of US dollars as the model reads and writes it: a
// JSON number with two decimals, like 288.00. Billing counts cents; cents
// converts without drift.
type dollars float64

// maxCents bounds amounts to a billion dollars, far inside the range where
// a float64 holds every cent with room to spare.
const maxCents = 100_000_000_000

func dollarsOf(cents int64) dollars { return dollars(float64(cents) / 100) }

// cents converts to cents. A decimal with two places, read into a float64,
// is within a hair of its exact value and rounding recovers it. An amount
// that is off a whole cent by more than a thousandth of a cent has more
// places than two and is refused rather than rounded: money is not guessed.
func (d dollars) cents() (int64, error) {
	c := float64(d) * 100
	whole := math.Round(c)
	switch {
	case math.IsNaN(c) || math.Abs(whole) > maxCents:
		return 0, fmt.Errorf("amount_usd %v is out of range", float64(d))
	case math.Abs(c-whole) > 1e-3:
		return 0, fmt.Errorf("amount_usd %v has fractions of a cent; give dollars with at most two decimals, like 288.00", float64(d))
	}
	return int64(whole), nil
}

func (d dollars) String() string { return strconv.FormatFloat(float64(d), 'f', 2, 64) }

func (d dollars) MarshalJSON() ([]byte, error) {
	return strconv.AppendFloat(nil, float64(d), 'f', 2, 64), nil
}

// summarizeRefund says what a refund does, for the person approving it.
func summarizeRefund(args json.RawMessage) string {
	var in struct {
		InvoiceID string      `json:"invoice_id"`
		ChargeID  string      `json:"charge_id"`
		Amount    json.Number `json:"amount_usd"`
		Reason    string      `json:"reason"`
	}
	if err := json.Unmarshal(args, &in); err != nil {
		return "issue_refund with " + string(args)
	}
	amount := in.Amount.String()
	if f, err := in.Amount.Float64(); err == nil {
		amount = strconv.FormatFloat(f, 'f', 2, 64)
	}
	s := fmt.Sprintf("Refund %s USD on invoice %s (charge %s)", amount, in.InvoiceID, in.ChargeID)
	if in.Reason != "" {
		s += ": " + in.Reason
	}
	return s
}
