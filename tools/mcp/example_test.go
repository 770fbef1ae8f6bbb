package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/tools/mcp"
)

func Example() {
	ctx := context.Background()

	// An MCP server over streamable HTTP, with a read-only tool and one that
	// says nothing about its effects.
	s := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "orders", Version: "1"}, nil)
	schema := json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"}}}`)
	reply := func(text string) mcpsdk.ToolHandler {
		return func(context.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: text}}}, nil
		}
	}
	s.AddTool(&mcpsdk.Tool{Name: "get_order", Description: "Look up an order.", InputSchema: schema,
		Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true}}, reply(`{"status":"shipped"}`))
	s.AddTool(&mcpsdk.Tool{Name: "cancel_order", Description: "Cancel an order.", InputSchema: schema}, reply("cancelled"))
	srv := httptest.NewServer(mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return s }, nil))
	defer srv.Close()

	c, err := mcp.Connect(ctx, mcp.Server{Name: "orders", URL: srv.URL, Prefix: "orders_",
		Tools: map[string]mcp.ToolConfig{"cancel_order": {External: true}}})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	tools, err := c.Tools(ctx)
	if err != nil {
		panic(err)
	}
	for _, t := range tools {
		fmt.Println(t.Name, t.Effect, "external:", t.External)
	}
	byName := map[string]belay.Tool{}
	for _, t := range tools {
		byName[t.Name] = t
	}
	out, err := byName["orders_get_order"].Call(ctx, json.RawMessage(`{"order_id":"A-1"}`))
	fmt.Println(string(out), err)
	// Unordered output:
	// orders_get_order read external: false
	// orders_cancel_order irreversible external: true
	// {"status":"shipped"} <nil>
}
