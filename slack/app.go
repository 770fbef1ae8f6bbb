package slack

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/webhook"
)

// Scheme is the webhook URL scheme of a Slack channel: a webhook whose URL
// is "slack:C0123ABCD" has its notifications posted to that channel by an
// App (webhook.Options.Deliverers).
const Scheme = "slack"

// Options configures an App.
type Options struct {
	// Runtime decides (its Operator) and redacts. Required.
	Runtime *belay.Runtime
	// Store is the runtime's store. Required.
	Store store.AccessStore
	// Config maps tenants to channels and Slack users to approvers.
	Config Config
	// BotToken is the bot's OAuth token (xoxb-...), SigningSecret the
	// app's signing secret. Both required; neither is ever logged.
	BotToken      string
	SigningSecret string
	// ConsoleURL, if set, adds an "Open in console" button to cards.
	ConsoleURL string
	// APIURL is Slack's Web API ("https://slack.com/api/", the default);
	// tests point it at a fake.
	APIURL string
	// HTTPClient calls Slack. Default: a client with a 10 s timeout.
	HTTPClient *http.Client
	// Logger receives what went wrong, never a secret. Default: discard.
	Logger *slog.Logger
}

// App posts approval cards to Slack and takes the decisions people make on
// them: it is a webhook.Deliverer for "slack:" webhooks and the handler of
// Slack's interactivity requests (POST /slack/interactivity).
type App struct {
	rt     *belay.Runtime
	st     store.AccessStore
	opts   Options
	client *slackapi.Client
	log    *slog.Logger
}

var _ webhook.Deliverer = (*App)(nil)

// New returns an App, or what is missing.
func New(opts Options) (*App, error) {
	switch {
	case opts.Runtime == nil || opts.Store == nil:
		return nil, errors.New("slack: Runtime and Store are required")
	case opts.BotToken == "":
		return nil, fmt.Errorf("slack: no bot token; set %s to the app's Bot User OAuth Token (xoxb-...)", opts.Config.BotTokenEnv)
	case opts.SigningSecret == "":
		return nil, fmt.Errorf("slack: no signing secret; set %s to the app's Signing Secret (Basic Information page)", opts.Config.SigningSecretEnv)
	}
	if err := opts.Config.Validate(); err != nil {
		return nil, fmt.Errorf("slack: %w", err)
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	opts.ConsoleURL = strings.TrimRight(opts.ConsoleURL, "/")
	apiOpts := []slackapi.Option{slackapi.OptionHTTPClient(opts.HTTPClient)}
	if opts.APIURL != "" {
		apiOpts = append(apiOpts, slackapi.OptionAPIURL(opts.APIURL))
	}
	return &App{rt: opts.Runtime, st: opts.Store, opts: opts, client: slackapi.New(opts.BotToken, apiOpts...), log: opts.Logger}, nil
}

// NewFromEnv returns an App whose secrets are read from the environment
// variables the configuration names.
func NewFromEnv(opts Options) (*App, error) {
	opts.Config.applyDefaults()
	opts.BotToken = strings.TrimSpace(os.Getenv(opts.Config.BotTokenEnv))
	opts.SigningSecret = strings.TrimSpace(os.Getenv(opts.Config.SigningSecretEnv))
	return New(opts)
}

// EnsureWebhooks registers, for each tenant of the configuration, the
// webhook through which its approval requests reach its channel, unless it
// is there: the outbox then carries each request to Slack at least once,
// with retries, from any belay serve of the store. Its id is derived from
// the tenant and the channel, so processes starting at once register one.
// An admin who disabled it (POST /v1/webhooks/{id}/disable) has it stay
// disabled.
func (a *App) EnsureWebhooks(ctx context.Context, now time.Time) error {
	for _, t := range a.opts.Config.Tenants {
		url := Scheme + ":" + t.Channel
		sum := sha256.Sum256([]byte(t.Tenant + "\x00" + url))
		id := "wh_slack_" + hex.EncodeToString(sum[:8])
		hooks, err := a.st.Webhooks(ctx, t.Tenant)
		if err != nil {
			return fmt.Errorf("slack: webhooks of %s: %w", t.Tenant, err)
		}
		exists := false
		for _, h := range hooks {
			exists = exists || h.ID == id
		}
		if exists {
			continue
		}
		secret := make([]byte, 32)
		_, _ = rand.Read(secret)
		err = a.st.CreateWebhook(ctx, store.Webhook{ID: id, Tenant: t.Tenant, URL: url, Secret: "whsec_" + hex.EncodeToString(secret),
			Kinds: []string{"approval_requested"}, CreatedAt: now.UTC()})
		if err != nil {
			// Another process may have registered it in between.
			if hooks, lerr := a.st.Webhooks(ctx, t.Tenant); lerr == nil {
				for _, h := range hooks {
					if h.ID == id {
						err = nil
					}
				}
			}
		}
		if err != nil {
			return fmt.Errorf("slack: register the webhook of %s: %w", t.Tenant, err)
		}
	}
	return nil
}

// Deliver posts the card of an approval request to the channel the
// webhook names. It is a webhook.Deliverer: a rate limit is waited out,
// other failures of Slack are retried, and a request whose approval is
// gone (pruned) fails at once.
func (a *App) Deliver(ctx context.Context, d store.Delivery) error {
	channel, ok := strings.CutPrefix(d.URL, Scheme+":")
	if !ok || channel == "" {
		return webhook.Permanent(fmt.Errorf("webhook URL %q names no Slack channel", d.URL))
	}
	if d.Kind != "approval_requested" {
		return nil // only approvals have cards
	}
	var p struct {
		ApprovalID string `json:"approval_id"`
	}
	if err := json.Unmarshal(d.Payload, &p); err != nil || p.ApprovalID == "" {
		return webhook.Permanent(errors.New("the notification names no approval"))
	}
	card, err := a.load(ctx, d.Tenant, p.ApprovalID)
	if errors.Is(err, store.ErrNotFound) {
		return webhook.Permanent(fmt.Errorf("approval %s no longer exists", p.ApprovalID))
	}
	if err != nil {
		return fmt.Errorf("read approval %s: %w", p.ApprovalID, err)
	}
	_, _, err = a.client.PostMessageContext(ctx, channel, slackapi.MsgOptionBlocks(a.blocks(card, true)...),
		slackapi.MsgOptionText(fallback(card.approval), false))
	return slackError("post the card of "+p.ApprovalID, err)
}

// slackError turns an error of Slack's API into a Deliverer's: a rate
// limit's wait is kept.
func slackError(what string, err error) error {
	if err == nil {
		return nil
	}
	if rl, ok := errors.AsType[*slackapi.RateLimitedError](err); ok {
		return &webhook.RetryAfterError{After: rl.RetryAfter, Err: fmt.Errorf("%s: slack: rate limited", what)}
	}
	return fmt.Errorf("%s: slack: %w", what, err)
}
