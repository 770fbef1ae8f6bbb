// Package slack puts Belay's approvals in Slack: an approval request
// becomes a Block Kit card in the tenant's channel (what the call does, why
// it needs a person, the customer and what they asked, the side effects
// Belay already made for them) with Approve, Edit (a modal with the call's
// fields) and Reject (a modal asking why); the card then shows who decided.
//
// # How a card gets there
//
// Approval requests already travel through the outbox, written in the
// transaction that asks. For each configured tenant, EnsureWebhooks
// registers a webhook whose URL is "slack:CHANNEL"; the webhook sender,
// given the App as the Deliverer of the "slack" scheme, hands it those
// deliveries, so a card is posted at least once, from any belay serve of
// the store, with the sender's retries (Slack's rate limits are waited
// out). A card may, rarely, be posted twice (a process dies between
// Slack's answer and the record of it); deciding on either is the same.
//
// # How a decision is taken
//
// Slack posts each button press and modal submission to the interactivity
// endpoint (ServeHTTP, mounted at POST /slack/interactivity outside the
// API's key check). A request counts only if Slack signed it with the
// app's signing secret, less than five minutes ago. The Slack user is then
// looked up among the approvers of the approval's tenant in Config; a user
// not mapped there, or mapped without the approver role, decides nothing.
// The decision goes through the runtime's Operator, as the console's and
// the API's do: it names the binding the card showed, the store refuses
// an expired or decided approval, and the person who requested the run
// does not approve its actions unless the policy allows it. The approval
// is looked up in the tenant named on the card and decided as that
// tenant, so a card can decide nothing of another tenant.
//
// Neither the bot token nor the signing secret is ever logged.
package slack
