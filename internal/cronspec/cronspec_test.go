package cronspec

import (
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // Europe/Paris, on a host without a zone database
)

func TestParseAndNext(t *testing.T) {
	from := time.Date(2026, 12, 3, 10, 30, 0, 0, time.UTC) // a Thursday
	for _, c := range []struct {
		spec string
		want time.Time
	}{
		{"0 9 * * 1-5", time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)},
		{"@hourly", time.Date(2026, 12, 3, 11, 0, 0, 0, time.UTC)},
		{"*/15 * * * *", time.Date(2026, 12, 3, 10, 45, 0, 0, time.UTC)},
		{"CRON_TZ=Europe/Paris 0 12 * * *", time.Date(2026, 12, 3, 11, 0, 0, 0, time.UTC)},
	} {
		s, err := Parse(c.spec)
		if err != nil {
			t.Errorf("%q: %v", c.spec, err)
			continue
		}
		if got := s.Next(from); !got.Equal(c.want) {
			t.Errorf("%q: next after %v is %v, want %v", c.spec, from, got, c.want)
		}
	}
}

// A bad spec's error names what is wrong and gives an example.
func TestParseErrors(t *testing.T) {
	for spec, want := range map[string]string{
		"60 * * * *":                     `the minute field "60"`,
		"0 9 32 * *":                     `the day-of-month field "32"`,
		"0 9 * * * *":                    "6 fields, want five",
		"CRON_TZ=Mars/Olympus 0 9 * * *": "unknown time zone",
		"@fortnightly":                   "@fortnightly",
	} {
		_, err := Parse(spec)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "e.g.") && !strings.Contains(err.Error(), "such as") {
			t.Errorf("%q: %v; want it to say %q, with an example", spec, err, want)
		}
	}
}
