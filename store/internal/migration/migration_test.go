package migration

import (
	"testing"
	"testing/fstest"
)

func TestLoad(t *testing.T) {
	fsys := fstest.MapFS{
		"m/002_more.up.sql": {Data: []byte("two")},
		"m/001_init.up.sql": {Data: []byte("one")},
		"m/README":          {Data: []byte("not a migration")},
	}
	ms, err := Load(fsys, "m/*.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	want := []File{{1, "001_init.up.sql", "one"}, {2, "002_more.up.sql", "two"}}
	if len(ms) != len(want) || ms[0] != want[0] || ms[1] != want[1] {
		t.Errorf("Load = %+v, want %+v", ms, want)
	}
}

func TestLoadOutOfStep(t *testing.T) {
	for name, fsys := range map[string]fstest.MapFS{
		"gap":       {"001_a.up.sql": {}, "003_c.up.sql": {}},
		"twice":     {"001_a.up.sql": {}, "001_b.up.sql": {}},
		"no number": {"init.up.sql": {}},
		"from 0":    {"000_a.up.sql": {}},
	} {
		if ms, err := Load(fsys, "*.up.sql"); err == nil {
			t.Errorf("%s: Load = %+v, want an error", name, ms)
		}
	}
}
