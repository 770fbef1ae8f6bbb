package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/store"
)

const schedulesUsage = `usage: belay schedules add NAME --agent A --cron SPEC --input TEXT [--overlap skip|queue|allow] [--missed skip|run_once] [--tenant T] [--db PATH]
       belay schedules list [--tenant T] [--db PATH]
       belay schedules remove NAME [--tenant T] [--db PATH]

Schedules start runs on a cron spec; the workers of belay serve fire them,
each firing once however many workers there are. belay schedules VERB -h
shows a verb's flags.`

var schedulesVerbUsage = map[string]string{
	"add": `usage: belay schedules add NAME --agent A --cron SPEC --input TEXT [--overlap skip|queue|allow] [--missed skip|run_once] [--tenant T] [--json] [--db PATH]

Creates schedule NAME in tenant T (or replaces it): a run of agent A with
input TEXT at each firing of SPEC, five fields (minute hour day-of-month month
day-of-week) in UTC, or a descriptor such as @hourly. --overlap says what a
firing does while the previous firing's run has not ended: skip it (the
default), queue it until that run ends, or allow it beside. --missed says what
becomes of firings missed while no worker ran: skip them, or run_once (the
default) for all of them.`,
	"list": `usage: belay schedules list [--tenant T] [--json] [--db PATH]

Lists the schedules of tenant T, or of every tenant, with their next firing
and their last run.`,
	"remove": `usage: belay schedules remove NAME [--tenant T] [--json] [--db PATH]

Removes schedule NAME of tenant T; the runs it started stay.`,
}

// scheduleJSON is a schedule as schedules --json prints it.
type scheduleJSON struct {
	Tenant      string     `json:"tenant"`
	Name        string     `json:"name"`
	Agent       string     `json:"agent"`
	Cron        string     `json:"cron"`
	Input       string     `json:"input"`
	Overlap     string     `json:"overlap"`
	Missed      string     `json:"missed"`
	NextAt      time.Time  `json:"next_at"`
	LastRunID   string     `json:"last_run_id,omitempty"`
	LastFiredAt *time.Time `json:"last_fired_at,omitempty"`
	CreatedBy   string     `json:"created_by,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
}

func toScheduleJSON(s store.Schedule) scheduleJSON {
	j := scheduleJSON{Tenant: s.Tenant, Name: s.Name, Agent: s.Agent, Cron: s.Spec, Input: s.Input,
		Overlap: string(s.Overlap), Missed: string(s.Missed), NextAt: s.NextAt, LastRunID: s.LastRunID,
		CreatedBy: s.CreatedBy, CreatedAt: s.CreatedAt}
	if !s.LastFiredAt.IsZero() {
		j.LastFiredAt = &s.LastFiredAt
	}
	return j
}

// runSchedules adds, lists and removes schedules.
func runSchedules(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	verb, rest, err := splitVerb("schedules", schedulesUsage, []string{"add", "list", "remove"}, args, stdout)
	if err != nil {
		return err
	}
	fs := newFlags("schedules "+verb, schedulesVerbUsage[verb], stdout)
	db := dbFlag(fs)
	tenant := fs.String("tenant", "", "the schedules' tenant (default: default; for list, every tenant)")
	asJSON := jsonFlag(fs, "the schedule (a line each for list)")
	var req belay.ScheduleRequest
	var overlap, missed string
	if verb == "add" {
		fs.StringVar(&req.Agent, "agent", "", "the agent whose runs the schedule starts (required)")
		fs.StringVar(&req.Cron, "cron", "", `cron spec, e.g. "0 9 * * 1-5" (required)`)
		fs.StringVar(&req.Input, "input", "", "each run's input (required)")
		fs.StringVar(&overlap, "overlap", "skip", "while the previous run has not ended: skip, queue or allow")
		fs.StringVar(&missed, "missed", "run_once", "firings missed while no worker ran: skip or run_once")
		fs.StringVar(&req.By, "as", "human:cli", "who makes the schedule")
	}
	pos, err := fs.parse(rest)
	if err != nil {
		return err
	}
	switch {
	case verb == "list" && len(pos) > 0:
		return usageError{fmt.Sprintf("schedules list: unexpected %q; %s", pos[0], fs.usageLine())}
	case verb != "list" && len(pos) != 1:
		return usageError{fmt.Sprintf("schedules %s takes one NAME; %s", verb, fs.usageLine())}
	}
	open := db.openExisting
	if verb == "list" {
		open = db.openReadOnly
	}
	st, err := open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	op := belay.NewOperator(st)
	switch verb {
	case "add":
		req.Name, req.Tenant = pos[0], *tenant
		req.Overlap, req.Missed = store.OverlapPolicy(overlap), store.MissedPolicy(missed)
		s, err := op.AddSchedule(ctx, req)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(stdout, toScheduleJSON(s))
		}
		fmt.Fprintf(stdout, "schedule %s added for tenant %s: %s runs %q at %q, next %s UTC\n",
			s.Name, s.Tenant, s.Agent, s.Input, s.Spec, s.NextAt.Format("2006-01-02 15:04"))
	case "list":
		ss, err := op.Schedules(ctx, *tenant)
		if err != nil {
			return err
		}
		if *asJSON {
			out := make([]scheduleJSON, len(ss))
			for i, s := range ss {
				out[i] = toScheduleJSON(s)
			}
			return writeJSONLines(stdout, out)
		}
		if len(ss) == 0 {
			fmt.Fprintln(stdout, "no schedules")
			return nil
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TENANT\tNAME\tAGENT\tCRON\tOVERLAP\tMISSED\tNEXT (UTC)\tLAST RUN")
		for _, s := range ss {
			last := s.LastRunID
			if last == "" {
				last = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Tenant, s.Name, s.Agent, s.Spec, s.Overlap, s.Missed,
				s.NextAt.Format("2006-01-02 15:04"), last)
		}
		return tw.Flush()
	case "remove":
		t := *tenant
		if t == "" {
			t = belay.DefaultTenant
		}
		if err := op.RemoveSchedule(ctx, t, pos[0]); err != nil {
			return fmt.Errorf("schedules remove: %w", err)
		}
		if *asJSON {
			return writeJSON(stdout, map[string]any{"tenant": t, "name": pos[0], "removed": true})
		}
		fmt.Fprintf(stdout, "schedule %s of tenant %s removed; the runs it started stay\n", pos[0], t)
	}
	return nil
}
