package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/belayrun/belay/server"
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
	asJSON := fs.Bool("json", false, "print JSON")
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
	st, err := db.openAccess(ctx, false)
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
			out := make([]map[string]any, 0, len(hooks))
			for _, h := range hooks {
				out = append(out, map[string]any{"id": h.ID, "url": h.URL, "kinds": h.Kinds, "disabled": !h.DisabledAt.IsZero()})
			}
			return json.NewEncoder(stdout).Encode(out)
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
		return json.NewEncoder(stdout).Encode(map[string]any{"id": h.ID, "url": h.URL, "secret": h.Secret, "kinds": h.Kinds})
	}
	fmt.Fprintf(stdout, "webhook %s -> %s\nsigning secret (shown once): %s\n", h.ID, h.URL, h.Secret)
	return nil
}
