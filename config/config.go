// Package config loads agents from a file, so that a user runs a real agent
// (a model provider, instructions, MCP servers and their tools, a policy, a
// budget and the requirements that make a run done) without writing Go:
//
//	agents:
//	  - name: support
//	    model: {provider: anthropic, name: claude-sonnet-4-5}
//	    prices: {claude-sonnet-4-5: {input_per_mtok: 3, output_per_mtok: 15}}
//	    instructions: |
//	      You are a support agent on a billing desk. ...
//	    mcp_servers:
//	      - name: billing
//	        command: [node, billing-server.js]
//	        tools:
//	          refund: {effect: irreversible, key_fields: [charge_id, amount_usd]}
//	    policy: support-policy.yaml
//	    budget: {max_turns: 30, max_usd: 0.50, deadline: 10m}
//	    requirements:
//	      - name: order refunded
//	        http_get: https://billing.internal/tickets/${ticket}
//	        headers_from_env: {Authorization: BILLING_AUTHORIZATION}
//	        expect: result.status == "refunded"
//	      - name: refund on record
//	        mcp: {server: billing, tool: list_refunds, args: {ticket: "${ticket}"}}
//	        expect: >
//	          effects.exists(e, e.tool == "refund" && e.state == "done"
//	            && e.result.refund_id in result.refunds.map(r, r.id))
//
// Mistakes are errors that name the file, the line and the field.
//
// # Requirements
//
// A requirement is checked when the run's model stops calling tools; the
// run is done only if every one holds, and escalates unverified otherwise.
// Each fetches a JSON result, by an HTTP GET (http_get, with headers, and
// headers_from_env for credentials, which are read from the environment
// when the agents are built and never written anywhere) or from a read tool
// of one of the agent's MCP servers (mcp), and holds it to expect, an
// expression in CEL, the Common Expression Language (https://cel.dev): a
// small language, without loops or side effects, whose evaluation is
// bounded. Its variables are the run's own data:
//
//   - ticket: the run's client request id, often the ticket or order it is
//     about;
//   - input: the run's input;
//   - run_id, tenant and user;
//   - effects: the run's side effects in the order they began, each a map
//     of tool (the name the model called), key (its idempotency key),
//     state ("done", "failed", "unknown" or "pending"), args and result (as
//     JSON);
//   - result, in expect alone: the GET's body or the tool's result, as JSON
//     (objects are maps, numbers doubles).
//
// In http_get and in the strings of mcp.args, ${...} is replaced by the
// value of the expression inside: in a URL as text escaped for the path or
// the query where it stands (it cannot stand in the scheme or host: the
// run's data does not choose where a request goes); in an argument, a
// string that is one ${...} takes the value whatever its type, and one with
// other text too takes it as text. $${ is a literal ${. Expressions are
// compiled, and their variables and types checked, when the file is loaded.
//
// A check fails closed: a GET that gets no answer, a redirect (not
// followed, so headers go only where the file says) or a status other than
// 2xx, a body that is not JSON, an expression that fails (a missing field
// included) or is not true: the requirement does not hold, and its error is
// in the run's verify event. Effects are read from the ledger BuildWith is
// given (BuildParams.Effects); without one, a requirement that reads them
// does not hold.
package config

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/internal/cronspec"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/policy"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/tools/mcp"
)

// File is a parsed configuration file.
type File struct {
	Agents []Agent `yaml:"agents"`
	// Schedules start runs of the file's agents on cron specs; belay
	// serve adds them to the store when it starts (see Schedule).
	Schedules []Schedule `yaml:"schedules"`
	// Serve holds belay serve's settings, named as its flags with _ for -
	// (addr, database_url, keep_ended). belay serve reads and checks them;
	// this package keeps them as the file wrote them.
	Serve map[string]any `yaml:"serve"`
	// Slack is read by package slack (belay serve --slack), not here.
	Slack any `yaml:"slack"`

	path string
	data []byte
}

