package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	slackapi "github.com/slack-go/slack"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/store"
)

// The interactivity endpoint: Slack posts here when a person presses a
// card's button or submits one of its modals. A request counts only if
// Slack signed it with the app's signing secret less than five minutes
// ago; the Slack user must be mapped to an approver of the approval's
// tenant; and the decision goes through the runtime's Operator, as the
// console's and the API's do, so the binding, the expiry and the rule
// that a run's requester does not approve its actions hold here too.

// maxBody bounds an interactivity request; Slack's are a few KB.
const maxBody = 1 << 20

// ServeHTTP handles POST /slack/interactivity.
func (a *App) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "Slack posts interactions here", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(body) > maxBody {
		http.Error(w, "unreadable or too large body", http.StatusBadRequest)
		return
	}
	// The verifier refuses a timestamp more than five minutes from now, so
	// a captured request cannot be replayed later.
	sv, err := slackapi.NewSecretsVerifier(r.Header, a.opts.SigningSecret)
	if err == nil {
		_, _ = sv.Write(body)
		err = sv.Ensure()
	}
	if err != nil {
		a.log.Warn("slack: refused an interaction without a valid signature", "reason", err.Error(), "remote", r.RemoteAddr)
		http.Error(w, "invalid or expired Slack signature", http.StatusUnauthorized)
		return
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		http.Error(w, "the body is not a form", http.StatusBadRequest)
		return
	}
	var cb slackapi.InteractionCallback
	if err := json.Unmarshal([]byte(form.Get("payload")), &cb); err != nil {
		http.Error(w, "the payload is not an interaction", http.StatusBadRequest)
		return
	}
	if a.opts.Config.Team != "" && cb.Team.ID != a.opts.Config.Team {
		a.log.Warn("slack: refused an interaction from another workspace", "team", cb.Team.ID)
		http.Error(w, "this workspace is not configured", http.StatusForbidden)
		return
	}
	ctx := r.Context()
	switch cb.Type {
	case slackapi.InteractionTypeBlockActions:
		a.blockActions(ctx, cb)
		w.WriteHeader(http.StatusOK)
	case slackapi.InteractionTypeViewSubmission:
		a.viewSubmission(ctx, w, cb)
	default:
		w.WriteHeader(http.StatusOK)
	}
}

// person is who a Slack user is in a tenant, if an approver there.
func (a *App) person(tenant, slackUser string) (*Approver, string) {
	p := a.opts.Config.approver(tenant, slackUser)
	switch {
	case p == nil:
		return nil, fmt.Sprintf("Your Slack user (%s) is not mapped to an approver of tenant %s in Belay; ask an admin to add you to the slack section of its configuration.", slackUser, tenant)
	case !slices.Contains(p.Roles, store.RoleApprover):
		return nil, fmt.Sprintf("You are %s in Belay, without the approver role: you cannot decide approvals of tenant %s.", p.Name, tenant)
	}
	return p, ""
}

// blockActions takes a press of a card's button.
func (a *App) blockActions(ctx context.Context, cb slackapi.InteractionCallback) {
	if len(cb.ActionCallback.BlockActions) == 0 {
		return
	}
	act := cb.ActionCallback.BlockActions[0]
	if !slices.Contains([]string{actionApprove, actionEdit, actionReject}, act.ActionID) {
		return // the console link, which Slack opens itself
	}
	channel, ts := cb.Channel.ID, cb.Container.MessageTs
	if ts == "" {
		ts = cb.Message.Timestamp
	}
	r, ok := decodeRef(act.Value)
	if !ok {
		a.tell(ctx, channel, cb.User.ID, "This button names no approval.")
		return
	}
	r.Channel, r.TS = channel, ts
	who, refusal := a.person(r.Tenant, cb.User.ID)
	if who == nil {
		a.tell(ctx, channel, cb.User.ID, refusal)
		return
	}
	switch act.ActionID {
	case actionApprove:
		a.decide(ctx, r, who, cb.User.ID, belay.ApprovalDecision{Verdict: "approve"})
	case actionReject:
		a.openModal(ctx, cb, r, a.rejectModal(r))
	case actionEdit:
		d, err := a.load(ctx, r.Tenant, r.Approval)
		if err != nil {
			a.tell(ctx, channel, cb.User.ID, a.refusal(r, err))
			return
		}
		if !a.rt.Serves(d.run.Agent, d.approval.Tool) {
			a.tell(ctx, channel, cb.User.ID, fmt.Sprintf("Tool %s of agent %s is not served by this Belay, so an edit cannot be checked here: approve or reject it, or edit it in the console of a server that serves the agent.", d.approval.Tool, d.run.Agent))
			return
		}
		a.openModal(ctx, cb, r, a.editModal(r, d))
	}
}

