package belay

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/belayrun/belay/internal/guard"
	"github.com/belayrun/belay/internal/ledger"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/store"
)

// Agent is a model that calls tools in a loop, with the rules that make its
// runs survivable.
type Agent struct {
	// Name identifies the agent; runs are started by name. Required.
	Name string
	// Version is recorded on every run; a run is never resumed into another
	// version. Default: a hash of the instructions, the tool definitions and
	// the model name, so any change to what the model sees is a new version.
	Version string
	// Continues lists the older versions of this agent whose runs this
	// version may continue without a person's migration: a deploy that
	// rewords the instructions, say, or adds a tool the older runs can do
	// without. A worker of this version moves such a run to it when it
	// takes the run, with a migrated event by "agent:continues", instead of
	// pausing it with version_mismatch. Default: none, every other version
	// pauses.
	Continues []string
	// ContinuesSameTools lets this version continue, as Continues does, the
	// runs of any other version of the agent whose tools are the same: the
	// same names, input schemas, effect classes, key fields and scopes,
	// and the same built-in waiting tools (ask_user, wait_for_event,
	// ask_person), so that only the instructions, tool descriptions, model
	// or other settings changed. The effect classes, key fields and scopes
	// count because they decide the keys of a run's side effects: a run
	// moved to other keys could do again what it did. Each run records the
	// fingerprint of its version's tools in its trace when it starts or
	// moves; a run without one (started before this field existed, or
	// moved by a person to a version this process does not serve) pauses
	// with version_mismatch as before. Default false: only the versions
	// listed in Continues are continued.
	ContinuesSameTools bool
	// Model answers each turn. Required.
	Model model.Model
	// Fallback, if set, answers a turn when Model is overloaded after its
	// client's retries, instead of pausing the run. The switch is a
	// model_fallback trace event. Leave it nil for agents whose runs must
	// not change model midway (prompts tuned for one model do not always
	// hold on another). Its prices come from Prices too.
	Fallback model.Model
	// Instructions are the system prompt.
	Instructions string
	// Tools are what the model may call.
	Tools []Tool
	// Budget caps each run's turns, tokens, cost and time; a run may
	// tighten or widen it when it starts. Budget.MaxTurns defaults to 50.
	Budget Budget
	// MaxOutputTokens caps one model response. Default 1024.
	MaxOutputTokens int
	// Prices turn token usage into cost. A model missing from the table
	// costs nothing.
	Prices model.PriceTable
	// Requirements are checked against real state when the model stops
	// calling tools. A run is done only if all hold.
	Requirements []Requirement
	// Policy decides every tool call before it runs: allow, deny or needs
	// approval. Default DefaultPolicy: irreversible and External tools need
	// approval.
	Policy Policy
	// PolicyVersion names the policy; an approval is bound to it, so a
	// changed policy does not execute what the old one approved. Default
	// "default" for DefaultPolicy, else required.
	PolicyVersion string
	// LoopDetector finds stuck runs. Default: the progress detector.
	LoopDetector LoopDetector
	// CustomerMessage is what an escalated run tells the customer. Default
	// DefaultCustomerMessage.
	CustomerMessage string
	// Conversation, if set, offers the model the built-in ask_user tool:
	// a run asks its user a question and waits, holding no lease, for the
	// reply (Operator.Say). Default nil: a run takes one message.
	Conversation *Conversation
	// Events, if set, offers the model the built-in wait_for_event tool:
	// a run waits, holding no lease, for a named event sent to it
	// (Operator.Signal). Default nil.
	Events *Events
	// People, if set, offers the model the built-in ask_person tool: a
	// run asks a person of a role a question and waits, holding no lease,
	// for the answer (Operator.PostResult). Default nil.
	People *People
	// Elicitations says who answers the questions the agent's tools ask
	// during their calls (Elicit; an MCP server's elicitation). Default
	// nil: a person of the approver role, as for ask_person.
	Elicitations *Elicitations
	// Limits are the provider limits the agent's model calls are held to,
	// shared through the store by every worker. Default: none.
	Limits []ProviderLimit
	// MaxRunning caps the agent's runs (of every tenant) in a step at
	// once, across every worker of the store: claims take no more while
	// as many run. StartsPerMinute caps how many of its queued runs start
	// a minute, spread over the minute. Both are kept in the store
	// (store.AgentLimiter) and written when the runtime starts; 0 leaves
	// what the store holds as it is (set with `belay agent-limit`).
	// Workers that give one agent different values: the last to start
	// wins. Default: none.
	MaxRunning      int
	StartsPerMinute float64
	// Interactive, if set, marks the agent's runs as watched by a person
	// as they happen (a chat): when its model is unavailable, a run
	// escalates after Interactive.MaxWait with a message for the customer
	// instead of backing off for minutes. Default nil: a background agent.
	Interactive *Interactive
	// OnSpendCap is what a run does when its next model call would take
	// its tenant past the tenant's spend cap (Runtime.SetSpendCap):
	// SpendCapWait (the default) pauses it until the cap's window rolls
	// over or the cap is raised; SpendCapEscalate hands it to a person.
	OnSpendCap SpendCapAction

	tools map[string]*Tool
	// toolPrint is the fingerprint of the tools (see ContinuesSameTools).
	toolPrint string
	// sensitive is what each run of the agent records of its tools'
	// secrets; nil when no tool has any.
	sensitive map[string]store.SensitiveArgs
	detector  guard.Detector
	detect    bool
}