// Agent configures one agent.
type Agent struct {
	Name         string `yaml:"name"`
	Instructions string `yaml:"instructions"`
	Model        Model  `yaml:"model"`
	// Fallback answers when Model is overloaded; omit it for agents whose
	// runs must not change model midway.
	Fallback *Model `yaml:"fallback"`
	// Prices are per model name, in dollars per million tokens. Required
	// for a dollar budget.
	Prices          map[string]model.Price `yaml:"prices"`
	MaxOutputTokens int                    `yaml:"max_output_tokens"`
	MCPServers      []MCPServer            `yaml:"mcp_servers"`
	// Policy is a policy file, relative to the configuration file. Default:
	// belay.DefaultPolicy.
	Policy string `yaml:"policy"`
	Budget Budget `yaml:"budget"`
	// Requirements are checked against the world when the model stops
	// calling tools; a run is done only if all hold. Without any, a run ends
	// done with stop reason no_requirements.
	Requirements []Requirement `yaml:"requirements"`
	// Limits are the provider limits the agent's model calls are held to,
	// shared by every worker of the store (belay.ProviderLimit).
	Limits []Limit `yaml:"limits"`
	// MaxRunning caps the agent's runs in a step at once, and
	// StartsPerMinute how many of them start a minute, across every
	// worker of the store (belay.Agent.MaxRunning). 0: what the store
	// holds (belay agent-limit).
	MaxRunning      int     `yaml:"max_running"`
	StartsPerMinute float64 `yaml:"starts_per_minute"`
	// Elicitations says who answers the questions the agent's MCP tools ask
	// during their calls (belay.Elicitations). Default: a person of the
	// approver role.
	Elicitations *Elicitations `yaml:"elicitations"`
	// Interactive marks an agent a person watches as it runs (a chat):
	// when its model is unavailable, a run escalates after max_wait
	// (default 20s) with message for the customer (belay.Interactive).
	Interactive *Interactive `yaml:"interactive"`
	// OnSpendCap is what a run does when its tenant's spend cap is
	// reached: "wait" (the default) or "escalate" (belay.SpendCapAction).
	OnSpendCap string `yaml:"on_spend_cap"`
}

// Elicitations is belay.Elicitations in a file.
type Elicitations struct {
	User bool   `yaml:"user"`
	Role string `yaml:"role"`
}

// Interactive is belay.Interactive in a file.
type Interactive struct {
	MaxWait Duration `yaml:"max_wait"`
	Message string   `yaml:"message"`
}

// Limit is belay.ProviderLimit in a file: a provider account's requests
// and tokens per minute, shared by the agents that name it.
type Limit struct {
	Name              string  `yaml:"name"`
	RequestsPerMinute float64 `yaml:"requests_per_minute"`
	TokensPerMinute   float64 `yaml:"tokens_per_minute"`
}

// Schedule starts a run of one of the file's agents at each firing of a
// cron spec:
//
//	schedules:
//	  - name: nightly-refunds
//	    agent: support
//	    cron: "0 2 * * *"
//	    input: Check yesterday's refunds.
//	    overlap: queue      # skip (default), queue or allow
//	    missed: run_once    # skip or run_once (default)
//
// Added again at each start, a schedule whose spec is unchanged keeps its
// next firing, so firings missed while belay serve was down follow the
// missed policy.
type Schedule struct {
	Name string `yaml:"name"`
	// Tenant owns the schedule and its runs; default belay.DefaultTenant.
	Tenant  string `yaml:"tenant"`
	Agent   string `yaml:"agent"`
	Cron    string `yaml:"cron"`
	Input   string `yaml:"input"`
	Overlap string `yaml:"overlap"`
	Missed  string `yaml:"missed"`
}

// ScheduleRequests are the file's schedules as belay.Operator.AddSchedule
// takes them, by the file.
func (f *File) ScheduleRequests() []belay.ScheduleRequest {
	out := make([]belay.ScheduleRequest, len(f.Schedules))
	for i, s := range f.Schedules {
		out[i] = belay.ScheduleRequest{Name: s.Name, Tenant: s.Tenant, Agent: s.Agent, Cron: s.Cron, Input: s.Input,
			Overlap: store.OverlapPolicy(s.Overlap), Missed: store.MissedPolicy(s.Missed), By: "config:" + filepath.Base(f.path)}
	}
	return out
}

// Model says which model answers and how its client retries.
type Model struct {
	// Provider is anthropic or openai (any OpenAI-compatible server, with
	// BaseURL).
	Provider string `yaml:"provider"`
	Name     string `yaml:"name"`
	BaseURL  string `yaml:"base_url"`
	// MaxRetries and Timeout configure the provider SDK's retries, once.
	// Zero keeps the provider package's defaults.
	MaxRetries int      `yaml:"max_retries"`
	Timeout    Duration `yaml:"timeout"`
}

