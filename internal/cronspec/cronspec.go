// Package cronspec reads the cron specs of schedules. It keeps the cron
// parser out of the root package's API: the runtime, the CLI and the
// server check and step specs through it.
package cronspec

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Example is a spec shown to whoever wrote a bad one.
const Example = `"0 9 * * 1-5" (09:00 UTC on weekdays) or "@hourly"`

var fieldNames = []string{"minute", "hour", "day-of-month", "month", "day-of-week"}

var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Spec is a parsed cron spec.
type Spec struct{ s cron.Schedule }

// Parse reads a five-field cron spec (minute hour day-of-month month
// day-of-week, in UTC unless it begins with CRON_TZ=Zone) or a descriptor
// such as @hourly or @every 90m. A bad spec's error names the field that is
// wrong and gives an example.
func Parse(spec string) (Spec, error) {
	s, err := parser.Parse(spec)
	if err == nil {
		return Spec{s}, nil
	}
	fields := strings.Fields(spec)
	if len(fields) > 0 && strings.HasPrefix(fields[0], "CRON_TZ=") || len(fields) > 0 && strings.HasPrefix(fields[0], "TZ=") {
		if _, zerr := time.LoadLocation(strings.SplitN(fields[0], "=", 2)[1]); zerr != nil {
			return Spec{}, fmt.Errorf("cron spec %q: unknown time zone in %s; want an IANA zone such as CRON_TZ=Europe/Paris", spec, fields[0])
		}
		fields = fields[1:]
	}
	if len(fields) == 5 {
		for i, f := range fields {
			probe := []string{"*", "*", "*", "*", "*"}
			probe[i] = f
			if _, ferr := parser.Parse(strings.Join(probe, " ")); ferr != nil {
				return Spec{}, fmt.Errorf("cron spec %q: the %s field %q is not valid (%v); want e.g. %s", spec, fieldNames[i], f, ferr, Example)
			}
		}
	}
	if len(fields) != 5 && !strings.HasPrefix(strings.TrimSpace(spec), "@") {
		return Spec{}, fmt.Errorf("cron spec %q has %d fields, want five (minute hour day-of-month month day-of-week), e.g. %s", spec, len(fields), Example)
	}
	return Spec{}, fmt.Errorf("cron spec %q: %v; want e.g. %s", spec, err, Example)
}

// Next is the first firing strictly after t.
func (s Spec) Next(t time.Time) time.Time {
	return s.s.Next(t)
}
