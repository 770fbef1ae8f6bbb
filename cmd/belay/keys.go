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
	"github.com/belayrun/belay/store"
)

// openAccess opens a store for the server's credentials and webhooks. Only
// a command that sets a store up (serve, the first key) may create it: the
// others would read or change a new, empty file a mistyped --db named.
func (t *storeTarget) openAccess(ctx context.Context, create bool) (store.AccessStore, error) {
	open := t.openExisting
	if create {
		open = t.open
	}
	s, err := open(ctx)
	if err != nil {
		return nil, err
	}
	as, ok := s.(store.AccessStore)
	if !ok {
		s.Close()
		return nil, fmt.Errorf("the store of %s keeps no API keys", t.Name())
	}
	return as, nil
}

// runKeys manages API keys: belay keys create|list|revoke.
func runKeys(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	sub, rest := "", args
	if len(args) > 0 {
		sub, rest = args[0], args[1:]
	}
	fs := newFlags("keys "+sub, stderr)
	db := dbFlag(fs)
	tenant := fs.String("tenant", "", "tenant the key belongs to (required)")
	asJSON := fs.Bool("json", false, "print JSON")
	var roles []store.Role
	var name string
	if sub == "create" {
		fs.Func("role", "role of the key: operator, approver or admin (repeatable)", func(v string) error {
			for _, r := range strings.Split(v, ",") {
				roles = append(roles, store.Role(strings.TrimSpace(r)))
			}
			return nil
		})
		fs.StringVar(&name, "name", "", "who holds the key (recorded on every decision taken with it)")
	}
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: belay keys create --tenant T --role approver [--role operator] [--name WHO] [--json]")
		fmt.Fprintln(stderr, "       belay keys list [--tenant T] [--json]")
		fmt.Fprintln(stderr, "       belay keys revoke KEY_ID --tenant T")
		fmt.Fprintln(stderr)
		fs.PrintDefaults()
	}
	if sub != "create" && sub != "list" && sub != "revoke" {
		fs.Usage()
		return usageError{"keys: want create, list or revoke"}
	}
	pos, err := parseInterspersed(fs, rest)
	if err != nil {
		return usageError{err.Error()}
	}
	if *tenant == "" && sub != "list" {
		return usageError{"keys " + sub + ": --tenant is required"}
	}
	st, err := db.openAccess(ctx, sub == "create")
	if err != nil {
		return err
	}
	defer st.Close()
	switch sub {
	case "create":
		if len(pos) > 0 {
			return usageError{"keys create: unexpected argument " + pos[0]}
		}
		k, err := server.CreateKey(ctx, st, *tenant, name, roles, time.Now())
		if err != nil {
			return fmt.Errorf("keys create: %w", err)
		}
		if *asJSON {
			return json.NewEncoder(stdout).Encode(map[string]any{"key": k.Secret, "id": k.Key.ID, "tenant": k.Key.Tenant, "roles": k.Key.Roles})
		}
		fmt.Fprintln(stdout, k.Secret)
		fmt.Fprintf(stderr, "key %s for tenant %s with roles %v; it is shown once, store it now\n", k.Key.ID, k.Key.Tenant, k.Key.Roles)
		return nil
	case "list":
		keys, err := st.APIKeys(ctx, *tenant)
		if err != nil {
			return err
		}
		if *asJSON {
			type row struct {
				ID        string       `json:"id"`
				Tenant    string       `json:"tenant"`
				Name      string       `json:"name"`
				Roles     []store.Role `json:"roles"`
				CreatedAt time.Time    `json:"created_at"`
				Revoked   bool         `json:"revoked"`
			}
			out := []row{}
			for _, k := range keys {
				out = append(out, row{k.ID, k.Tenant, k.Name, k.Roles, k.CreatedAt, !k.RevokedAt.IsZero()})
			}
			return json.NewEncoder(stdout).Encode(out)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tTENANT\tNAME\tROLES\tCREATED\tREVOKED")
		for _, k := range keys {
			revoked := ""
			if !k.RevokedAt.IsZero() {
				revoked = k.RevokedAt.Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s\t%s\n", k.ID, k.Tenant, k.Name, k.Roles, k.CreatedAt.Format(time.RFC3339), revoked)
		}
		return tw.Flush()
	default:
		if len(pos) != 1 {
			return usageError{"keys revoke: name one KEY_ID"}
		}
		if err := st.RevokeAPIKey(ctx, *tenant, pos[0], time.Now()); err != nil {
			return fmt.Errorf("keys revoke %s: %w", pos[0], err)
		}
		fmt.Fprintf(stdout, "revoked %s; its console sessions ended\n", pos[0])
		return nil
	}
}

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