// MCPServer is one MCP server and how Belay treats its tools.
type MCPServer struct {
	Name    string          `yaml:"name"`
	Command []string        `yaml:"command"`
	Env     []string        `yaml:"env"`
	URL     string          `yaml:"url"`
	Prefix  string          `yaml:"prefix"`
	Tools   map[string]Tool `yaml:"tools"`
	// IgnoreAnnotations treats the server's tools as irreversible unless
	// configured: annotations are the server's own claims.
	IgnoreAnnotations bool `yaml:"ignore_annotations"`
}

// Tool overrides what an MCP tool's annotations say.
type Tool struct {
	Effect    string   `yaml:"effect"`
	External  bool     `yaml:"external"`
	KeyFields []string `yaml:"key_fields"`
	HonorsKey bool     `yaml:"honors_key"`
	Timeout   Duration `yaml:"timeout"`
	// Elicits: the tool may ask a question during its call (mcp.ToolConfig.Elicits).
	Elicits bool `yaml:"elicits"`
}

// Budget is belay.Budget in a file.
type Budget struct {
	MaxTurns        int      `yaml:"max_turns"`
	MaxInputTokens  int64    `yaml:"max_input_tokens"`
	MaxOutputTokens int64    `yaml:"max_output_tokens"`
	MaxUSD          float64  `yaml:"max_usd"`
	Deadline        Duration `yaml:"deadline"`
}

// Duration reads "30s", "10m", "1h30m". A malformed one is reported by the
// file check, which knows its line.
type Duration struct {
	D   time.Duration
	raw string
	bad bool
}

// UnmarshalYAML keeps the text and parses it.
func (d *Duration) UnmarshalYAML(b []byte) error {
	if err := yaml.Unmarshal(b, &d.raw); err != nil {
		return err
	}
	v, err := time.ParseDuration(d.raw)
	d.D, d.bad = v, err != nil
	return nil
}

func (d Duration) check(fail func(format string, a ...any)) {
	if d.bad {
		fail("%q is not a duration (like 30s, 10m, 1h)", d.raw)
	}
}

var (
	providers = []string{"anthropic", "openai"}
	effects   = []string{string(belay.Read), string(belay.Write), string(belay.Irreversible)}
)

// Load reads and checks the configuration file at path.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// Parse reads and checks a configuration. name is used in errors.
func Parse(name string, data []byte) (*File, error) {
	f := &File{path: name, data: data}
	if err := yaml.UnmarshalWithOptions(data, f, yaml.DisallowUnknownField()); err != nil {
		return nil, fmt.Errorf("%s:%s", name, strings.TrimPrefix(oneLine(yaml.FormatError(err, false, false)), "["))
	}
	if err := f.check(data); err != nil {
		return nil, err
	}
	return f, nil
}

// oneLine keeps the first line of a formatted YAML error, "[3:5] msg" made
// "3:5: msg".
func oneLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return strings.Replace(s, "] ", ": ", 1)
}

