package config

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"strings"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/tools/mcp"
)

// Requirement is a check of the world that must hold for a run to be done,
// as a belay.Requirement is in Go. It fetches a JSON result, by an HTTP GET
// or from a read tool of one of the agent's MCP servers, and Expect, a CEL
// expression (https://cel.dev) over that result and the run's own data,
// must be true. See the package documentation for the variables.
type Requirement struct {
	// Name says what is required, as a person reads it in an escalation:
	// "order refunded". Required.
	Name string `yaml:"name"`
	// HTTPGet is the URL of a GET whose JSON body is the result. Its
	// scheme and host are as written; a ${...} in its path or query is
	// replaced by the value of the CEL expression inside, escaped for
	// where it stands. Redirects are not followed, so credentials go only
	// where the file says.
	HTTPGet string `yaml:"http_get"`
	// Headers are sent with the GET as written.
	Headers map[string]string `yaml:"headers"`
	// HeadersFromEnv are sent with the GET, each with the value of the
	// environment variable it names, read when the agent is built: for
	// credentials, which stay out of the file and out of every trace, log
	// and error.
	HeadersFromEnv map[string]string `yaml:"headers_from_env"`
	// MCP calls a read tool of one of the agent's MCP servers; the tool's
	// result is the result.
	MCP *MCPCall `yaml:"mcp"`
	// Expect is a CEL expression that must be true. Required.
	Expect string `yaml:"expect"`
	// Timeout bounds the GET or the call. Default 30s.
	Timeout Duration `yaml:"timeout"`

	compiled *check
}

// MCPCall is a call of an MCP server's tool.
type MCPCall struct {
	// Server is the name of one of the agent's mcp_servers. Required.
	Server string `yaml:"server"`
	// Tool is the tool's name as the server gives it (as under tools:).
	// It must be a read: a check does not change the world. Required.
	Tool string `yaml:"tool"`
	// Args are the tool's arguments. A string that is one ${...} takes the
	// expression's value, whatever its type; ${...} within other text is
	// replaced by the value as text. Default: none.
	Args map[string]any `yaml:"args"`
}

const (
	defaultCheckTimeout = 30 * time.Second
	// maxResultBytes bounds a GET's body: a check reads a record, not a
	// download.
	maxResultBytes = 1 << 20
	// celCostLimit bounds an expression's evaluation, in CEL's cost units,
	// so that a comprehension over a large result cannot hold a worker.
	celCostLimit = 1_000_000
)

// EffectReader reads a run's ledger; every store.Store is one.
type EffectReader interface {
	Effects(ctx context.Context, tenant, runID string) ([]store.Effect, error)
}

// requirement makes the belay.Requirement of r, the requirement at path.
func (f *File) requirement(ctx context.Context, path string, r Requirement, clients map[string]*mcp.Client, p BuildParams) (belay.Requirement, error) {
	where := func(field string, err error) error {
		return fmt.Errorf("%s:%d: %s: %w", f.path, lineOf(f.data, path+field), strings.TrimPrefix(path+field, "$."), err)
	}
	if r.compiled == nil {
		return belay.Requirement{}, where("", errors.New("not checked: parse the file with Load or Parse"))
	}
	c, timeout := r.compiled, r.Timeout.D
	if timeout == 0 {
		timeout = defaultCheckTimeout
	}
	var fetch func(ctx context.Context, vars map[string]any) (any, error)
	if r.HTTPGet != "" {
		header := http.Header{"Accept": {"application/json"}}
		for k, v := range r.Headers {
			header.Set(k, v)
		}
		for k, env := range r.HeadersFromEnv {
			v, ok := os.LookupEnv(env)
			if !ok {
				return belay.Requirement{}, where(".headers_from_env."+k, fmt.Errorf("$%s is not set", env))
			}
			header.Set(k, v)
		}
		client := noRedirects(p.HTTPClient)
		fetch = func(ctx context.Context, vars map[string]any) (any, error) {
			return c.get(ctx, client, header, vars)
		}
	} else {
		cl := clients[r.MCP.Server]
		tool, err := cl.Tool(ctx, r.MCP.Tool)
		if err != nil {
			return belay.Requirement{}, where(".mcp.tool", err)
		}
		if tool.Effect != belay.Read {
			return belay.Requirement{}, where(".mcp.tool", fmt.Errorf(
				"%s is %s, and a check must not change the world: name a read tool (or configure this one effect: read under tools:, if it is one)", r.MCP.Tool, tool.Effect))
		}
		fetch = func(ctx context.Context, vars map[string]any) (any, error) {
			return c.call(ctx, r.MCP, tool, vars)
		}
	}
	return belay.Requirement{Name: r.Name, Check: func(ctx context.Context, run belay.RunInfo) (bool, error) {
		vars := map[string]any{"ticket": run.ClientRequestID, "input": run.Input, "run_id": run.ID,
			"tenant": run.Tenant, "user": run.User, "effects": []any{}}
		if c.effects {
			effects, err := runEffects(ctx, p.Effects, run)
			if err != nil {
				return false, err
			}
			vars["effects"] = effects
		}
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		result, err := fetch(ctx, vars)
		if err != nil {
			return false, err
		}
		vars["result"] = result
		out, _, err := c.expect.ContextEval(ctx, vars)
		if err != nil {
			return false, fmt.Errorf("expect: %w", err)
		}
		ok, isBool := out.(types.Bool)
		if !isBool {
			return false, fmt.Errorf("expect gave a %s, not true or false", out.Type().TypeName())
		}
		return bool(ok), nil
	}}, nil
}