func (a *App) openModal(ctx context.Context, cb slackapi.InteractionCallback, r ref, v slackapi.ModalViewRequest) {
	if _, err := a.client.OpenViewContext(ctx, cb.TriggerID, v); err != nil {
		a.log.Error("slack: open a modal", "approval", r.Approval, "err", err)
		a.tell(ctx, r.Channel, cb.User.ID, "Slack did not open the form; try again.")
	}
}

func (a *App) rejectModal(r ref) slackapi.ModalViewRequest {
	note := slackapi.NewPlainTextInputBlockElement(plain("The agent reads this"), "value").WithMultiline(true).WithMaxLength(2000)
	return slackapi.ModalViewRequest{Type: slackapi.VTModal, CallbackID: modalReject, PrivateMetadata: r.encode(),
		Title: plain("Reject"), Submit: plain("Reject"), Close: plain("Cancel"),
		Blocks: slackapi.Blocks{BlockSet: []slackapi.Block{slackapi.NewInputBlock("note", plain("Why not?"), nil, note)}}}
}

// editModal has one input for each of the call's fields, holding its value
// as the card shows it; a value left as it is keeps the call's (a hidden
// one included).
func (a *App) editModal(r ref, d cardData) slackapi.ModalViewRequest {
	names, values := argFields(d.args)
	blocks := []slackapi.Block{section("*" + esc(d.approval.Summary) + "*\nStrings as they are; numbers, true/false and objects as JSON.")}
	for i, name := range names {
		in := slackapi.NewPlainTextInputBlockElement(nil, "value").WithInitialValue(valueText(values[i]))
		blocks = append(blocks, slackapi.NewInputBlock("arg:"+name, plain(name), nil, in))
	}
	note := slackapi.NewPlainTextInputBlockElement(nil, "value").WithMaxLength(2000)
	nb := slackapi.NewInputBlock("note", plain("Note (optional)"), nil, note)
	nb.Optional = true
	blocks = append(blocks, nb)
	return slackapi.ModalViewRequest{Type: slackapi.VTModal, CallbackID: modalEdit, PrivateMetadata: r.encode(),
		Title: plain("Edit and approve"), Submit: plain("Approve"), Close: plain("Cancel"),
		Blocks: slackapi.Blocks{BlockSet: blocks}}
}

// viewSubmission takes a submitted modal: an edit or a rejection. Its
// answer closes the modal, or shows what to fix beside the field.
func (a *App) viewSubmission(ctx context.Context, w http.ResponseWriter, cb slackapi.InteractionCallback) {
	r, ok := decodeRef(cb.View.PrivateMetadata)
	if !ok || (cb.View.CallbackID != modalEdit && cb.View.CallbackID != modalReject) {
		w.WriteHeader(http.StatusOK)
		return
	}
	values := map[string]string{}
	if cb.View.State != nil {
		for block, actions := range cb.View.State.Values {
			values[block] = actions["value"].Value
		}
	}
	errs := map[string]string{}
	firstBlock := "note"
	d := belay.ApprovalDecision{Note: strings.TrimSpace(values["note"])}
	if cb.View.CallbackID == modalReject {
		d.Verdict = "reject"
		if d.Note == "" {
			errs["note"] = "Say why: the agent reads it, and tells the customer."
		}
	} else {
		d.Verdict = "edit"
		card, err := a.load(ctx, r.Tenant, r.Approval)
		if err != nil {
			errs["note"] = a.refusal(r, err)
		} else {
			args, argErrs, first := editedArgs(card.args, values)
			d.EditedArgs, errs, firstBlock = args, argErrs, first
		}
	}
	if len(errs) == 0 {
		who, refusal := a.person(r.Tenant, cb.User.ID)
		if who == nil {
			errs[firstBlock] = refusal
		} else if msg := a.decide(ctx, r, who, cb.User.ID, d); msg != "" {
			errs[firstBlock] = msg
		}
	}
	if len(errs) > 0 {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(slackapi.NewErrorsViewSubmissionResponse(errs))
		return
	}
	w.WriteHeader(http.StatusOK)
}

