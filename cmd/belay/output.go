package main

import (
	"encoding/json"
	"io"
)

// The JSON convention, the same for every command that prints data (the
// README states it): with --json, stdout is JSON Lines, one JSON object a
// line. A command about one thing (show, check, version, start, approve,
// ...) prints one line; a list (runs, approvals, keys list, ...) prints a
// line per item, and nothing when it is empty; a stream (trace) prints a
// line per event as it reads them. Field names are snake_case; the keys of
// what is data (a tool's own arguments and results, the counts per decider
// under "by") are as they were written. Errors go to stderr as text, and the
// exit status says whether the command did what it was asked.
//
// One shape for all: every output is read line by line with one JSON
// decoder, a list can be cut with head and streamed without holding it
// whole, and trace, a stream that cannot be one array, needs no exception.

// jsonFlag registers --json.
func jsonFlag(fs *commandFlags, what string) *bool {
	return fs.Bool("json", false, "print "+what+" as JSON Lines (one JSON object a line)")
}

// writeJSON prints v as one line of JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// writeJSONLines prints each item of a list as a line of JSON.
func writeJSONLines[T any](w io.Writer, items []T) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, v := range items {
		if err := enc.Encode(v); err != nil {
			return err
		}
	}
	return nil
}