// Requirement is one thing that must be true of the world for a run to be
// done, checked by code, never by asking the model.
type Requirement struct {
	// Name says what is required, in words a person reads in an escalation:
	// "reason in CRM".
	Name string
	// Check reports whether the requirement holds for the run.
	Check func(ctx context.Context, run RunInfo) (bool, error)
}

// RunInfo identifies a run to code that checks or acts on its behalf.
type RunInfo struct {
	ID     string
	Tenant string
	User   string
	// ClientRequestID is the caller's id for the request that started the
	// run: often the ticket or order it is about.
	ClientRequestID string
	Input           string
}

// prepare validates the agent and fills defaults. It is called once, when the
// agent is registered with a runtime.
func (a *Agent) prepare() error {
	if a.Name == "" {
		return errors.New("agent without a name")
	}
	if a.Model == nil {
		return fmt.Errorf("agent %q has no model", a.Name)
	}
	if a.Budget.MaxTurns == 0 {
		a.Budget.MaxTurns = 50
	}
	if err := a.checkBudget(a.Budget); err != nil {
		return err
	}
	if a.Policy == nil {
		a.Policy = DefaultPolicy
		if a.PolicyVersion == "" {
			a.PolicyVersion = "default"
		}
	}
	if a.PolicyVersion == "" {
		return fmt.Errorf("agent %q: a custom Policy needs a PolicyVersion, which approvals are bound to", a.Name)
	}
	var err error
	if a.detector, a.detect, err = a.LoopDetector.detector(); err != nil {
		return fmt.Errorf("agent %q: %w", a.Name, err)
	}
	if a.CustomerMessage == "" {
		a.CustomerMessage = DefaultCustomerMessage
	}
	if a.MaxOutputTokens == 0 {
		a.MaxOutputTokens = 1024
	}
	if err := a.OnSpendCap.check(); err != nil {
		return fmt.Errorf("agent %q: %w", a.Name, err)
	}
	if a.Interactive != nil {
		if err := a.Interactive.check(); err != nil {
			return fmt.Errorf("agent %q: %w", a.Name, err)
		}
		a.Interactive.applyDefaults()
	}
	a.tools = make(map[string]*Tool, len(a.Tools))
	a.sensitive = nil
	for i := range a.Tools {
		t := &a.Tools[i]
		if err := t.validate(); err != nil {
			return fmt.Errorf("agent %q: %w", a.Name, err)
		}
		if _, dup := a.tools[t.Name]; dup {
			return fmt.Errorf("agent %q: two tools named %q", a.Name, t.Name)
		}
		a.tools[t.Name] = t
		if len(t.Sensitive) > 0 {
			if a.sensitive == nil {
				a.sensitive = map[string]store.SensitiveArgs{}
			}
			a.sensitive[t.Name] = t.sensitiveArgs()
		}
	}
	if err := a.prepareConversation(); err != nil {
		return err
	}
	if err := a.prepareEvents(); err != nil {
		return err
	}
	if err := a.preparePeople(); err != nil {
		return err
	}
	if err := a.Elicitations.prepare(a.Name); err != nil {
		return err
	}
	for _, r := range a.Requirements {
		if r.Name == "" || r.Check == nil {
			return fmt.Errorf("agent %q: a requirement needs a name and a check", a.Name)
		}
	}
	if a.Version == "" {
		a.Version = a.hash()
	}
	a.toolPrint = a.toolFingerprint()
	return nil
}

