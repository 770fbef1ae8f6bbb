package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"

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
		line, err := traceLine(e)
		if err != nil {
			return fmt.Errorf("event %d of %s: %w", e.Seq, id, err)
		}
		bw.Write(line)
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

// envelope are the keys every trace line starts with.
var envelope = []string{"ts", "run_id", "step", "type"}

// traceLine renders one event as a JSON object: the envelope, then the
// event's data fields in their stored order. A data field whose name is
// taken by the envelope is kept as "data_" + name.
func traceLine(e store.Event) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString(`{"ts":`)
	buf.WriteString(strconv.FormatFloat(float64(e.Time.UnixMicro())/1e6, 'f', 6, 64))
	buf.WriteString(`,"run_id":`)
	writeJSON(&buf, e.RunID)
	buf.WriteString(`,"step":`)
	buf.WriteString(strconv.Itoa(e.Step))
	buf.WriteString(`,"type":`)
	writeJSON(&buf, e.Type)

	data := bytes.TrimSpace(e.Data)
	if len(data) == 0 || bytes.Equal(data, []byte("null")) {
		buf.WriteByte('}')
		return buf.Bytes(), nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		// Not an object: keep it whole rather than lose it.
		buf.WriteString(`,"data":`)
		buf.Write(jsonValue(data))
		buf.WriteByte('}')
		return buf.Bytes(), nil
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("decode data: %w", err)
		}
		key, _ := tok.(string)
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, fmt.Errorf("decode data field %q: %w", key, err)
		}
		if slices.Contains(envelope, key) {
			key = "data_" + key
		}
		buf.WriteByte(',')
		writeJSON(&buf, key)
		buf.WriteByte(':')
		if err := json.Compact(&buf, val); err != nil {
			return nil, fmt.Errorf("data field %q: %w", key, err)
		}
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

func writeJSON(buf *bytes.Buffer, v string) {
	b, _ := json.Marshal(v)
	buf.Write(b)
}
