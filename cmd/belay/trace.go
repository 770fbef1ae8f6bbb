package main

import (
	"bufio"
	"context"
	"fmt"
	"io"

	"github.com/belayrun/belay/store"
)

const traceUsage = `usage: belay trace RUN [--db PATH]

Prints a run's trace as JSONL, one event a line, in order:
{"ts": unix seconds, "run_id", "step", "type", then the event's own fields}.`

func runTrace(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("trace", traceUsage, stdout)
	db := dbFlag(fs)
	// The trace is JSON Lines with or without it; scripts may pass --json
	// to every command.
	fs.Bool("json", false, "the trace is JSON Lines already; accepted like every command's --json")
	id, err := fs.parseRunArg(args)
	if err != nil {
		return err
	}

	s, err := db.openReadOnly(ctx)
	if err != nil {
		return err
	}
	defer s.Close()

	if _, err := getRun(ctx, s, db, id); err != nil {
		return err
	}
	events, err := s.Events(ctx, id)
	if err != nil {
		return fmt.Errorf("read trace of %s: %w", id, err)
	}
	bw := bufio.NewWriter(stdout)
	for _, e := range events {
		line, err := store.TraceLine(e)
		if err != nil {
			return fmt.Errorf("event %d of %s: %w", e.Seq, id, err)
		}
		bw.Write(line)
		bw.WriteByte('\n')
	}
	return bw.Flush()
}