// editedArgs builds the edited call from the modal's inputs: a field that
// held a string takes the text as it is, any other a JSON value. It returns
// what to fix by input block, and the first block (where a refusal of the
// whole edit is shown).
func editedArgs(shown json.RawMessage, values map[string]string) (json.RawMessage, map[string]string, string) {
	names, old := argFields(shown)
	errs := map[string]string{}
	first := "note"
	if len(names) > 0 {
		first = "arg:" + names[0]
	}
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, name := range names {
		text := values["arg:"+name]
		var v json.RawMessage
		var s string
		if json.Unmarshal(old[i], &s) == nil {
			v, _ = json.Marshal(text)
		} else if json.Valid([]byte(text)) {
			v = json.RawMessage(text)
		} else {
			errs["arg:"+name] = "Want a JSON value here, like 12.5, true or {\"a\": 1}."
			continue
		}
		if i > 0 {
			buf.WriteByte(',')
		}
		k, _ := json.Marshal(name)
		buf.Write(k)
		buf.WriteByte(':')
		buf.Write(v)
	}
	buf.WriteByte('}')
	return buf.Bytes(), errs, first
}

// decide records a person's decision through the runtime's Operator and
// updates the card. It returns what to tell the person if it was refused,
// which it has also posted to them.
func (a *App) decide(ctx context.Context, r ref, who *Approver, slackUser string, d belay.ApprovalDecision) string {
	d.By, d.Binding = "human:"+who.Name, r.Binding
	_, err := a.rt.Operator().Decide(ctx, r.Tenant, r.Approval, d)
	if err != nil {
		msg := a.refusal(r, err)
		a.tell(ctx, r.Channel, slackUser, msg)
		if errors.Is(err, store.ErrDecided) {
			a.update(ctx, r) // show how it was decided
		}
		return msg
	}
	a.update(ctx, r)
	return ""
}

// refusal says why a decision was not recorded, in words for the person.
func (a *App) refusal(r ref, err error) string {
	switch {
	case errors.Is(err, store.ErrNotFound), errors.Is(err, belay.ErrApprovalNotFound):
		return fmt.Sprintf("Approval %s is not one of tenant %s, or no longer exists.", r.Approval, r.Tenant)
	case errors.Is(err, belay.ErrSelfApproval):
		return "You requested this run, so another approver decides its actions (unless the policy allows self-approval)."
	case errors.Is(err, store.ErrDecided):
		return "This approval was decided already, or has expired."
	case errors.Is(err, store.ErrBindingMismatch):
		return "This approval changed since the card was posted (arguments, policy or expiry); decide it in the console."
	case errors.Is(err, belay.ErrInvalidEdit):
		return strings.TrimPrefix(err.Error(), "decide: ")
	}
	a.log.Error("slack: decide", "approval", r.Approval, "tenant", r.Tenant, "err", err)
	return "Belay could not record the decision; the server's log says why."
}

// update redraws the card as the approval now stands: who decided, and
// no buttons.
func (a *App) update(ctx context.Context, r ref) {
	if r.Channel == "" || r.TS == "" {
		return
	}
	d, err := a.load(ctx, r.Tenant, r.Approval)
	if err != nil {
		a.log.Error("slack: read the decided approval", "approval", r.Approval, "err", err)
		return
	}
	if _, _, _, err := a.client.UpdateMessageContext(ctx, r.Channel, r.TS, slackapi.MsgOptionBlocks(a.blocks(d, false)...),
		slackapi.MsgOptionText(fallback(d.approval), false)); err != nil {
		a.log.Error("slack: update the card", "approval", r.Approval, "err", err)
	}
}

// tell posts a message only the person sees, in the card's channel.
func (a *App) tell(ctx context.Context, channel, user, msg string) {
	if channel == "" {
		return
	}
	if _, err := a.client.PostEphemeralContext(ctx, channel, user, slackapi.MsgOptionText(msg, false)); err != nil {
		a.log.Error("slack: tell a person", "err", err)
	}
}