// check validates what the YAML types cannot, naming the line of each
// mistake.
func (f *File) check(data []byte) error {
	var errs []error
	fail := func(path, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s:%d: %s: %s", f.path, lineOf(data, path), strings.TrimPrefix(path, "$."), fmt.Sprintf(format, a...)))
	}
	if len(f.Agents) == 0 {
		fail("$", "no agents: add at least one under agents:")
	}
	envs, err := newCELEnvs()
	if err != nil {
		return fmt.Errorf("%s: requirements: %w", f.path, err)
	}
	seen := map[string]bool{}
	for i, a := range f.Agents {
		at := fmt.Sprintf("$.agents[%d]", i)
		switch {
		case a.Name == "":
			fail(at, "name is required")
		case seen[a.Name]:
			fail(at+".name", "two agents named %q", a.Name)
		}
		seen[a.Name] = true
		a.Model.Timeout.check(func(format string, x ...any) { fail(at+".model.timeout", format, x...) })
		a.Budget.Deadline.check(func(format string, x ...any) { fail(at+".budget.deadline", format, x...) })
		if !slices.Contains(providers, a.Model.Provider) {
			fail(at+".model", "provider %q is not one of %s", a.Model.Provider, strings.Join(providers, ", "))
		}
		if a.Model.Name == "" {
			fail(at+".model", "name is required (the provider's model name)")
		}
		if fb := a.Fallback; fb != nil {
			fb.Timeout.check(func(format string, x ...any) { fail(at+".fallback.timeout", format, x...) })
			if !slices.Contains(providers, fb.Provider) || fb.Name == "" {
				fail(at+".fallback", "needs a provider (%s) and a name", strings.Join(providers, ", "))
			}
		}
		if a.MaxRunning < 0 || a.StartsPerMinute < 0 {
			fail(at, "max_running and starts_per_minute must be 0 (none) or more")
		}
		for j, l := range a.Limits {
			if l.Name == "" || l.RequestsPerMinute < 0 || l.TokensPerMinute < 0 || (l.RequestsPerMinute == 0 && l.TokensPerMinute == 0) {
				fail(fmt.Sprintf("%s.limits[%d]", at, j), "needs a name and requests_per_minute or tokens_per_minute above 0")
			}
		}
		if a.Interactive != nil {
			a.Interactive.MaxWait.check(func(format string, x ...any) { fail(at+".interactive.max_wait", format, x...) })
		}
		if a.OnSpendCap != "" && a.OnSpendCap != "wait" && a.OnSpendCap != "escalate" {
			fail(at+".on_spend_cap", "%q is not one of wait, escalate", a.OnSpendCap)
		}
		if a.Budget.MaxUSD > 0 {
			if _, ok := a.Prices[a.Model.Name]; !ok {
				fail(at+".budget", "max_usd needs a price for %q under prices; without one its calls would count as free", a.Model.Name)
			}
		}
		for j, s := range a.MCPServers {
			sat := fmt.Sprintf("%s.mcp_servers[%d]", at, j)
			if s.Name == "" {
				fail(sat, "name is required")
			}
			if (len(s.Command) == 0) == (s.URL == "") {
				fail(sat, "set either command (stdio) or url (streamable HTTP)")
			}
			for tool, t := range s.Tools {
				t.Timeout.check(func(format string, x ...any) { fail(sat+".tools."+tool+".timeout", format, x...) })
				if t.Effect != "" && !slices.Contains(effects, t.Effect) {
					fail(sat+".tools."+tool+".effect", "%q is not one of %s", t.Effect, strings.Join(effects, ", "))
				}
			}
		}
		checkRequirements(envs, &f.Agents[i], at, fail)
	}
	names := map[string]bool{}
	for i, sc := range f.Schedules {
		at := fmt.Sprintf("$.schedules[%d]", i)
		if !seen[sc.Agent] {
			fail(at+".agent", "%q is not an agent of this file", sc.Agent)
		}
		if names[sc.Tenant+"/"+sc.Name] {
			fail(at+".name", "two schedules named %q", sc.Name)
		}
		names[sc.Tenant+"/"+sc.Name] = true
		if _, err := cronspec.Parse(sc.Cron); err != nil {
			fail(at+".cron", "%v", err)
		}
		if sc.Overlap != "" && !slices.Contains([]string{"skip", "queue", "allow"}, sc.Overlap) {
			fail(at+".overlap", "%q is not one of skip, queue, allow", sc.Overlap)
		}
		if sc.Missed != "" && !slices.Contains([]string{"skip", "run_once"}, sc.Missed) {
			fail(at+".missed", "%q is not one of skip, run_once", sc.Missed)
		}
	}
	return errors.Join(errs...)
}

// lineOf finds the line of the node at path, or 0.
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

// ModelBuilder makes the model a configuration names: the provider packages
// stay out of this package's imports, and tests can substitute one.
type ModelBuilder func(ctx context.Context, m Model) (model.Model, error)

// BuildParams is what BuildWith needs besides the file.
type BuildParams struct {
	// Models makes the models the file names. Required.
	Models ModelBuilder
	// Effects reads a run's ledger for the requirements whose expressions
	// read effects: pass the runtime's store. Nil: such a requirement does
	// not hold, and its error says why.
	Effects EffectReader
	// HTTPClient sends the requirements' GETs, without following
	// redirects. Default: a client of its own.
	HTTPClient *http.Client
}

// Build is BuildWith with only the models: requirements that read the
// run's effects do not hold.
func (f *File) Build(ctx context.Context, models ModelBuilder) (agents []*belay.Agent, close func() error, err error) {
	return f.BuildWith(ctx, BuildParams{Models: models})
}

