package server

// The OpenAPI document is the API's contract. These tests hold the server
// to it and it to the server: every route of the server's mux is in the
// document and no other, every operation's roles are the ones the server
// enforces, and every route is driven against a real server over a real
// store, its happy path and its error codes, with each request and answer
// checked against the document by a maintained validator
// (pb33f/libopenapi-validator, which reads OpenAPI 3.1). A request the
// server refuses as malformed must be one the document refuses too, and
// one it accepts one the document accepts.

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	"github.com/pb33f/libopenapi-validator/schema_validation"
	"github.com/pb33f/libopenapi/datamodel/high/base"

	"github.com/belayrun/belay/store"
)

// awaitedRoutes are in the document before the server serves them, each
// with why. While a route is awaited the tests do not drive it; once the
// server serves it, TestOpenAPIRoutesAreTheServers fails until it is
// taken off this list, and then it is driven like every other.
var awaitedRoutes = map[string]string{}

// undrivenCodes are answers the document states that the driving test
// does not provoke, each with why. Every other (operation, status, code)
// of the document is driven.
var undrivenCodes = map[string]string{
	"request_timeout": "a body must stall for the body timeout; TestStalledBodyAnswered408 drives it",
	"internal":        "the server must fail; its answer is the generic error checked on every route",
	"store_corrupt":   "the store's file must be damaged; TestReadyzDamagedStore damages one",
}

// apiDoc is the document as JSON, for what the tests read from it
// themselves: routes, roles, answers and codes.
type apiDoc struct {
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Responses map[string]apiResponse     `json:"responses"`
		Schemas   map[string]json.RawMessage `json:"schemas"`
	} `json:"components"`
}

type apiOperation struct {
	OperationID string                 `json:"operationId"`
	Roles       *[]store.Role          `json:"x-belay-roles"`
	Security    *[]map[string][]string `json:"security"`
	RequestBody *struct {
		Required bool `json:"required"`
	} `json:"requestBody"`
	Responses map[string]apiResponse `json:"responses"`
}

type apiResponse struct {
	Ref     string `json:"$ref"`
	Content map[string]struct {
		Schema     json.RawMessage   `json:"schema"`
		ItemSchema string            `json:"x-belay-item-schema"`
		Events     map[string]string `json:"x-belay-events"`
	} `json:"content"`
}

// operation is one method of one path of the document.
type operation struct {
	route string // "GET /v1/runs/{id}", as the server's mux names it
	apiOperation
}

func (o operation) method() string { return strings.SplitN(o.route, " ", 2)[0] }
func (o operation) path() string   { return strings.SplitN(o.route, " ", 2)[1] }

// contract is the document read once: its operations, and a validator.
type contract struct {
	doc       apiDoc
	ops       map[string]operation
	validator validator.Validator
	schemas   map[string]*base.Schema
	// routes finds the document's route of a request.
	routes *http.ServeMux
}

var loadContract = sync.OnceValues(func() (*contract, error) {
	c := &contract{ops: map[string]operation{}, schemas: map[string]*base.Schema{}, routes: http.NewServeMux()}
	if err := json.Unmarshal(openAPIDocument, &c.doc); err != nil {
		return nil, fmt.Errorf("openapi.json: %w", err)
	}
	for path, item := range c.doc.Paths {
		for method, raw := range item {
			if method == "parameters" {
				continue
			}
			var op apiOperation
			if err := json.Unmarshal(raw, &op); err != nil {
				return nil, fmt.Errorf("%s %s: %w", method, path, err)
			}
			route := strings.ToUpper(method) + " " + path
			c.ops[route] = operation{route: route, apiOperation: op}
			c.routes.HandleFunc(route, func(http.ResponseWriter, *http.Request) {})
		}
	}
	doc, err := libopenapi.NewDocument(openAPIDocument)
	if err != nil {
		return nil, fmt.Errorf("openapi.json: %w", err)
	}
	var whole any
	if err := json.Unmarshal(openAPIDocument, &whole); err != nil {
		return nil, err
	}
	var freeForm []string
	for _, name := range freeFormFields(whole) {
		freeForm = append(freeForm, "$.body**."+name+".**", "$.body**."+name+"['**")
	}
	v, errs := validator.NewValidator(doc,
		config.WithFormatAssertions(),
		// Strict: a field, query parameter or header the document does
		// not declare is an error, in requests and in answers alike, but
		// within the values the document leaves free (a call's arguments,
		// a tool's result).
		config.WithStrictMode(),
		config.WithStrictIgnorePaths(freeForm...),
		config.WithStrictIgnoredHeadersExtra("sec-fetch-site", "x-content-type-options", "referrer-policy", "x-frame-options"))
	if len(errs) > 0 {
		return nil, fmt.Errorf("openapi.json: %v", errs)
	}
	c.validator = v
	model, err := doc.BuildV3Model()
	if err != nil {
		return nil, err
	}
	for name, proxy := range model.Model.Components.Schemas.FromOldest() {
		c.schemas[name] = proxy.Schema()
	}
	return c, nil
})

