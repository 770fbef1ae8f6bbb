package store

import (
	"encoding/json"
	"testing"
	"time"
)

func TestTraceLine(t *testing.T) {
	t.Parallel()
	ts := time.Unix(1700000000, 123456000)
	for _, c := range []struct {
		data json.RawMessage
		want string
	}{
		{json.RawMessage(`{"b": 1, "a": {"x": [1, 2]}}`), `{"ts":1700000000.123456,"run_id":"run_1","step":3,"type":"t","b":1,"a":{"x":[1,2]}}`},
		{json.RawMessage(`{"step": 9, "type": "x"}`), `{"ts":1700000000.123456,"run_id":"run_1","step":3,"type":"t","data_step":9,"data_type":"x"}`},
		{nil, `{"ts":1700000000.123456,"run_id":"run_1","step":3,"type":"t"}`},
		{json.RawMessage(`[1]`), `{"ts":1700000000.123456,"run_id":"run_1","step":3,"type":"t","data":[1]}`},
	} {
		got, err := TraceLine(Event{RunID: "run_1", Step: 3, Type: "t", Time: ts, Data: c.data})
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != c.want {
			t.Errorf("data %s:\n got %s\nwant %s", c.data, got, c.want)
		}
	}
}
