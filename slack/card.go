package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/belayrun/belay/store"
)

// The approval card: what the call does, why it needs a person, the context
// (the customer, what they asked, what Belay already did for them) and the
// buttons. The same blocks, without the buttons and with who decided, are
// what the card becomes once decided.

// ref names an approval on a card's buttons and in a modal: the tenant,
// the approval and the binding the card showed, so a decision made on a
// card that has since changed does nothing.
type ref struct {
	Tenant   string `json:"t"`
	Approval string `json:"a"`
	Binding  string `json:"b"`
	// Channel and TS are the card's message, carried through a modal.
	Channel string `json:"c,omitempty"`
	TS      string `json:"ts,omitempty"`
}

func (r ref) encode() string {
	b, _ := json.Marshal(r)
	return string(b)
}

func decodeRef(s string) (ref, bool) {
	var r ref
	if json.Unmarshal([]byte(s), &r) != nil || r.Tenant == "" || r.Approval == "" {
		return ref{}, false
	}
	return r, true
}

// Action ids of the card's buttons and the modals' callback ids.
const (
	actionApprove = "belay_approve"
	actionEdit    = "belay_edit"
	actionReject  = "belay_reject"
	modalEdit     = "belay_edit"
	modalReject   = "belay_reject"
)

// earlierLimit bounds the customer's earlier effects a card lists.
const earlierLimit = 10

// cardData is what a card shows, read from the store.
type cardData struct {
	approval store.Approval
	run      store.Run
	// args are the call's arguments, redacted.
	args json.RawMessage
	// prior are the run's own side effects done; earlier those of the
	// customer's other runs.
	prior   []store.Effect
	earlier []store.CustomerEffect
}

// load reads an approval of a tenant and what its card shows.
func (a *App) load(ctx context.Context, tenant, id string) (cardData, error) {
	ap, err := a.st.GetApproval(ctx, tenant, id)
	if err != nil {
		return cardData{}, err
	}
	run, err := a.st.GetRun(ctx, tenant, ap.RunID)
	if err != nil {
		return cardData{}, err
	}
	d := cardData{approval: ap, run: run, args: a.rt.RedactRunArgs(run, ap.Tool, ap.Args)}
	effects, err := a.st.Effects(ctx, tenant, run.ID)
	if err != nil {
		return cardData{}, err
	}
	for _, e := range effects {
		if e.State == store.EffectDone {
			e.Args = a.rt.RedactRunArgs(run, e.Tool, e.Args)
			d.prior = append(d.prior, e)
		}
	}
	if run.User != "" {
		es, err := a.st.CustomerEffects(ctx, store.CustomerEffectsParams{Tenant: tenant, User: run.User, ExceptRun: run.ID, Limit: earlierLimit})
		if err != nil {
			return cardData{}, err
		}
		for _, e := range es {
			e.Args = a.rt.RedactRunArgs(store.Run{ID: e.RunID, Agent: e.Agent, Sensitive: e.Sensitive}, e.Tool, e.Args)
			d.earlier = append(d.earlier, e)
		}
	}
	return d, nil
}

// blocks builds the card. With buttons it asks for a decision; without, it
// shows the approval as it stands.
func (a *App) blocks(d cardData, buttons bool) []slackapi.Block {
	ap, run := d.approval, d.run
	var bs []slackapi.Block
	bs = append(bs, slackapi.NewHeaderBlock(plain("Approval needed: "+ap.Tool)))
	what := "*What*\n" + esc(ap.Summary)
	if fs := fields(d.args); len(fs) > 0 {
		what += "\n" + strings.Join(fs, "\n")
	}
	bs = append(bs, section(what))
	why := "*Why*\n" + esc(ap.Reason)
	if ap.Category != "" {
		why += "\n_category: " + esc(ap.Category) + "_"
	}
	bs = append(bs, section(why))
	ctxText := "*Context*\nCustomer: " + esc(orNone(run.User)) + "\nRequest: " + esc(clip(run.Input, 600))
	if run.RequestedBy != "" {
		ctxText += "\nStarted by: " + esc(run.RequestedBy)
	}
	bs = append(bs, section(ctxText))
	if len(d.prior) > 0 || len(d.earlier) > 0 {
		var lines []string
		for _, e := range d.prior {
			lines = append(lines, fmt.Sprintf("• %s %s: %s (this run)", esc(e.Tool), oneArgs(e.Args), e.State))
		}
		for _, e := range d.earlier {
			lines = append(lines, fmt.Sprintf("• %s %s: %s (run %s, %s)", esc(e.Tool), oneArgs(e.Args), e.State, esc(e.RunID),
				e.CreatedAt.UTC().Format("2006-01-02 15:04")))
		}
		bs = append(bs, section("*Earlier side effects for this customer*\n"+strings.Join(lines, "\n")))
	}
	if buttons && ap.Status == store.ApprovalPending {
		value := ref{Tenant: ap.Tenant, Approval: ap.ID, Binding: ap.Binding}.encode()
		elems := []slackapi.BlockElement{
			slackapi.NewButtonBlockElement(actionApprove, value, plain("Approve")).WithStyle(slackapi.StylePrimary),
			slackapi.NewButtonBlockElement(actionEdit, value, plain("Edit")),
			slackapi.NewButtonBlockElement(actionReject, value, plain("Reject")).WithStyle(slackapi.StyleDanger),
		}
		if a.opts.ConsoleURL != "" {
			elems = append(elems, slackapi.NewButtonBlockElement("belay_console", ap.ID, plain("Open in console")).
				WithURL(a.opts.ConsoleURL+"/console/approvals/"+ap.ID))
		}
		bs = append(bs, slackapi.NewActionBlock("belay_decide", elems...))
	} else {
		bs = append(bs, section(outcome(ap)))
	}
	bs = append(bs, slackapi.NewContextBlock("belay_ids", plain(fmt.Sprintf("Approval %s · run %s · expires %s",
		ap.ID, run.ID, ap.ExpiresAt.UTC().Format(time.RFC3339)))))
	return bs
}

