package config

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
)

const good = `agents:
  - name: support
    model: {provider: anthropic, name: claude-sonnet-4-5, timeout: 60s, max_retries: 3}
    fallback: {provider: openai, name: gpt-4o-mini}
    prices: {claude-sonnet-4-5: {input_per_mtok: 3, output_per_mtok: 15}, gpt-4o-mini: {input_per_mtok: 0.15, output_per_mtok: 0.6}}
    instructions: |
      You are a support agent.
    policy: policy.yaml
    budget: {max_turns: 30, max_usd: 0.50, deadline: 10m}
    limits: [{name: anthropic-prod, requests_per_minute: 4000, tokens_per_minute: 400000}]
    max_running: 40
    starts_per_minute: 600
    elicitations: {user: true}
    interactive: {max_wait: 15s, message: "A colleague will answer here."}
    on_spend_cap: escalate
`

const policyFile = `name: p
version: 7
default: by_effect
rules: []
`

func TestBuildAgentsFromAFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "belay.yaml")
	if err := os.WriteFile(path, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(policyFile), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var asked []Model
	agents, closeAll, err := f.Build(context.Background(), func(ctx context.Context, m Model) (model.Model, error) {
		asked = append(asked, m)
		return scripted.New().Named(m.Name), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll()
	if len(asked) != 2 || asked[0].Provider != "anthropic" || asked[0].Name != "claude-sonnet-4-5" || asked[0].Timeout.D != time.Minute ||
		asked[0].MaxRetries != 3 || asked[1].Provider != "openai" {
		t.Errorf("models asked for %+v", asked)
	}
	if agents[0].Fallback == nil || agents[0].Fallback.Name() != "gpt-4o-mini" {
		t.Errorf("fallback %v", agents[0].Fallback)
	}
	a := agents[0]
	if a.Name != "support" || a.Budget.MaxTurns != 30 || a.Budget.MaxUSD != 0.5 || a.Budget.Deadline != 10*time.Minute ||
		a.PolicyVersion != "p@7" || !strings.Contains(a.Instructions, "support agent") || a.Prices["claude-sonnet-4-5"].OutputPerMTok != 15 {
		t.Errorf("agent %+v", a)
	}
	if a.Elicitations == nil || !a.Elicitations.User {
		t.Errorf("elicitations %+v, want the user's", a.Elicitations)
	}
	if len(a.Limits) != 1 || a.Limits[0].Name != "anthropic-prod" || a.Limits[0].RequestsPerMinute != 4000 || a.Limits[0].TokensPerMinute != 400000 {
		t.Errorf("limits %+v", a.Limits)
	}
	if a.MaxRunning != 40 || a.StartsPerMinute != 600 {
		t.Errorf("max running %d, starts per minute %g; want 40, 600", a.MaxRunning, a.StartsPerMinute)
	}
	if a.Interactive == nil || a.Interactive.MaxWait != 15*time.Second || a.Interactive.Message != "A colleague will answer here." ||
		a.OnSpendCap != belay.SpendCapEscalate {
		t.Errorf("interactive %+v, on spend cap %q", a.Interactive, a.OnSpendCap)
	}
}

// A file's schedules become the requests belay serve adds, by the file.
func TestSchedulesFromAFile(t *testing.T) {
	f, err := Parse("belay.yaml", []byte(good+"schedules:\n  - name: nightly\n    agent: support\n    cron: '0 2 * * *'\n    input: Check yesterday's refunds.\n    overlap: queue\n"))
	if err != nil {
		t.Fatal(err)
	}
	reqs := f.ScheduleRequests()
	if len(reqs) != 1 || reqs[0].Name != "nightly" || reqs[0].Agent != "support" || reqs[0].Cron != "0 2 * * *" ||
		reqs[0].Overlap != "queue" || reqs[0].Missed != "" || reqs[0].By != "config:belay.yaml" {
		t.Errorf("schedule requests %+v; want nightly for support, queue, the default missed policy, by the file", reqs)
	}
}

func TestMistakesNameTheFileLineAndField(t *testing.T) {
	cases := map[string]struct{ yaml, want string }{
		"unknown field": {"agents:\n  - name: a\n    modle: {provider: openai, name: x}\n", `belay.yaml:3:`},
		"bad provider":  {"agents:\n  - name: a\n    model: {provider: ollama, name: x}\n", `belay.yaml:3: agents[0].model: provider "ollama" is not one of anthropic, openai`},
		"no model name": {"agents:\n  - name: a\n    model: {provider: openai}\n", `belay.yaml:3: agents[0].model: name is required`},
		"bad duration":  {"agents:\n  - name: a\n    model: {provider: openai, name: x, timeout: soon}\n", `belay.yaml:3: agents[0].model.timeout: "soon" is not a duration`},
		"usd no price":  {"agents:\n  - name: a\n    model: {provider: openai, name: x}\n    budget: {max_usd: 1}\n", `belay.yaml:4: agents[0].budget: max_usd needs a price for "x"`},
		"mcp both":      {"agents:\n  - name: a\n    model: {provider: openai, name: x}\n    mcp_servers:\n      - name: s\n        url: http://x\n        command: [y]\n", `belay.yaml:5: agents[0].mcp_servers[0]: set either command`},
		"bad effect":    {"agents:\n  - name: a\n    model: {provider: openai, name: x}\n    mcp_servers:\n      - name: s\n        url: http://x\n        tools:\n          t: {effect: dangerous}\n", `agents[0].mcp_servers[0].tools.t.effect: "dangerous" is not one of read, write, irreversible`},
		"no agents":     {"agents: []\n", `belay.yaml:`},
		"negative cap":  {"agents:\n  - name: a\n    model: {provider: openai, name: x}\n    max_running: -1\n", `agents[0]: max_running and starts_per_minute must be 0 (none) or more`},
		"bad spend cap": {"agents:\n  - name: a\n    model: {provider: openai, name: x}\n    on_spend_cap: retry\n", `belay.yaml:4: agents[0].on_spend_cap: "retry" is not one of wait, escalate`},
		"empty limit":   {"agents:\n  - name: a\n    model: {provider: openai, name: x}\n    limits: [{name: acct}]\n", `agents[0].limits[0]: needs a name and requests_per_minute or tokens_per_minute above 0`},
		"schedule of no agent": {"agents:\n  - name: a\n    model: {provider: openai, name: x}\nschedules:\n  - name: n\n    agent: b\n    cron: '@daily'\n    input: go\n",
			`belay.yaml:6: schedules[0].agent: "b" is not an agent of this file`},
		"schedule bad cron": {"agents:\n  - name: a\n    model: {provider: openai, name: x}\nschedules:\n  - name: n\n    agent: a\n    cron: '0 25 * * *'\n    input: go\n",
			`belay.yaml:7: schedules[0].cron: cron spec "0 25 * * *": the hour field "25" is not valid`},
		"schedule bad overlap": {"agents:\n  - name: a\n    model: {provider: openai, name: x}\nschedules:\n  - name: n\n    agent: a\n    cron: '@daily'\n    input: go\n    overlap: often\n",
			`belay.yaml:9: schedules[0].overlap: "often" is not one of skip, queue, allow`},
	}
	for name, tc := range cases {
		_, err := Parse("belay.yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", name, err, tc.want)
		}
	}
}