// toolFingerprint covers what a run's history and side effects depend on
// in the agent's tools, and nothing a new version may reword: tool
// descriptions, instructions and the model are left out. Tools are sorted
// by name, so their order does not count.
func (a *Agent) toolFingerprint() string {
	type toolDef struct {
		Name      string
		Schema    json.RawMessage
		Effect    EffectClass
		KeyFields []string
		Deferred  bool
		Scope     EffectScope
	}
	def := struct {
		Tools                        []toolDef
		Conversation, Events, People bool
	}{Conversation: a.Conversation != nil, Events: a.Events != nil, People: a.People != nil}
	for _, t := range a.Tools {
		schema := t.InputSchema
		if c, err := ledger.Canonical(schema, nil); err == nil {
			schema = c
		}
		def.Tools = append(def.Tools, toolDef{t.Name, schema, t.Effect, t.KeyFields, t.Deferred != nil, t.Scope})
	}
	slices.SortFunc(def.Tools, func(x, y toolDef) int { return strings.Compare(x.Name, y.Name) })
	b, _ := json.Marshal(def)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// checkBudget refuses a dollar budget on a model the price table does not
// know: its calls would count as free and the budget would never stop it.
func (a *Agent) checkBudget(b Budget) error {
	if b.MaxUSD <= 0 {
		return nil
	}
	for _, m := range []model.Model{a.Model, a.Fallback} {
		if m == nil {
			continue
		}
		if _, ok := a.Prices.Lookup(m.Name()); !ok {
			return fmt.Errorf("agent %q: a budget of $%g needs a price for model %q in Prices; without one its calls would count as free",
				a.Name, b.MaxUSD, m.Name())
		}
	}
	return nil
}

// hash covers everything that changes what the model sees.
func (a *Agent) hash() string {
	type toolDef struct {
		Name, Description string
		Schema            json.RawMessage
		Effect            EffectClass
		KeyFields         []string
		// Deferred is left out when false, so that the versions of agents
		// without a deferred tool are what they were.
		Deferred bool `json:",omitempty"`
		// Scope changes the keys of the tool's calls: a run is not resumed
		// into another scope. Omitted when it is the default, so that
		// versions from before it stay as they were.
		Scope EffectScope `json:",omitempty"`
	}
	def := struct {
		Model        string
		Instructions string
		Tools        []toolDef
		Fallback     string `json:",omitempty"`
		// The built-in tools that make a run wait are left out when not
		// offered, so that the versions of agents without them are what
		// they were.
		Conversation bool `json:",omitempty"`
		Events       bool `json:",omitempty"`
		People       bool `json:",omitempty"`
	}{Model: a.Model.Name(), Instructions: a.Instructions, Conversation: a.Conversation != nil, Events: a.Events != nil,
		People: a.People != nil}
	if a.Fallback != nil {
		def.Fallback = a.Fallback.Name()
	}
	for _, t := range a.Tools {
		def.Tools = append(def.Tools, toolDef{t.Name, t.Description, t.InputSchema, t.Effect, t.KeyFields, t.Deferred != nil, t.Scope})
	}
	b, _ := json.Marshal(def)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6])
}

func (a *Agent) toolSpecs() []model.ToolSpec {
	specs := make([]model.ToolSpec, len(a.Tools), len(a.Tools)+3)
	for i, t := range a.Tools {
		specs[i] = model.ToolSpec{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema}
	}
	if a.Conversation != nil {
		specs = append(specs, askUserSpec)
	}
	if a.Events != nil {
		specs = append(specs, waitForEventSpec)
	}
	if a.People != nil {
		specs = append(specs, askPersonSpec)
	}
	return specs
}
