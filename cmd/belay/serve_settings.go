package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/belayrun/belay/config"
)

// belay serve's settings come from four places, the first that has one
// winning: its flags, the environment, the serve: section of the
// configuration file (--config), and the defaults. A container or a pod
// sets them in its environment (a Secret for the database URL), a file
// holds them beside the agents, and an operator overrides one with a flag.
//
// A setting's variable is BELAY_ and its flag's name in capitals with _
// for - (--keep-ended: $BELAY_KEEP_ENDED); its key under serve: is the
// flag's name with _ for - (keep_ended). An empty variable counts as
// unset.

// serveSettings are belay serve's settings once resolved.
type serveSettings struct {
	fs *commandFlags

	db                   *storeTarget
	world                string
	workers              int
	leaseTTL             time.Duration
	grace                time.Duration
	policy               string
	addr                 string
	publicURL            string
	secureCookies        bool
	allowPrivateWebhooks bool
	bodyTimeout          time.Duration
	configPath           string
	slack                string
	keepEnded            string
	logFormat            string
	logLevel             string
	slow                 *slowTool

	// keep is keepEnded parsed; zero keeps every run.
	keep time.Duration
	// level is logLevel parsed.
	level slog.Level
	// file is the configuration file, if one is named.
	file *config.File
	// from says where each flag's value came from: "flag", "$BELAY_ADDR",
	// "belay.yaml:3" or "default".
	from map[string]string
}

// The flags that are not settings of the environment or the file:
// --slow-tool is a fault for tests, and the file does not name itself.
const (
	slowToolName = "slow-tool"
	configName   = "config"
)

