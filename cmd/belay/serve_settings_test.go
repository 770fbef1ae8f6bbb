package main

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// settingsFile writes a configuration file with one agent and the given
// serve: section, and returns its path.
func settingsFile(t *testing.T, serve string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "belay.yaml")
	data := "agents:\n  - name: assistant\n    model: {provider: anthropic, name: claude-sonnet-4-5}\n" + serve
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// env is an environment for parseServe.
type env map[string]string

func (e env) get(name string) string { return e[name] }

// TestServeSettingsPrecedence sets each kind of setting in the file, the
// environment and a flag, in every combination: a flag wins over the
// environment, which wins over the file, which wins over the default.
func TestServeSettingsPrecedence(t *testing.T) {
	t.Parallel()
	file := settingsFile(t, `serve:
  addr: 10.0.0.1:8080
  grace: 45s
  secure_cookies: true
  workers: 4
  keep_ended: 90d
  public_url: https://file.example
  database_url: postgres://file@db/belay
  log_format: json
`)
	type want struct {
		addr          string
		grace         time.Duration
		secureCookies bool
		workers       int
		keep          time.Duration
		publicURL     string
		url, path     string
		from          map[string]string
	}
	cases := []struct {
		name string
		args []string
		env  env
		want want
	}{
		{name: "defaults", want: want{addr: "127.0.0.1:8080", grace: 30 * time.Second, workers: 16, path: "belay.db",
			from: map[string]string{"addr": "default", "grace": "default", "db": "default"}}},
		{name: "file", args: []string{"--config", file},
			want: want{addr: "10.0.0.1:8080", grace: 45 * time.Second, secureCookies: true, workers: 4, keep: 90 * 24 * time.Hour,
				publicURL: "https://file.example", url: "postgres://file@db/belay", path: "belay.db",
				from: map[string]string{"addr": file + ":5", "grace": file + ":6", "database-url": file + ":11"}}},
		{name: "file named by the environment", env: env{"BELAY_CONFIG": file},
			want: want{addr: "10.0.0.1:8080", grace: 45 * time.Second, secureCookies: true, workers: 4, keep: 90 * 24 * time.Hour,
				publicURL: "https://file.example", url: "postgres://file@db/belay", path: "belay.db",
				from: map[string]string{"config": "$BELAY_CONFIG", "workers": file + ":8"}}},
		{name: "environment over file", args: []string{"--config", file},
			env: env{"BELAY_ADDR": "0.0.0.0:9090", "BELAY_GRACE": "50s", "BELAY_SECURE_COOKIES": "false", "BELAY_WORKERS": "8",
				"BELAY_KEEP_ENDED": "720h", "BELAY_PUBLIC_URL": "https://env.example", "BELAY_DB": "/data/env.db"},
			want: want{addr: "0.0.0.0:9090", grace: 50 * time.Second, workers: 8, keep: 720 * time.Hour,
				publicURL: "https://env.example", path: "/data/env.db",
				from: map[string]string{"addr": "$BELAY_ADDR", "secure-cookies": "$BELAY_SECURE_COOKIES", "db": "$BELAY_DB"}}},
		{name: "an empty variable is unset", args: []string{"--config", file}, env: env{"BELAY_ADDR": ""},
			want: want{addr: "10.0.0.1:8080", grace: 45 * time.Second, secureCookies: true, workers: 4, keep: 90 * 24 * time.Hour,
				publicURL: "https://file.example", url: "postgres://file@db/belay", path: "belay.db",
				from: map[string]string{"addr": file + ":5"}}},
		{name: "flags over environment and file",
			args: []string{"--config", file, "--addr", "127.0.0.1:7070", "--grace", "1m", "--secure-cookies=false", "--workers", "2",
				"--keep-ended", "30d", "--public-url", "https://flag.example", "--db", "flag.db"},
			env: env{"BELAY_ADDR": "0.0.0.0:9090", "BELAY_GRACE": "50s", "BELAY_WORKERS": "8", "BELAY_KEEP_ENDED": "720h",
				"BELAY_PUBLIC_URL": "https://env.example", "BELAY_DATABASE_URL": "postgres://env@db/belay"},
			want: want{addr: "127.0.0.1:7070", grace: time.Minute, workers: 2, keep: 30 * 24 * time.Hour,
				publicURL: "https://flag.example", path: "flag.db",
				from: map[string]string{"addr": "flag", "grace": "flag", "db": "flag"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, err := parseServe(c.args, io.Discard, c.env.get)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.db.check(); err != nil {
				t.Fatal(err)
			}
			got := want{addr: s.addr, grace: s.grace, secureCookies: s.secureCookies, workers: s.workers, keep: s.keep,
				publicURL: s.publicURL, url: s.db.url, path: s.db.path, from: c.want.from}
			if got.addr != c.want.addr || got.grace != c.want.grace || got.secureCookies != c.want.secureCookies ||
				got.workers != c.want.workers || got.keep != c.want.keep || got.publicURL != c.want.publicURL ||
				got.url != c.want.url || got.path != c.want.path {
				t.Errorf("settings\n got %+v\nwant %+v", got, c.want)
			}
			for name, from := range c.want.from {
				if s.from[name] != from {
					t.Errorf("%s came from %q, want %q", name, s.from[name], from)
				}
			}
		})
	}
}

// TestServeSettingsMistakes: a value no setting takes, a key that is no
// setting and two stores are refused, saying where the mistake is and
// without the database URL's password.
func TestServeSettingsMistakes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		serve string
		env   env
		args  []string
		want  []string
	}{
		{name: "bad duration in the file", serve: "serve:\n  grace: soon\n",
			want: []string{"belay.yaml:5: serve.grace", `"soon"`}},
		{name: "unknown key", serve: "serve:\n  adress: 0.0.0.0:8080\n",
			want: []string{"belay.yaml:5: serve.adress is not a setting", "addr"}},
		{name: "a list", serve: "serve:\n  addr: [a, b]\n",
			want: []string{"belay.yaml:5: serve.addr: want a single value"}},
		{name: "two stores in the file", serve: "serve:\n  db: /data/belay.db\n  database_url: postgres://u:hunter2@db/belay\n",
			want: []string{"belay.yaml:6: serve.db and serve.database_url both given"}},
		{name: "bad variable", env: env{"BELAY_SECURE_COOKIES": "yes please"},
			want: []string{"$BELAY_SECURE_COOKIES", `"yes please"`, "--secure-cookies"}},
		{name: "bad age in a variable", env: env{"BELAY_KEEP_ENDED": "forever"},
			want: []string{"$BELAY_KEEP_ENDED: keep-ended", `"forever" is not an age`}},
		{name: "bad log format", serve: "serve:\n  log_format: xml\n",
			want: []string{"belay.yaml:5: log-format", `"xml" is not text, json or auto`}},
		{name: "bad log level flag", args: []string{"--log-level", "loud"},
			want: []string{"--log-level", `"loud"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			args := c.args
			if c.serve != "" {
				args = append(args, "--config", settingsFile(t, c.serve))
			}
			_, err := parseServe(args, io.Discard, c.env.get)
			var ue usageError
			if !errors.As(err, &ue) {
				t.Fatalf("parseServe: %v, want a usage error", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q holds the database password", err)
			}
		})
	}
}

// TestServeHelpNamesEverySetting: serve -h shows each setting's variable
// and key, which the deployment files are checked against.
func TestServeHelpNamesEverySetting(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	if err := run(t.Context(), []string{"serve", "-h"}, &out, io.Discard); err != nil && !errors.Is(err, flag.ErrHelp) {
		t.Fatal(err)
	}
	for _, w := range []string{"[$BELAY_ADDR, serve.addr]", "[$BELAY_DATABASE_URL, serve.database_url]", "[$BELAY_KEEP_ENDED, serve.keep_ended]",
		"[$BELAY_SECURE_COOKIES, serve.secure_cookies]", "[$BELAY_PUBLIC_URL, serve.public_url]", "[$BELAY_CONFIG]", "[$BELAY_LOG_FORMAT, serve.log_format]"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("serve -h does not show %s:\n%s", w, out.String())
		}
	}
}

// TestStoreVariables: every command reads its store from $BELAY_DB,
// $BELAY_DATABASE_URL and $BELAY_SCHEMA, as serve does, so that a command
// run beside a server (docker compose exec) works on the server's schema.
func TestStoreVariables(t *testing.T) {
	t.Parallel()
	fs := newFlags("runs", "usage: belay runs", io.Discard)
	target := dbFlagEnv(fs, env{"BELAY_DB": "/data/b.db", "BELAY_DATABASE_URL": "postgres://db/belay", "BELAY_SCHEMA": "tenant_a"}.get)
	if err := fs.parseNone(nil); err != nil {
		t.Fatal(err)
	}
	if target.path != "/data/b.db" || target.url != "postgres://db/belay" || target.schema != "tenant_a" {
		t.Errorf("store from the environment: %+v", *target)
	}
}
