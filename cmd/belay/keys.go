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

const keysUsage = `usage: belay keys create --tenant T --role approver [--role operator] [--name WHO] [--json]
       belay keys list [--tenant T] [--json]
       belay keys revoke KEY_ID --tenant T

API keys of belay serve's API and console; belay keys VERB -h shows a verb's flags.`

var keysVerbUsage = map[string]string{
	"create": `usage: belay keys create --tenant T --role ROLE [--role ROLE] [--name WHO] [--json] [--db PATH]

Creates an API key of tenant T with the roles given (operator, approver,
admin) and prints it once: only its hash is stored. Creates the store if it
does not exist.`,
	"list": `usage: belay keys list [--tenant T] [--json] [--db PATH]

Lists the API keys of every tenant, or of T, without their secrets.`,
	"revoke": `usage: belay keys revoke KEY_ID --tenant T [--db PATH]

Revokes the key KEY_ID of tenant T; its console sessions end with it.`,
}

// runKeys manages API keys: belay keys create|list|revoke.
func runKeys(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	sub, rest, err := splitVerb("keys", keysUsage, []string{"create", "list", "revoke"}, args, stdout)
	if err != nil {
		return err
	}
	fs := newFlags("keys "+sub, keysVerbUsage[sub], stdout)
	db := dbFlag(fs)
	tenant := fs.String("tenant", "", "tenant the key belongs to (required)")
	asJSON := jsonFlag(fs, "the keys, one object each")
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
	pos, err := fs.parse(rest)
	if err != nil {
		return err
	}
	if *tenant == "" && sub != "list" {
		return usageError{"keys " + sub + ": --tenant is required"}
	}
	st, err := db.openAccess(ctx, map[string]accessMode{"create": accessCreate, "list": accessRead, "revoke": accessWrite}[sub])
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
			// The secret is in the output once, as key.
			return writeJSON(stdout, struct {
				Key string `json:"key"`
				keyJSON
			}{k.Secret, newKeyJSON(k.Key)})
		}
		fmt.Fprintln(stdout, k.Secret)
		fmt.Fprintf(stderr, "key %s for tenant %s with roles %v; it is shown once, store it now\n", k.Key.ID, k.Key.Tenant, k.Key.Roles)
		return nil
	case "list":
		if len(pos) > 0 {
			return usageError{fmt.Sprintf("keys list: unexpected argument %q (%s)", pos[0], fs.usageLine())}
		}
		keys, err := st.APIKeys(ctx, *tenant)
		if err != nil {
			return err
		}
		if *asJSON {
			out := make([]keyJSON, len(keys))
			for i, k := range keys {
				out[i] = newKeyJSON(k)
			}
			return writeJSONLines(stdout, out)
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
		if *asJSON {
			k, err := st.APIKey(ctx, pos[0])
			if err != nil {
				return fmt.Errorf("keys revoke %s: %w", pos[0], err)
			}
			return writeJSON(stdout, newKeyJSON(k))
		}
		fmt.Fprintf(stdout, "revoked %s; its console sessions ended\n", pos[0])
		return nil
	}
}

// keyJSON is an API key as --json prints it, without its secret.
type keyJSON struct {
	ID        string       `json:"id"`
	Tenant    string       `json:"tenant"`
	Name      string       `json:"name"`
	Roles     []store.Role `json:"roles"`
	CreatedAt time.Time    `json:"created_at"`
	Revoked   bool         `json:"revoked"`
	RevokedAt *time.Time   `json:"revoked_at,omitempty"`
}

func newKeyJSON(k store.APIKey) keyJSON {
	return keyJSON{ID: k.ID, Tenant: k.Tenant, Name: k.Name, Roles: k.Roles, CreatedAt: k.CreatedAt.UTC(),
		Revoked: !k.RevokedAt.IsZero(), RevokedAt: optionalTime(k.RevokedAt)}
}
