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

// runWebhooks manages webhook endpoints: belay webhooks add|list.
func runWebhooks(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	sub, rest := "", args
	if len(args) > 0 {
		sub, rest = args[0], args[1:]
	}
	fs := newFlags("webhooks "+sub, stderr)
	db := dbFlag(fs)
	tenant := fs.String("tenant", "", "tenant whose notifications are sent (required)")
	kinds := fs.String("kinds", "", "comma-separated kinds to send (approval_requested, escalation, run_finished); default all")
	asJSON := fs.Bool("json", false, "print JSON")
	var allowPrivate bool
	if sub == "add" {
		fs.BoolVar(&allowPrivate, "allow-private", false,
			"accept a URL whose host is a loopback, private or link-local address, for development (belay serve delivers there only with --allow-private-webhooks)")
	}
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: belay webhooks add URL --tenant T [--kinds approval_requested,escalation] [--allow-private] [--json]")
		fmt.Fprintln(stderr, "       belay webhooks list --tenant T")
		fmt.Fprintln(stderr)
		fs.PrintDefaults()
	}
	if sub != "add" && sub != "list" {
		fs.Usage()
		return usageError{"webhooks: want add or list"}
	}
	pos, err := parseInterspersed(fs, rest)
	if err != nil {
		return usageError{err.Error()}
	}
	if *tenant == "" {
		return usageError{"webhooks " + sub + ": --tenant is required"}
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