// settingEnv is the environment variable of flag name, or "" for none.
func settingEnv(name string) string {
	if name == slowToolName {
		return ""
	}
	return "BELAY_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// settingKey is the key under serve: in the configuration file of flag
// name, or "" for none.
func settingKey(name string) string {
	if name == slowToolName || name == configName {
		return ""
	}
	return strings.ReplaceAll(name, "-", "_")
}

// newServeSettings registers serve's flags; getenv reads the environment
// (os.Getenv, or a test's).
func newServeSettings(stdout io.Writer, getenv func(string) string) *serveSettings {
	s := &serveSettings{fs: newFlags("serve", serveUsage, stdout)}
	fs := s.fs
	s.db = dbFlagEnv(fs, getenv)
	fs.Lookup("db").Usage = "path of the SQLite database"
	fs.Lookup("database-url").Usage = "PostgreSQL URL, instead of --db; a --db given wins over $BELAY_DATABASE_URL"
	fs.Lookup("schema").Usage = "with --database-url, the schema of Belay's tables (default belay)"
	fs.StringVar(&s.world, "world", "", "path of the support world's database (default: DB + .world)")
	fs.IntVar(&s.workers, "workers", 16, "runs executed at once")
	fs.DurationVar(&s.leaseTTL, "lease-ttl", 30*time.Second, "lease time-to-live")
	fs.DurationVar(&s.grace, "grace", 30*time.Second, "how long a shutdown waits for steps in flight")
	fs.StringVar(&s.policy, "policy", "", "approval policy file (YAML or JSON) instead of the support desk's")
	fs.StringVar(&s.addr, "addr", "127.0.0.1:8080", "address of the API, the console and /metrics")
	fs.StringVar(&s.publicURL, "public-url", "", "URL people reach the console at, for links in notifications (default http://ADDR)")
	fs.BoolVar(&s.secureCookies, "secure-cookies", false, "mark session cookies Secure (set it when a TLS proxy fronts the server)")
	fs.BoolVar(&s.allowPrivateWebhooks, "allow-private-webhooks", false,
		"let webhooks reach loopback, private, link-local and other non-public addresses, for development and tests; "+
			"by default such URLs are refused at registration and deliveries to them fail")
	fs.DurationVar(&s.bodyTimeout, "body-timeout", 10*time.Second,
		"how long a request body may take to arrive after its headers; a slower one is answered 408 and its connection closed")
	fs.StringVar(&s.configPath, configName, "", "agents from a file (models, instructions, MCP servers, policy, budget) instead of the support desk; "+
		"its serve: section may hold these settings")
	s.slow = slowToolFlag(fs.FlagSet)
	fs.StringVar(&s.slack, "slack", "", "post approval cards to Slack and take decisions made there, as the slack section of this file (belay.yaml) says; "+
		"the bot token and signing secret are read from the environment variables it names")
	fs.StringVar(&s.keepEnded, "keep-ended", "", "delete runs that ended longer ago than this, with all they own: 90d, 720h (default: keep every run)")
	fs.StringVar(&s.logFormat, "log-format", "auto", "log format on stderr: text, json, or auto (text on a terminal, JSON otherwise)")
	fs.StringVar(&s.logLevel, "log-level", "info", "least level logged: debug (adds the probes' and /metrics' requests), info, warn or error")
	fs.VisitAll(func(f *flag.Flag) {
		env, key := settingEnv(f.Name), settingKey(f.Name)
		switch {
		case key != "":
			f.Usage += fmt.Sprintf(" [$%s, serve.%s]", env, key)
		case env != "":
			f.Usage += fmt.Sprintf(" [$%s]", env)
		}
	})
	return s
}

// parseServe resolves serve's settings from args, the environment (read
// through getenv) and the configuration file, and checks them.
func parseServe(args []string, stdout io.Writer, getenv func(string) string) (*serveSettings, error) {
	s := newServeSettings(stdout, getenv)
	if err := s.resolve(args, getenv); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *serveSettings) resolve(args []string, getenv func(string) string) error {
	fs := s.fs
	if err := fs.parseNone(args); err != nil {
		return err
	}
	s.from = map[string]string{}
	fs.Visit(func(f *flag.Flag) { s.from[f.Name] = "flag" })
	if s.from[configName] == "" {
		if v := getenv(settingEnv(configName)); v != "" {
			s.configPath, s.from[configName] = v, "$"+settingEnv(configName)
		}
	}
	var (
		values map[string]any
		data   []byte
	)
	if s.configPath != "" {
		var err error
		if data, err = os.ReadFile(s.configPath); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		if s.file, err = config.Parse(s.configPath, data); err != nil {
			return err
		}
		values = s.file.Serve
	}
	known := map[string]bool{}
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		key := settingKey(f.Name)
		if key != "" {
			known[key] = true
		}
		if s.from[f.Name] != "" || f.Name == configName || f.Name == "db" || f.Name == "database-url" {
			return
		}
		if env := settingEnv(f.Name); env != "" {
			if v := getenv(env); v != "" {
				if err := f.Value.Set(v); err != nil {
					errs = append(errs, fmt.Errorf("$%s: %q is not a value --%s takes (belay serve -h): %v", env, v, f.Name, err))
				}
				s.from[f.Name] = "$" + env
				return
			}
		}
		if v, ok := values[key]; ok && key != "" {
			s.fromFile(f.Name, key, v, data, &errs)
		}
	})
	s.resolveStore(getenv, values, data, &errs)
	for _, key := range slices.Sorted(maps.Keys(values)) {
		if !known[key] {
			errs = append(errs, fmt.Errorf("%s:%d: serve.%s is not a setting of belay serve (it takes %s)",
				s.configPath, lineOf(data, "$.serve."+key), key, strings.Join(slices.Sorted(maps.Keys(known)), ", ")))
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		if s.from[f.Name] == "" {
			s.from[f.Name] = "default"
		}
	})
	if len(errs) > 0 {
		return usageError{"serve: " + errors.Join(errs...).Error()}
	}
	return s.check()
}

