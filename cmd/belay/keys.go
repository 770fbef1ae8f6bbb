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
