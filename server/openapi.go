package server

import (
	_ "embed"
	"net/http"
)

// openAPIDocument is the API's contract, OpenAPI 3.1: every route under
// /v1, its parameters, bodies, answers and error codes. It is the one
// source of the API's shapes; openapi_test.go drives every route against
// it, so it cannot drift from what the server does.
//
//go:embed openapi.json
var openAPIDocument []byte

// serveOpenAPI answers the document without a key: it holds no secret, and
// a client needs it before it has one.
func serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	w.Write(openAPIDocument)
}
