package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
)

// envelope are the keys every trace line starts with.
var envelope = []string{"ts", "run_id", "step", "type"}

// TraceLine renders one event as a line of a JSONL trace: a JSON object of
// the envelope, then the event's data fields in their stored order. A data field whose name is
// taken by the envelope is kept as "data_" + name.
func TraceLine(e Event) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString(`{"ts":`)
	buf.WriteString(strconv.FormatFloat(float64(e.Time.UnixMicro())/1e6, 'f', 6, 64))
	buf.WriteString(`,"run_id":`)
	writeString(&buf, e.RunID)
	buf.WriteString(`,"step":`)
	buf.WriteString(strconv.Itoa(e.Step))
	buf.WriteString(`,"type":`)
	writeString(&buf, e.Type)

	data := bytes.TrimSpace(e.Data)
	if len(data) == 0 || bytes.Equal(data, []byte("null")) {
		buf.WriteByte('}')
		return buf.Bytes(), nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		// Not an object: keep it whole rather than lose it.
		buf.WriteString(`,"data":`)
		if json.Valid(data) {
			buf.Write(data)
		} else {
			writeString(&buf, string(data))
		}
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
		writeString(&buf, key)
		buf.WriteByte(':')
		if err := json.Compact(&buf, val); err != nil {
			return nil, fmt.Errorf("data field %q: %w", key, err)
		}
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

func writeString(buf *bytes.Buffer, v string) {
	b, _ := json.Marshal(v)
	buf.Write(b)
}