// freeFormFields are the names of the document's properties whose values
// it leaves free: objects without declared properties, maps, any value.
func freeFormFields(node any) []string {
	names := map[string]bool{}
	var walk func(any)
	walk = func(node any) {
		switch n := node.(type) {
		case []any:
			for _, v := range n {
				walk(v)
			}
		case map[string]any:
			if props, ok := n["properties"].(map[string]any); ok {
				for name, schema := range props {
					if s, ok := schema.(map[string]any); ok && freeForm(s) {
						names[name] = true
					}
				}
			}
			for _, v := range n {
				walk(v)
			}
		}
	}
	walk(node)
	return slices.Sorted(maps.Keys(names))
}

func freeForm(schema map[string]any) bool {
	for _, k := range []string{"properties", "$ref", "oneOf", "anyOf", "allOf", "enum", "const"} {
		if _, ok := schema[k]; ok {
			return false
		}
	}
	switch t := schema["type"].(type) {
	case nil:
		return true
	case string:
		return t == "object" || t == "array"
	case []any:
		return slices.Contains(t, any("object"))
	}
	return false
}

func theContract(t *testing.T) *contract {
	t.Helper()
	c, err := loadContract()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// route is the document's route of a request, "" if none.
func (c *contract) route(r *http.Request) string {
	_, pattern := c.routes.Handler(r)
	return pattern
}

// response resolves a response of the document's components.
func (c *contract) response(r apiResponse) apiResponse {
	if name, ok := strings.CutPrefix(r.Ref, "#/components/responses/"); ok {
		return c.doc.Components.Responses[name]
	}
	return r
}

// codes are the error codes a response of the document allows.
func (c *contract) codes(r apiResponse) []string {
	body, ok := c.response(r).Content["application/json"]
	if !ok {
		return nil
	}
	var schema struct {
		Properties struct {
			Error struct {
				Properties struct {
					Code struct {
						Enum []string `json:"enum"`
					} `json:"code"`
				} `json:"properties"`
			} `json:"error"`
		} `json:"properties"`
	}
	_ = json.Unmarshal(body.Schema, &schema)
	return schema.Properties.Error.Properties.Code.Enum
}

// validateSchema checks a JSON value against a schema of the document's
// components, named by its reference.
func (c *contract) validateSchema(t *testing.T, ref string, what string, value []byte) {
	t.Helper()
	schema := c.schemas[strings.TrimPrefix(ref, "#/components/schemas/")]
	if schema == nil {
		t.Fatalf("%s: the document has no schema %s", what, ref)
	}
	if ok, errs := schema_validation.NewSchemaValidator().ValidateSchemaBytes(schema, value); !ok {
		t.Errorf("%s does not fit %s: %s\n%s", what, ref, validationErrors(errs), value)
	}
}

func validationErrors[E error](errs []E) string {
	var b strings.Builder
	for _, e := range errs {
		b.WriteString("\n  ")
		b.WriteString(e.Error())
	}
	return b.String()
}

// served reports whether the server serves a route of the document; every
// route is, but an awaited one.
func served(route string) bool {
	_, awaited := awaitedRoutes[route]
	return !awaited
}

func TestOpenAPIDocumentIsValid(t *testing.T) {
	t.Parallel()
	c := theContract(t)
	if ok, errs := c.validator.ValidateDocument(); !ok {
		t.Fatalf("openapi.json is not a valid OpenAPI 3.1 document:%s", validationErrors(errs))
	}
	ids := map[string]string{}
	used := map[string]bool{}
	for route, op := range c.ops {
		if op.OperationID == "" || ids[op.OperationID] != "" {
			t.Errorf("%s: operationId %q is missing or also %s's", route, op.OperationID, ids[op.OperationID])
		}
		ids[op.OperationID] = route
		if op.Roles == nil {
			t.Errorf("%s does not say its roles (x-belay-roles)", route)
		}
		if public := op.Security != nil && len(*op.Security) == 0; public != (op.Roles != nil && len(*op.Roles) == 0) {
			t.Errorf("%s: an operation without roles is one without security, and only it", route)
		}
		for status, r := range op.Responses {
			for _, code := range c.codes(r) {
				used[code] = true
			}
			if len(c.response(r).Content) == 0 {
				t.Errorf("%s %s: an answer without content", route, status)
			}
		}
	}
	var enum struct {
		Enum []string `json:"enum"`
	}
	if err := json.Unmarshal(c.doc.Components.Schemas["ErrorCode"], &enum); err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(used)); !slices.Equal(got, slices.Sorted(slices.Values(enum.Enum))) {
		t.Errorf("the operations answer the codes %v; ErrorCode lists %v", got, enum.Enum)
	}
	// Every code the server's source can answer under /v1 is a code of
	// the document: a new one is documented before it ships.
	notAPI := []string{"invalid_form", "store_unavailable"} // the console's and /readyz's
	for _, code := range serverErrorCodes(t) {
		if !slices.Contains(enum.Enum, code) && !slices.Contains(notAPI, code) {
			t.Errorf("the server answers error code %q, which ErrorCode does not list", code)
		}
	}
}

