package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/belayrun/belay"
)

// Tools lists the server's tools and returns each as a belay.Tool: its name
// (after Prefix, rewritten if a model provider would refuse it), description
// and input schema as the server gives them, its effect class and HonorsKey
// from configuration or annotations (see EffectOf), and a Call that calls it
// on this client by the server's own name.
//
// Providers accept tool names of 1 to 64 letters, digits, "_" and "-"; MCP
// allows more. A name they would refuse has each other character replaced
// by "_" ("files.read" becomes "files_read"); if that makes it another
// tool's name, or it is longer than 64, it ends in "_" and 8 hex digits of
// a hash of the whole name instead. The names depend only on the set of
// names the server lists, so they hold across restarts.
func (c *Client) Tools(ctx context.Context) ([]belay.Tool, error) {
	tools, _, err := c.list(ctx)
	return tools, err
}

// Tool returns the tool the server names name, as Tools makes it: for code
// that calls a tool itself, such as a requirement's check.
func (c *Client) Tool(ctx context.Context, name string) (belay.Tool, error) {
	tools, names, err := c.list(ctx)
	if err != nil {
		return belay.Tool{}, err
	}
	if i := slices.Index(names, name); i >= 0 {
		return tools[i], nil
	}
	return belay.Tool{}, fmt.Errorf("tools/mcp: server %s has no tool %s", c.srv.Name, name)
}

// list lists the server's tools as Tools returns them, with the server's
// name of each.
func (c *Client) list(ctx context.Context) ([]belay.Tool, []string, error) {
	cs, err := c.connected(ctx)
	if err != nil {
		return nil, nil, err
	}
	var listed []*mcpsdk.Tool
	var names []string
	seen := map[string]bool{}
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			if ctx.Err() == nil && !answeredWithError(err) {
				c.lost(cs, err)
			}
			return nil, nil, fmt.Errorf("tools/mcp: list tools of %s: %w", c.srv.Name, err)
		}
		seen[t.Name] = true
		listed = append(listed, t)
		names = append(names, t.Name)
	}
	provider, err := providerNames(c.srv.Prefix, names)
	if err != nil {
		return nil, nil, fmt.Errorf("tools/mcp: %s: %w", c.srv.Name, err)
	}
	tools := make([]belay.Tool, 0, len(listed))
	for _, t := range listed {
		bt, err := c.tool(t, provider[t.Name])
		if err != nil {
			return nil, nil, err
		}
		tools = append(tools, bt)
	}
	var unknown []string
	for name := range c.srv.Tools {
		if !seen[name] {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return nil, nil, fmt.Errorf("tools/mcp: server %s has no tool %s (configured in Tools)", c.srv.Name, strings.Join(unknown, ", "))
	}
	return tools, names, nil
}

// tool makes the server's tool t the belay.Tool named as.
func (c *Client) tool(t *mcpsdk.Tool, as string) (belay.Tool, error) {
	schema := json.RawMessage(`{"type":"object"}`)
	if t.InputSchema != nil {
		raw, err := json.Marshal(t.InputSchema)
		if err != nil {
			return belay.Tool{}, fmt.Errorf("tools/mcp: %s: tool %s: input schema: %w", c.srv.Name, t.Name, err)
		}
		schema = raw
	}
	annotations := t.Annotations
	if c.srv.IgnoreAnnotations {
		annotations = nil
	}
	effect, honorsKey := EffectOf(annotations)
	cfg := c.srv.Tools[t.Name]
	if cfg.Effect != "" {
		effect = cfg.Effect
	}
	if cfg.HonorsKey {
		honorsKey = true
	}
	description := t.Description
	if description == "" {
		description = t.Title
	}
	name := t.Name
	retrySafe := effect == belay.Read || honorsKey
	alone := cfg.Elicits
	return belay.Tool{
		Name:        as,
		Description: description,
		InputSchema: schema,
		Effect:      effect,
		External:    cfg.External,
		KeyFields:   cfg.KeyFields,
		HonorsKey:   honorsKey,
		Timeout:     cfg.Timeout,
		Call: func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
			return c.call(ctx, name, retrySafe, alone, args)
		},
	}, nil
}

// EffectOf maps a tool's MCP annotations to a Belay effect class, and says
// whether the tool honours Belay's idempotency key:
//
//   - readOnlyHint true: Read.
//   - destructiveHint false: Write (the tool only adds to its world).
//   - destructiveHint true, or absent: Irreversible.
//   - no annotations at all: Irreversible.
//   - idempotentHint true: HonorsKey. Calling the tool again with the same
//     arguments has no further effect, and Belay only ever calls again
//     under the same key with the same arguments, so a call whose outcome
//     was lost can be made again.
//
// Destructive is the default because the MCP specification makes it so for
// a tool that is not read-only, and because it is the safe side for Belay:
// irreversible calls go through the approval gate and are never retried
// blindly, so a server that says nothing about a tool gets it gated rather
// than trusted.
func EffectOf(a *mcpsdk.ToolAnnotations) (effect belay.EffectClass, honorsKey bool) {
	switch {
	case a == nil:
		return belay.Irreversible, false
	case a.ReadOnlyHint:
		return belay.Read, a.IdempotentHint
	case a.DestructiveHint != nil && !*a.DestructiveHint:
		return belay.Write, a.IdempotentHint
	default:
		return belay.Irreversible, a.IdempotentHint
	}
}

// toolResult turns a tools/call result into a Belay result: the structured
// content if there is one, otherwise the text of the content. Text that is
// JSON is kept as JSON, other text becomes a JSON string. A result marked
// isError becomes an error with the server's text, which the model reads
// as an error result.
func toolResult(res *mcpsdk.CallToolResult) (json.RawMessage, error) {
	text := contentText(res.Content)
	if res.IsError {
		if text == "" {
			text = "the tool reported an error and gave no message"
		}
		return nil, errors.New(text)
	}
	if res.StructuredContent != nil {
		return json.Marshal(res.StructuredContent)
	}
	if len(res.Content) == 1 && json.Valid([]byte(text)) {
		return json.RawMessage(text), nil
	}
	return json.Marshal(text)
}

// contentText joins the content parts into text; parts that are not text
// are described, since the model reads tool results as text.
func contentText(content []mcpsdk.Content) string {
	parts := make([]string, 0, len(content))
	for _, c := range content {
		switch c := c.(type) {
		case *mcpsdk.TextContent:
			parts = append(parts, c.Text)
		case *mcpsdk.ImageContent:
			parts = append(parts, fmt.Sprintf("[image %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *mcpsdk.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *mcpsdk.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource %s %s]", c.URI, c.Name))
		case *mcpsdk.EmbeddedResource:
			switch r := c.Resource; {
			case r == nil:
			case r.Text != "":
				parts = append(parts, r.Text)
			default:
				parts = append(parts, fmt.Sprintf("[resource %s %s, %d bytes]", r.URI, r.MIMEType, len(r.Blob)))
			}
		default:
			parts = append(parts, fmt.Sprintf("[%T content]", c))
		}
	}
	return strings.Join(parts, "\n")
}