// resolveStore applies the file's db or database_url when neither a flag
// nor the environment names a store: a flag and the environment were read
// when the flags were registered (dbFlagEnv), as every command does.
func (s *serveSettings) resolveStore(getenv func(string) string, values map[string]any, data []byte, errs *[]error) {
	for _, name := range []string{"db", "database-url"} {
		if s.from[name] == "" && getenv(settingEnv(name)) != "" {
			s.from[name] = "$" + settingEnv(name)
		}
	}
	if s.from["db"] != "" || s.from["database-url"] != "" {
		return
	}
	_, path := values["db"]
	_, url := values["database_url"]
	if path && url {
		*errs = append(*errs, fmt.Errorf("%s:%d: serve.db and serve.database_url both given: name one store",
			s.configPath, lineOf(data, "$.serve.database_url")))
		return
	}
	for name, key := range map[string]string{"db": "db", "database-url": "database_url"} {
		if v, ok := values[key]; ok {
			s.fromFile(name, key, v, data, errs)
		}
	}
}

// fromFile sets flag name to v, the value of key under serve: in the file.
func (s *serveSettings) fromFile(name, key string, v any, data []byte, errs *[]error) {
	at := fmt.Sprintf("%s:%d", s.configPath, lineOf(data, "$.serve."+key))
	var text string
	switch x := v.(type) {
	case string:
		text = x
	case bool:
		text = strconv.FormatBool(x)
	case int, int64, uint64:
		text = fmt.Sprint(x)
	case float64:
		text = strconv.FormatFloat(x, 'f', -1, 64)
	default:
		*errs = append(*errs, fmt.Errorf("%s: serve.%s: want a single value (a string, a number or true/false)", at, key))
		return
	}
	if err := s.fs.Set(name, text); err != nil {
		*errs = append(*errs, fmt.Errorf("%s: serve.%s: %q is not a value --%s takes (belay serve -h): %v", at, key, text, name, err))
		return
	}
	s.from[name] = at
}

// check validates what the flags' types do not, naming where the value
// came from.
func (s *serveSettings) check() error {
	bad := func(name, format string, a ...any) error {
		where := s.from[name]
		if where == "flag" || where == "default" {
			where = "--" + name
		} else {
			where += ": " + name
		}
		return usageError{"serve: " + where + ": " + fmt.Sprintf(format, a...)}
	}
	if s.bodyTimeout <= 0 {
		return bad("body-timeout", "must be positive, like 10s")
	}
	if s.workers <= 0 {
		return bad("workers", "must be at least 1")
	}
	if s.grace <= 0 {
		return bad("grace", "must be positive, like 30s")
	}
	if s.keepEnded != "" {
		k, err := parseAge(s.keepEnded)
		if err != nil {
			return bad("keep-ended", "%v", err)
		}
		s.keep = k
	}
	if !slices.Contains([]string{"auto", "text", "json"}, s.logFormat) {
		return bad("log-format", "%q is not text, json or auto", s.logFormat)
	}
	if err := s.level.UnmarshalText([]byte(s.logLevel)); err != nil {
		return bad("log-level", "%q is not debug, info, warn or error", s.logLevel)
	}
	return nil
}

// logger is the serve log on stderr, in the format and from the level the
// settings name.
func (s *serveSettings) logger(stderr io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: s.level}
	if s.logFormat == "text" || s.logFormat == "auto" && isTerminal(stderr) {
		return slog.New(slog.NewTextHandler(stderr, opts))
	}
	return slog.New(slog.NewJSONHandler(stderr, opts))
}

// attrs are the settings for the log, each with where it came from; a
// database URL without its password.
func (s *serveSettings) attrs() []slog.Attr {
	var out []slog.Attr
	s.fs.VisitAll(func(f *flag.Flag) {
		if f.Name == slowToolName {
			return
		}
		out = append(out, slog.Group(f.Name, slog.String("value", f.Value.String()), slog.String("from", s.from[f.Name])))
	})
	return out
}

// lineOf finds the line of the node at path in a YAML document, or 0.
func lineOf(data []byte, path string) int {
	p, err := yaml.PathString(path)
	if err != nil {
		return 0
	}
	node, err := p.ReadNode(strings.NewReader(string(data)))
	if err != nil || node == nil || node.GetToken() == nil {
		return 0
	}
	return node.GetToken().Position.Line
}