// BuildWith makes the agents: it connects to their MCP servers, lists their
// tools, loads their policy files and makes their requirements' checks.
// close disconnects the MCP servers.
func (f *File) BuildWith(ctx context.Context, p BuildParams) (agents []*belay.Agent, close func() error, err error) {
	if p.Models == nil {
		return nil, func() error { return nil }, errors.New("config: BuildParams.Models is required")
	}
	models := p.Models
	var clients []*mcp.Client
	close = func() error {
		var errs []error
		for _, c := range clients {
			errs = append(errs, c.Close())
		}
		return errors.Join(errs...)
	}
	defer func() {
		if err != nil {
			_ = close()
		}
	}()
	for i, a := range f.Agents {
		m, err := models(ctx, a.Model)
		if err != nil {
			return nil, close, fmt.Errorf("%s: agent %q: model: %w", f.path, a.Name, err)
		}
		var fallback model.Model
		if a.Fallback != nil {
			if fallback, err = models(ctx, *a.Fallback); err != nil {
				return nil, close, fmt.Errorf("%s: agent %q: fallback model: %w", f.path, a.Name, err)
			}
		}
		agent := &belay.Agent{Name: a.Name, Model: m, Fallback: fallback, Instructions: a.Instructions, Prices: model.PriceTable(a.Prices),
			MaxOutputTokens: a.MaxOutputTokens, MaxRunning: a.MaxRunning, StartsPerMinute: a.StartsPerMinute,
			Budget: belay.Budget{MaxTurns: a.Budget.MaxTurns, MaxInputTokens: a.Budget.MaxInputTokens,
				MaxOutputTokens: a.Budget.MaxOutputTokens, MaxUSD: a.Budget.MaxUSD, Deadline: a.Budget.Deadline.D}}
		if e := a.Elicitations; e != nil {
			agent.Elicitations = &belay.Elicitations{User: e.User, Role: store.Role(e.Role)}
		}
		for _, l := range a.Limits {
			agent.Limits = append(agent.Limits, belay.ProviderLimit{Name: l.Name, RequestsPerMinute: l.RequestsPerMinute,
				TokensPerMinute: l.TokensPerMinute})
		}
		if i := a.Interactive; i != nil {
			agent.Interactive = &belay.Interactive{MaxWait: i.MaxWait.D, Message: i.Message}
		}
		if a.OnSpendCap == "escalate" {
			agent.OnSpendCap = belay.SpendCapEscalate
		}
		byName := map[string]*mcp.Client{}
		for _, s := range a.MCPServers {
			srv := mcp.Server{Name: s.Name, Command: s.Command, Env: s.Env, URL: s.URL, Prefix: s.Prefix,
				IgnoreAnnotations: s.IgnoreAnnotations, Tools: map[string]mcp.ToolConfig{}}
			for name, t := range s.Tools {
				srv.Tools[name] = mcp.ToolConfig{Effect: belay.EffectClass(t.Effect), External: t.External,
					KeyFields: t.KeyFields, HonorsKey: t.HonorsKey, Timeout: t.Timeout.D, Elicits: t.Elicits}
			}
			c, err := mcp.Connect(ctx, srv)
			if err != nil {
				return nil, close, fmt.Errorf("%s: agent %q: MCP server %q: %w", f.path, a.Name, s.Name, err)
			}
			clients = append(clients, c)
			byName[s.Name] = c
			tools, err := c.Tools(ctx)
			if err != nil {
				return nil, close, fmt.Errorf("%s: agent %q: MCP server %q: %w", f.path, a.Name, s.Name, err)
			}
			agent.Tools = append(agent.Tools, tools...)
		}
		if a.Policy != "" {
			path := a.Policy
			if !filepath.IsAbs(path) {
				path = filepath.Join(filepath.Dir(f.path), path)
			}
			p, err := policy.Load(path)
			if err != nil {
				return nil, close, fmt.Errorf("%s: agent %q: %w", f.path, a.Name, err)
			}
			agent.Policy, agent.PolicyVersion = p.Policy(), p.Version()
		}
		for j, r := range a.Requirements {
			req, err := f.requirement(ctx, fmt.Sprintf("$.agents[%d].requirements[%d]", i, j), r, byName, p)
			if err != nil {
				return nil, close, err
			}
			agent.Requirements = append(agent.Requirements, req)
		}
		agents = append(agents, agent)
	}
	return agents, close, nil
}
