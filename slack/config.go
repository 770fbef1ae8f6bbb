package slack

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/belayrun/belay/store"
)

// Config is the slack section of a configuration file (belay.yaml, or a
// file of its own):
//
//	slack:
//	  team: T0123ABCD                       # optional: only this workspace's requests
//	  bot_token_env: SLACK_BOT_TOKEN        # the default
//	  signing_secret_env: SLACK_SIGNING_SECRET
//	  tenants:
//	    - tenant: acme
//	      channel: C0123ABCD                # where acme's approval cards go
//	      approvers:
//	        - {slack_user: U0123ABCD, name: maya@example.com, roles: [approver]}
//
// The secrets are never in the file: it names the environment variables
// that hold them.
type Config struct {
	// Team, if set, is the Slack workspace (team id) whose requests are
	// taken; others are refused.
	Team string `yaml:"team"`
	// BotTokenEnv names the variable holding the bot's token (xoxb-...).
	// Default SLACK_BOT_TOKEN.
	BotTokenEnv string `yaml:"bot_token_env"`
	// SigningSecretEnv names the variable holding the app's signing
	// secret. Default SLACK_SIGNING_SECRET.
	SigningSecretEnv string `yaml:"signing_secret_env"`
	// Tenants are the Belay tenants whose approvals go to Slack.
	Tenants []Tenant `yaml:"tenants"`
}

// Tenant is where one tenant's approval cards go and who may decide them
// from Slack.
type Tenant struct {
	Tenant string `yaml:"tenant"`
	// Channel is the Slack channel id (C...), which the bot must be in.
	Channel string `yaml:"channel"`
	// Approvers map Slack users to the people Belay knows. A Slack user
	// not listed decides nothing in this tenant.
	Approvers []Approver `yaml:"approvers"`
}

// Approver is a Slack user as a Belay approver: decisions record
// "human:" + Name, as an API key named Name records them, so the rule that
// a run's requester does not approve its actions holds across both.
type Approver struct {
	SlackUser string       `yaml:"slack_user"`
	Name      string       `yaml:"name"`
	Roles     []store.Role `yaml:"roles"`
}

var (
	slackID    = regexp.MustCompile(`^[A-Z0-9]{2,32}$`)
	envName    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	tenantName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
)

// LoadConfig reads the slack section of the YAML file at path. Unknown
// fields are errors, as in the rest of belay.yaml.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("slack config: %w", err)
	}
	var file struct {
		Slack *Config `yaml:"slack"`
	}
	// The rest of the file is another package's to check.
	if err := yaml.Unmarshal(data, &file); err != nil {
		return Config{}, fmt.Errorf("slack config %s: %w", path, err)
	}
	if file.Slack == nil {
		return Config{}, fmt.Errorf("slack config %s: no slack section; see the README's \"Approvals in Slack\"", path)
	}
	var strict struct {
		Slack Config `yaml:"slack"`
	}
	var rest map[string]any
	_ = yaml.Unmarshal(data, &rest)
	section, _ := yaml.Marshal(map[string]any{"slack": rest["slack"]})
	if err := yaml.UnmarshalWithOptions(section, &strict, yaml.DisallowUnknownField()); err != nil {
		return Config{}, fmt.Errorf("slack config %s: %s", path, oneLine(yaml.FormatError(err, false, false)))
	}
	c := strict.Slack
	c.applyDefaults()
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("slack config %s: %w", path, err)
	}
	return c, nil
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func (c *Config) applyDefaults() {
	if c.BotTokenEnv == "" {
		c.BotTokenEnv = "SLACK_BOT_TOKEN"
	}
	if c.SigningSecretEnv == "" {
		c.SigningSecretEnv = "SLACK_SIGNING_SECRET"
	}
}

// Validate says what is wrong with the configuration, field by field.
func (c Config) Validate() error {
	var errs []error
	if c.Team != "" && !slackID.MatchString(c.Team) {
		errs = append(errs, fmt.Errorf("team %q: want a Slack team id, like T0123ABCD", c.Team))
	}
	for _, v := range []struct{ field, name string }{{"bot_token_env", c.BotTokenEnv}, {"signing_secret_env", c.SigningSecretEnv}} {
		if v.name != "" && !envName.MatchString(v.name) {
			errs = append(errs, fmt.Errorf("%s %q: want the name of an environment variable, not its value", v.field, v.name))
		}
	}
	if len(c.Tenants) == 0 {
		errs = append(errs, errors.New("tenants: list at least one tenant with its channel and approvers"))
	}
	seen := map[string]bool{}
	for i, t := range c.Tenants {
		at := fmt.Sprintf("tenants[%d]", i)
		switch {
		case !tenantName.MatchString(t.Tenant):
			errs = append(errs, fmt.Errorf("%s.tenant %q: want a Belay tenant name", at, t.Tenant))
		case seen[t.Tenant]:
			errs = append(errs, fmt.Errorf("%s.tenant %q is listed twice", at, t.Tenant))
		}
		seen[t.Tenant] = true
		if !slackID.MatchString(t.Channel) {
			errs = append(errs, fmt.Errorf("%s.channel %q: want a channel id, like C0123ABCD (in Slack: the channel's details, at the bottom)", at, t.Channel))
		}
		users := map[string]bool{}
		for j, a := range t.Approvers {
			at := fmt.Sprintf("%s.approvers[%d]", at, j)
			if !slackID.MatchString(a.SlackUser) {
				errs = append(errs, fmt.Errorf("%s.slack_user %q: want a Slack member id, like U0123ABCD", at, a.SlackUser))
			}
			if users[a.SlackUser] {
				errs = append(errs, fmt.Errorf("%s.slack_user %q is listed twice in the tenant", at, a.SlackUser))
			}
			users[a.SlackUser] = true
			if a.Name == "" || len(a.Name) > 128 || strings.ContainsAny(a.Name, "\r\n\t") {
				errs = append(errs, fmt.Errorf("%s.name: want who the person is in Belay (their API key's name), one line of at most 128 characters", at))
			}
			if len(a.Roles) == 0 {
				errs = append(errs, fmt.Errorf("%s.roles: list the person's roles; deciding needs approver", at))
			}
			for _, r := range a.Roles {
				if !store.ValidRole(r) {
					errs = append(errs, fmt.Errorf("%s.roles: %q: want operator, approver or admin", at, r))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// tenant returns the configuration of a tenant, or nil.
func (c Config) tenant(name string) *Tenant {
	i := slices.IndexFunc(c.Tenants, func(t Tenant) bool { return t.Tenant == name })
	if i < 0 {
		return nil
	}
	return &c.Tenants[i]
}

// approver returns the Belay identity of a Slack user in a tenant, or nil
// if the user is not mapped there.
func (c Config) approver(tenant, slackUser string) *Approver {
	t := c.tenant(tenant)
	if t == nil {
		return nil
	}
	i := slices.IndexFunc(t.Approvers, func(a Approver) bool { return a.SlackUser == slackUser })
	if i < 0 {
		return nil
	}
	return &t.Approvers[i]
}
