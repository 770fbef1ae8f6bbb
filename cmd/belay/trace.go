package main

import (
	"bufio"
	"context"
	"fmt"
	"io"

	"github.com/belayrun/belay/store"
)

func runTrace(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("trace", stderr)
	db := dbFlag(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: belay trace RUN [--db PATH]")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, `Prints a run's trace as JSONL, one event a line, in order:`)
		fmt.Fprintln(stderr, `{"ts": unix seconds, "run_id", "step", "type", then the event's own fields}.`)
		fmt.Fprintln(stderr)
		fs.PrintDefaults()
	}
	id, err := parseRunArg(fs, args)
	if err != nil {
		return err
	}

	s, err := db.openExisting(ctx)
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