// serverErrorCodes are the error codes the server's source names: the
// Code of every apiError it builds and the first argument of every
// errBadRequest.
func serverErrorCodes(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]bool{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.KeyValueExpr:
				if id, ok := n.Key.(*ast.Ident); ok && id.Name == "Code" {
					if lit, ok := n.Value.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						codes[strings.Trim(lit.Value, `"`)] = true
					}
				}
			case *ast.CallExpr:
				if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "errBadRequest" && len(n.Args) > 0 {
					if lit, ok := n.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						codes[strings.Trim(lit.Value, `"`)] = true
					}
				}
			}
			return true
		})
	}
	if len(codes) < 10 {
		t.Fatalf("found only the error codes %v in the server's source", codes)
	}
	return slices.Sorted(maps.Keys(codes))
}

// routeList records the routes the server registers.
type routeList []string

func (l *routeList) Handle(pattern string, _ http.Handler) { *l = append(*l, pattern) }
func (l *routeList) HandleFunc(pattern string, _ func(http.ResponseWriter, *http.Request)) {
	*l = append(*l, pattern)
}

func TestOpenAPIRoutesAreTheServers(t *testing.T) {
	t.Parallel()
	c := theContract(t)
	f := newFixture(t)
	var registered routeList
	f.srv.apiRoutes(&registered)
	server := map[string]bool{}
	for _, pattern := range registered {
		if pattern == "/v1/" {
			continue // the answer to every other path: not_found
		}
		server[pattern] = true
		if _, ok := c.ops[pattern]; !ok {
			t.Errorf("the server serves %s, which openapi.json does not describe", pattern)
		}
	}
	for route := range c.ops {
		_, awaited := awaitedRoutes[route]
		switch {
		case server[route] && awaited:
			t.Errorf("the server serves %s now: take it off awaitedRoutes, so that it is driven", route)
		case !server[route] && !awaited:
			t.Errorf("openapi.json describes %s, which the server does not serve", route)
		}
	}
	for route := range awaitedRoutes {
		if _, ok := c.ops[route]; !ok {
			t.Errorf("awaitedRoutes names %s, which openapi.json does not describe", route)
		}
	}
}