// runEffects is the effects variable: the run's ledger in the order begun.
func runEffects(ctx context.Context, r EffectReader, run belay.RunInfo) ([]any, error) {
	if r == nil {
		return nil, errors.New("effects: no ledger to read them from (config.BuildParams.Effects is not set)")
	}
	rows, err := r.Effects(ctx, run.Tenant, run.ID)
	if err != nil {
		return nil, fmt.Errorf("effects: %w", err)
	}
	effects := make([]any, 0, len(rows))
	for _, e := range rows {
		effects = append(effects, map[string]any{"tool": e.Tool, "key": e.Key, "state": string(e.State),
			"args": decodeJSON(e.Args), "result": decodeJSON(e.Result)})
	}
	return effects, nil
}

func decodeJSON(raw json.RawMessage) any {
	var v any
	if len(raw) > 0 && json.Unmarshal(raw, &v) == nil {
		return v
	}
	return nil
}

// noRedirects returns a copy of client (or of a plain one) that does not
// follow redirects: a header set for one host is not sent to another.
func noRedirects(client *http.Client) *http.Client {
	c := &http.Client{}
	if client != nil {
		*c = *client
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c
}

// get sends the GET and decodes its body. Its errors name the URL without
// its query, and never a header.
func (c *check) get(ctx context.Context, client *http.Client, header http.Header, vars map[string]any) (any, error) {
	raw, err := c.url.expand(ctx, vars, true)
	if err != nil {
		return nil, fmt.Errorf("http_get: %w", err)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("http_get: %w", err)
	}
	shown := u.Scheme + "://" + u.Host + u.EscapedPath()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", shown, err)
	}
	req.Header = header.Clone()
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("GET %s: %w", shown, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode/100 == 3:
		return nil, fmt.Errorf("GET %s: HTTP %d, a redirect, which a check does not follow", shown, resp.StatusCode)
	case resp.StatusCode/100 != 2:
		return nil, fmt.Errorf("GET %s: HTTP %d", shown, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResultBytes+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", shown, err)
	}
	if len(body) > maxResultBytes {
		return nil, fmt.Errorf("GET %s: the body is over %d bytes", shown, maxResultBytes)
	}
	var result any
	if err := json.Unmarshal(body, &result); err != nil {
		return nil, fmt.Errorf("GET %s: the body is not JSON: %w", shown, err)
	}
	return result, nil
}

// call calls the MCP tool with the arguments made from the run's data.
func (c *check) call(ctx context.Context, m *MCPCall, tool belay.Tool, vars map[string]any) (any, error) {
	args, err := expandArgs(ctx, c.args, vars)
	if err != nil {
		return nil, fmt.Errorf("mcp.args: %w", err)
	}
	if args == nil {
		args = map[string]any{}
	}
	in, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("mcp.args: %w", err)
	}
	out, err := tool.Call(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", m.Server, m.Tool, err)
	}
	var result any
	if err := json.Unmarshal(out, &result); err != nil {
		return nil, fmt.Errorf("%s %s: the result is not JSON: %w", m.Server, m.Tool, err)
	}
	return result, nil
}

// expandArgs evaluates the templates of compiled arguments.
func expandArgs(ctx context.Context, v any, vars map[string]any) (any, error) {
	switch v := v.(type) {
	case *template:
		if v.whole() {
			val, err := eval(ctx, v.progs[0], vars)
			if err != nil {
				return nil, err
			}
			return native(val)
		}
		return v.expand(ctx, vars, false)
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, x := range v {
			var err error
			if m[k], err = expandArgs(ctx, x, vars); err != nil {
				return nil, err
			}
		}
		return m, nil
	case []any:
		l := make([]any, len(v))
		for i, x := range v {
			var err error
			if l[i], err = expandArgs(ctx, x, vars); err != nil {
				return nil, err
			}
		}
		return l, nil
	}
	return v, nil
}

// expand writes the template's text with each expression's value as text;
// in a URL, escaped for the path or the query where it stands.
func (t *template) expand(ctx context.Context, vars map[string]any, inURL bool) (string, error) {
	var b strings.Builder
	b.WriteString(t.lits[0])
	for i, prg := range t.progs {
		val, err := eval(ctx, prg, vars)
		if err != nil {
			return "", err
		}
		s, err := text(val)
		if err != nil {
			return "", err
		}
		if inURL {
			if strings.Contains(b.String(), "?") {
				s = url.QueryEscape(s)
			} else {
				s = url.PathEscape(s)
			}
		}
		b.WriteString(s)
		b.WriteString(t.lits[i+1])
	}
	return b.String(), nil
}

func eval(ctx context.Context, prg cel.Program, vars map[string]any) (ref.Val, error) {
	val, _, err := prg.ContextEval(ctx, vars)
	return val, err
}

// native is a CEL value as JSON sees it.
func native(v ref.Val) (any, error) {
	pb, err := v.ConvertToNative(reflect.TypeFor[*structpb.Value]())
	if err != nil {
		return nil, err
	}
	return pb.(*structpb.Value).AsInterface(), nil
}

// text is a value as text: a string as it is, anything else as JSON.
func text(v ref.Val) (string, error) {
	if s, ok := v.(types.String); ok {
		return string(s), nil
	}
	n, err := native(v)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(n)
	return string(b), err
}
