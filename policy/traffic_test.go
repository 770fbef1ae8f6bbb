package policy

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/belayrun/belay"
)

func TestLoadTraffic(t *testing.T) {
	t.Parallel()
	want := []Action{
		{Kind: "search_orders", Count: 620},
		{Kind: "get_customer", Count: 180},
		{Kind: "draft_reply", Count: 60},
		{Kind: "send_email", Count: 70, External: true, Harm: 40},
		{Kind: "refund_small", Count: 45, Cents: 900, Harm: 9},
		{Kind: "refund_large", Count: 8, Cents: 24000, Harm: 240},
		{Kind: "bulk_close", Count: 14, Bulk: 120, Harm: 600},
		{Kind: "delete_account", Count: 3, Harm: 2000},
	}
	for _, path := range []string{"testdata/traffic.yaml", "testdata/traffic.json", "testdata/traffic.csv"} {
		got, err := LoadTraffic(path)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", path, got, want)
		}
	}
}

// Only kind and count are required, in any order; CSV columns too.
func TestParseTrafficOptional(t *testing.T) {
	t.Parallel()
	want := []Action{{Kind: "wipe", Count: 2, Harm: 0.5, Effect: belay.Irreversible}, {Kind: "look", Count: 1}}
	for name, src := range map[string]string{
		"t.yml": "- {count: 2, kind: wipe, harm: 0.5, effect: irreversible}\n- {kind: look, count: 1}\n",
		"t.CSV": "# a comment\ncount, effect, kind, harm\n2, irreversible, wipe, 0.5\n1,,look,\n",
	} {
		got, err := ParseTraffic(name, []byte(src))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", name, got, want)
		}
	}
}

func TestParseTrafficErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, src, want string
	}{
		{"t.yaml", "- {kind: a, count: 1, size: 3}\n",
			"t.yaml:1: [0].size: unknown field; want one of kind, count, external, cents, bulk, harm, effect"},
		{"t.yaml", "- {kind: a, count: 1}\n- {kind: b}\n",
			"t.yaml:2: [1].count: missing"},
		{"t.yaml", "- kind: a\n  count: -1\n",
			"t.yaml:2: [0].count: -1 is out of range [0, 2147483647]"},
		{"t.yaml", "- kind: a\n  count: 1.5\n",
			"t.yaml:2: [0].count: must be a whole number, not 1.5"},
		{"t.yaml", "- {kind: a, count: 1, harm: -3}\n",
			"t.yaml:1: [0].harm: -3 is not a finite number at least 0"},
		{"t.yaml", "- {kind: a, count: 1, external: yes}\n",
			`t.yaml:1: [0].external: must be true or false, not "yes"`},
		{"t.yaml", "- {kind: a, count: 1, effect: destroy}\n",
			`t.yaml:1: [0].effect: "destroy" is not one of read, write, irreversible`},
		{"t.yaml", "kind: a\n",
			"t.yaml:1: must be a list, not a mapping"},
		{"t.json", "[]",
			"t.json: the file lists no actions"},
		{"t.csv", "kind,count,size\na,1,2\n",
			"t.csv:1: size: unknown column; want kind, count, external, cents, bulk, harm, effect"},
		{"t.csv", "kind,harm\na,1\n",
			"t.csv:1: count: missing column; the header names kind, count, external, cents, bulk, harm, effect"},
		{"t.csv", "kind,count\na,1\nb,many\n",
			`t.csv:3: count: "many" is not a whole number in [0, 2147483647]`},
		{"t.csv", "kind,count,external\na,1,yes\n",
			`t.csv:2: external: "yes" is not true or false`},
		{"t.csv", "kind,count\na,1\nb,1,3\n",
			"t.csv:3: wrong number of fields"},
		{"t.csv", "kind,count\n",
			"t.csv: the file lists no actions"},
		{"t.csv", "kind,count\n,1\n",
			"t.csv:2: kind: is empty"},
		{"t.txt", "kind,count\n",
			`t.txt: unknown traffic format ".txt"; want .yaml, .yml, .json or .csv`},
	} {
		_, err := ParseTraffic(c.name, []byte(c.src))
		if err == nil || err.Error() != c.want {
			t.Errorf("%s %q:\n got %v\nwant %s", c.name, c.src, err, c.want)
		}
		var pe *Error
		if err != nil && !strings.HasSuffix(c.name, ".txt") && !errors.As(err, &pe) {
			t.Errorf("%s %q: %v is not an *Error", c.name, c.src, err)
		}
	}
}
