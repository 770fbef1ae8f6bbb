package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/belayrun/belay/server"
	"github.com/belayrun/belay/store"
)

const webhooksUsage = `usage: belay webhooks add URL --tenant T [--kinds approval_requested,escalation] [--allow-private] [--json]
       belay webhooks list --tenant T [--json]

Webhook endpoints that receive a tenant's notifications from belay serve;
belay webhooks VERB -h shows a verb's flags.`

var webhooksVerbUsage = map[string]string{
	"add": `usage: belay webhooks add URL --tenant T [--kinds approval_requested,escalation] [--allow-private] [--json] [--db PATH]

Registers URL for tenant T's notifications (approval requests, escalations,
finished runs) and prints its signing secret once.`,
	"list": `usage: belay webhooks list --tenant T [--json] [--db PATH]

Lists tenant T's webhook endpoints, without their secrets.`,
}

// runWebhooks manages webhook endpoints: belay webhooks add|list.
func runWebhooks(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	sub, rest, err := splitVerb("webhooks", webhooksUsage, []string{"add", "list"}, args, stdout)
	if err != nil {
		return err
	}
	fs := newFlags("webhooks "+sub, webhooksVerbUsage[sub], stdout)
	db := dbFlag(fs)
	tenant := fs.String("tenant", "", "tenant whose notifications are sent (required)")
	kinds := fs.String("kinds", "", "comma-separated kinds to send (approval_requested, escalation, run_finished); default all")
	asJSON := jsonFlag(fs, "the webhooks, one object each")
	var allowPrivate bool
	if sub == "add" {
		fs.BoolVar(&allowPrivate, "allow-private", false,
			"accept a URL whose host is a loopback, private or link-local address, for development (belay serve delivers there only with --allow-private-webhooks)")
	}
	pos, err := fs.parse(rest)
	if err != nil {
		return err
	}
	if *tenant == "" {
		return usageError{"webhooks " + sub + ": --tenant is required"}
	}
	if sub == "list" && len(pos) > 0 {
		return usageError{fmt.Sprintf("webhooks list: unexpected argument %q (%s)", pos[0], fs.usageLine())}
	}
	st, err := db.openAccess(ctx, map[string]accessMode{"add": accessWrite, "list": accessRead}[sub])
	if err != nil {
		return err
	}
	defer st.Close()
	if sub == "list" {
		hooks, err := st.Webhooks(ctx, *tenant)
		if err != nil {
			return err
		}
		if *asJSON {
			// Secrets are shown once, by add; never by list.
			out := make([]webhookJSON, len(hooks))
			for i, h := range hooks {
				out[i] = newWebhookJSON(h)
			}
			return writeJSONLines(stdout, out)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tURL\tKINDS\tDISABLED")
		for _, h := range hooks {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%v\n", h.ID, h.URL, strings.Join(h.Kinds, ","), !h.DisabledAt.IsZero())
		}
		return tw.Flush()
	}
	if len(pos) != 1 {
		return usageError{"webhooks add: name one URL"}
	}
	var ks []string
	if *kinds != "" {
		ks = strings.Split(*kinds, ",")
	}
	h, err := server.CreateWebhook(ctx, st, *tenant, pos[0], ks, allowPrivate, time.Now())
	if err != nil {
		return fmt.Errorf("webhooks add: %w", err)
	}
	if *asJSON {
		return writeJSON(stdout, struct {
			webhookJSON
			Secret string `json:"secret"`
		}{newWebhookJSON(h), h.Secret})
	}
	fmt.Fprintf(stdout, "webhook %s -> %s\nsigning secret (shown once): %s\n", h.ID, h.URL, h.Secret)
	return nil
}

// webhookJSON is a webhook endpoint as --json prints it, without its
// secret.
type webhookJSON struct {
	ID     string `json:"id"`
	Tenant string `json:"tenant"`
	URL    string `json:"url"`
	// Kinds are the notifications sent; empty for all of them.
	Kinds      []string   `json:"kinds"`
	CreatedAt  time.Time  `json:"created_at"`
	Disabled   bool       `json:"disabled"`
	DisabledAt *time.Time `json:"disabled_at,omitempty"`
}

func newWebhookJSON(h store.Webhook) webhookJSON {
	kinds := h.Kinds
	if kinds == nil {
		kinds = []string{}
	}
	return webhookJSON{ID: h.ID, Tenant: h.Tenant, URL: h.URL, Kinds: kinds, CreatedAt: h.CreatedAt.UTC(),
		Disabled: !h.DisabledAt.IsZero(), DisabledAt: optionalTime(h.DisabledAt)}
}