// fallback is the card's text, for notifications and clients without
// blocks.
func fallback(ap store.Approval) string {
	if ap.Status == store.ApprovalPending {
		return "Approval needed: " + ap.Summary
	}
	return outcome(ap)
}

// outcome says how an approval was decided, and by whom.
func outcome(ap store.Approval) string {
	at := ap.DecidedAt.UTC().Format("2006-01-02 15:04 MST")
	switch ap.Status {
	case store.ApprovalApproved:
		return fmt.Sprintf(":white_check_mark: *Approved* by %s at %s", esc(ap.DecidedBy), at)
	case store.ApprovalEdited:
		return fmt.Sprintf(":pencil2: *Approved with edits* by %s at %s: %s", esc(ap.DecidedBy), at, oneArgs(ap.EditedArgs))
	case store.ApprovalRejected:
		return fmt.Sprintf(":no_entry: *Rejected* by %s at %s: %s", esc(ap.DecidedBy), at, esc(ap.Note))
	case store.ApprovalExpired:
		return fmt.Sprintf(":hourglass: *Expired* at %s, undecided", at)
	}
	return "Waiting for a decision"
}

func plain(s string) *slackapi.TextBlockObject {
	return slackapi.NewTextBlockObject(slackapi.PlainTextType, clip(s, 150), false, false)
}

func section(mrkdwn string) *slackapi.SectionBlock {
	return slackapi.NewSectionBlock(slackapi.NewTextBlockObject(slackapi.MarkdownType, clip(mrkdwn, 3000), false, false), nil, nil)
}

// esc escapes what Slack's mrkdwn reads as markup.
func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

func orNone(s string) string {
	if s == "" {
		return "none named"
	}
	return s
}

// clip cuts s to at most n bytes, at a character boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	r := []rune(s[:n-3])
	if len(r) > 0 && r[len(r)-1] == '\uFFFD' {
		r = r[:len(r)-1]
	}
	return string(r) + "..."
}

// argFields are the top-level fields of a JSON object in their order.
func argFields(args json.RawMessage) (names []string, values []json.RawMessage) {
	dec := json.NewDecoder(bytes.NewReader(args))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return names, values
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return names, values
		}
		names, values = append(names, fmt.Sprint(tok)), append(values, v)
	}
	return names, values
}

// fields lists the arguments as "name: value" lines.
func fields(args json.RawMessage) []string {
	names, values := argFields(args)
	out := make([]string, len(names))
	for i := range names {
		out[i] = fmt.Sprintf("`%s`: %s", esc(names[i]), esc(clip(valueText(values[i]), 300)))
	}
	return out
}

// oneArgs is the arguments on one line.
func oneArgs(args json.RawMessage) string {
	names, values := argFields(args)
	parts := make([]string, len(names))
	for i := range names {
		parts[i] = esc(names[i]) + "=" + esc(clip(valueText(values[i]), 80))
	}
	return strings.Join(slices.Clip(parts), ", ")
}

// valueText is a JSON value as a person types it: a string without its
// quotes, anything else as JSON.
func valueText(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	var c bytes.Buffer
	if json.Compact(&c, v) == nil {
		return c.String()
	}
	return string(v)
}
