package server

import (
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/examples/support"
	"github.com/belayrun/belay/store"
)

// section returns the part of a page from the first match of start to the
// first of end after it, or fails.
func section(t *testing.T, page, start, end string) string {
	t.Helper()
	_, rest, ok := strings.Cut(page, start)
	if !ok {
		t.Fatalf("the page has no %q", start)
	}
	s, _, _ := strings.Cut(rest, end)
	return s
}

// A second refund of a charge already refunded for the customer is a
// warning at the top of its card, naming the charge, the amount, when and
// by which run; a refund of another customer's charge is not.
func TestConsoleCardWarnsOfASecondRefund(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, f *fixture) {
		op := f.key("acme", "ops", store.RoleOperator)
		approver := f.key("acme", "maya", store.RoleApprover)
		c := f.signIn(approver)
		first, _ := f.approvalFlow(op, approver)
		f.approveRun(approver, first.ID)
		bob := f.start(op, "T-2001", "support", "bob", demoInput)
		again := f.start(op, "T-1002", "support", "ada", demoInput)
		f.drain()
		cards := map[string]approvalView{}
		for _, a := range f.pending(approver) {
			cards[a.RunID] = a
		}

		_, body := get(t, c, f.http.URL+"/console/approvals/"+cards[again.ID].ID)
		warning := section(t, body, `<div class="repeat" role="alert">`, "</div>")
		if !containsAll(warning, "Charge CH-2 was already acted on for this customer.", "issue_refund", "done on",
			"Refund 288.00 USD on invoice INV-2026-004512 (charge CH-2)", "/console/runs/"+first.ID) {
			t.Errorf("the second refund's warning lacks the charge, the amount or the run that refunded it:\n%s", warning)
		}
		// The warning comes before the card's arguments: it is read first.
		if strings.Index(body, `class="repeat"`) > strings.Index(body, `<dl class="args">`) {
			t.Error("the warning comes after the call's arguments")
		}
		if _, body := get(t, c, f.http.URL+"/console/approvals/"+cards[bob.ID].ID); strings.Contains(body, `class="repeat"`) {
			t.Errorf("bob's first refund warns of ada's:\n%s", section(t, body, `class="repeat"`, "</div>"))
		}
		// The queue shows the same warning on the card.
		if _, queue := get(t, c, f.http.URL+"/console/"); strings.Count(queue, `<div class="repeat" role="alert">`) != 1 {
			t.Errorf("the queue shows %d warnings, want the one of ada's second refund", strings.Count(queue, `<div class="repeat"`))
		}
	})
}

// sameObject decides what makes an earlier effect a repeat: a shared
// object id, the tool's key fields first; the same call of a tool without
// ids; never a hidden value.
func TestSameObject(t *testing.T) {
	refund := []string{"charge_id", "amount_usd"}
	for _, c := range []struct {
		name              string
		tool, earlierTool string
		keyFields         []string
		args, earlier     string
		want              string
	}{
		{"the same charge, another amount", "issue_refund", "issue_refund", refund,
			`{"invoice_id":"INV-1","charge_id":"CH-2","amount_usd":250}`, `{"charge_id":"CH-2","invoice_id":"INV-1","amount_usd":288}`,
			"charge CH-2, invoice INV-1"},
		{"another charge of the same invoice", "issue_refund", "issue_refund", refund,
			`{"invoice_id":"INV-1","charge_id":"CH-1","amount_usd":288}`, `{"invoice_id":"INV-1","charge_id":"CH-2","amount_usd":288}`,
			"invoice INV-1"},
		{"another tool on the same ticket", "close_ticket", "add_internal_note", nil,
			`{"ticket_id":"T-1"}`, `{"ticket_id":"T-1","text":"refunded"}`, "ticket T-1"},
		{"nothing shared", "issue_refund", "issue_refund", refund,
			`{"invoice_id":"INV-1","charge_id":"CH-1"}`, `{"invoice_id":"INV-2","charge_id":"CH-2"}`, ""},
		{"the same call of a tool without ids", "send_email", "send_email", nil,
			`{"to":"ada@example.com","subject":"Refund"}`, `{"subject":"Refund","to":"ada@example.com"}`, "the same send_email call"},
		{"another call of that tool", "send_email", "send_email", nil,
			`{"to":"ada@example.com","subject":"Refund"}`, `{"to":"ada@example.com","subject":"Hello"}`, ""},
		{"the same key fields, other words", "send_email", "send_email", []string{"to"},
			`{"to":"ada@example.com","subject":"Refund"}`, `{"to":"ada@example.com","subject":"Hello"}`, "the same send_email call"},
		{"a hidden id is never compared", "save_card", "save_card", nil,
			`{"card_id":"[redacted]"}`, `{"card_id":"[redacted]"}`, ""},
		{"a hidden value is not the same call", "save_credential", "save_credential", []string{"token"},
			`{"customer":"ada","token":"[redacted]"}`, `{"customer":"ada","token":"[redacted]"}`, ""},
		{"arguments that are not an object", "x", "x", nil, `"CH-2"`, `"CH-2"`, ""},
	} {
		got := sameObject(c.tool, c.keyFields, json.RawMessage(c.args), c.earlierTool, json.RawMessage(c.earlier))
		if got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// The runs list tells runs apart: each row shows its ticket, customer,
// request, status with the reason it stopped, steps, cost and age.
func TestConsoleRunsListShowsTicketAndRequest(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	op := f.key("acme", "ops", store.RoleOperator)
	approver := f.key("acme", "maya", store.RoleApprover)
	run, _ := f.approvalFlow(op, approver)
	f.approveRun(approver, run.ID)
	waiting := f.start(op, "T-1002", "support", "bob", demoInput)
	f.drain()

	_, body := get(t, f.signIn(approver), f.http.URL+"/console/runs")
	row := section(t, body, `<tr data-run="`+run.ID+`">`, "</tr>")
	if !containsAll(row, ">T-1001</a>", ">ada</td>", "Hi, I was charged twice for my last invoice", "…", "st-done", `class="reason"`, "verified", "7", "$0.", "just now") {
		t.Errorf("the done run's row lacks its ticket, customer, request, stop reason, steps, cost or age:\n%s", row)
	}
	if strings.Contains(row, support.DoubleChargeRequest+"<") {
		t.Errorf("the row shows the whole request rather than its start:\n%s", row)
	}
	row = section(t, body, `<tr data-run="`+waiting.ID+`">`, "</tr>")
	if !containsAll(row, ">T-1002</a>", ">bob</td>", "waiting approval") || strings.Contains(row, `class="reason"`) {
		t.Errorf("the waiting run's row lacks its ticket or status, or repeats the status as its reason:\n%s", row)
	}
}

// The escalation packet is read as a person reads it: why the run stopped,
// what was asked, what was tried, the side effects with their keys and
// states, what is missing, the message for the customer; the JSON is behind
// a disclosure.
func TestConsoleRunPageReadsThePacket(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		op := f.key("acme", "ops", store.RoleOperator)
		approver := f.key("acme", "maya", store.RoleApprover)
		if err := f.world.SeedTickets(ctx, 1); err != nil {
			t.Fatal(err)
		}
		// Six turns take the run through its refund and its note, not its
		// reply: it is paused with two side effects.
		ticket := support.TicketSeed(0)
		run, _, err := f.rt.StartRun(ctx, belay.RunRequest{Agent: "support", Tenant: "acme", User: "nia",
			ClientRequestID: ticket.ID, Input: ticket.Input(), Budget: belay.Budget{MaxTurns: 6}})
		if err != nil {
			t.Fatal(err)
		}
		f.drain()
		effects, err := f.st.Effects(ctx, "acme", run.ID)
		if err != nil || len(effects) != 2 {
			t.Fatalf("effects %v, %v; want the refund and the note", effects, err)
		}

		_, body := get(t, f.signIn(approver), f.http.URL+"/console/runs/"+run.ID)
		p := section(t, body, `<section class="packet" id="packet">`, "</section>")
		read, raw, _ := strings.Cut(p, `<details class="raw" id="raw-packet">`)
		if !containsAll(read, "Paused: it reached its limit of model calls.", "used 6 turns",
			"What was asked", "I was charged twice for invoice "+ticket.InvoiceID,
			"What was tried", `<li class="out-ok"><span class="outcome">ok</span> <code>issue_refund</code>`, "Charge id: "+ticket.DuplicateChargeID,
			"Side effects", `<span class="badge eff-done">done</span>`, effects[0].Key, effects[1].Key,
			"Message for the customer", template.HTMLEscapeString(belay.DefaultCustomerMessage), "belay trace "+run.ID) {
			t.Errorf("the packet does not read as a person reads it:\n%s", read)
		}
		if strings.Contains(read, `"side_effects"`) || strings.Contains(read, "<pre>") {
			t.Errorf("the packet shows JSON outside its disclosure:\n%s", read)
		}
		if !containsAll(raw, "Raw packet (JSON)", "<pre>", "&#34;side_effects&#34;") {
			t.Errorf("the raw packet is not behind its disclosure:\n%s", raw)
		}

		// A rejected refund's run escalates with what is missing.
		rejected, a := f.approvalFlow(op, approver)
		if res := f.do("POST", "/v1/approvals/"+a.ID+"/decision", approver, map[string]any{"decision": "reject", "binding": a.Binding, "note": "not this one"}); res.status != 200 {
			t.Fatalf("reject: %d %s", res.status, res.body)
		}
		f.drain()
		_, body = get(t, f.signIn(approver), f.http.URL+"/console/runs/"+rejected.ID)
		p = section(t, body, `<section class="packet" id="packet">`, "</section>")
		if !containsAll(p, "Handed to a person", `<li class="out-error"><span class="outcome">error</span> <code>issue_refund</code>`,
			"None: this run changed nothing in the world.", "Not done", `<ul class="missing">`) {
			t.Errorf("the escalated run's packet lacks the rejected call or what is missing:\n%s", p)
		}
	})
}

// The timeline is a line per event: its time from the run's start, with
// the exact time on hover, a sentence, and the event's fields on demand.
func TestConsoleTimelineInWords(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	op := f.key("acme", "ops", store.RoleOperator)
	approver := f.key("acme", "maya", store.RoleApprover)
	run, _ := f.approvalFlow(op, approver)
	f.approveRun(approver, run.ID)
	events := f.events(run.ID)

	_, body := get(t, f.signIn(approver), f.http.URL+"/console/runs/"+run.ID)
	tl := section(t, body, `<ol class="timeline">`, "</ol>")
	lines := strings.Split(tl, "<li ")[1:]
	if len(lines) != len(events) {
		t.Fatalf("%d lines for %d events", len(lines), len(events))
	}
	line := regexp.MustCompile(`^class="ev-[a-z]+"><details id="ev-[0-9]+"><summary><time class="t" datetime="([^"]+)" title="([^"]+ UTC)">&#43;[0-9.]+ s</time><span class="line"><span class="say">([^<{]+)</span>`)
	for i, l := range lines {
		m := line.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("event %d (%s) is not a line with its time and a sentence:\n%s", i, events[i].Type, l)
			continue
		}
		if at, err := time.Parse(time.RFC3339Nano, m[1]); err != nil || !at.Equal(events[i].Time) {
			t.Errorf("event %d: time %s, want %s", i, m[1], events[i].Time)
		}
		if !strings.Contains(l, `<dl class="ev-fields"><dt>Event</dt><dd><code>`+events[i].Type+`</code>`) {
			t.Errorf("event %d has no details:\n%s", i, l)
		}
	}
	if !containsAll(tl, "Asks a person to approve: Refund 288.00 USD", "maya approved it after", "Recorded the intent to call issue_refund",
		`Checked &#34;order refunded&#34;: holds`, "Finished: its checks against the world held") {
		t.Errorf("the timeline lacks the approval, the intent, the checks or the end in words:\n%s", tl)
	}
}

// Every kind of event in the catalogue has a sentence of its own.
func TestTimelineSaysEveryKind(t *testing.T) {
	kinds := []string{store.EventRunCreated, store.EventClaimed, store.EventReleased, store.EventModelCall,
		store.EventModelFallback, store.EventToolCall, store.EventToolResult, store.EventToolRetry, store.EventBreaker,
		store.EventIntent, store.EventEffectReused, store.EventEffectUnknown, store.EventEffectInFlight, store.EventReconcile,
		store.EventCheckpoint, store.EventLoopDetected, store.EventApprovalRequested, store.EventApprovalDecided,
		store.EventApprovalApplied, store.EventApprovalExpired, store.EventVerify, store.EventStop, store.EventResumed,
		store.EventMigrated, store.EventOutcomeResolved, store.EventCanceled}
	for _, kind := range kinds {
		e := timeline(store.Event{Type: kind, Data: json.RawMessage(`{}`)})
		if e.Say == "" || e.Say == humanize(kind) {
			t.Errorf("%s has no sentence: %q", kind, e.Say)
		}
	}
	if got := timeline(store.Event{Type: "something_new", Data: json.RawMessage(`{"a":1}`)}); got.Say != "Something new" || len(got.Fields) != 1 {
		t.Errorf("an unknown kind: %+v", got)
	}
	for d, want := range map[time.Duration]string{1500 * time.Millisecond: "+1.5 s", 42 * time.Second: "+42 s",
		3*time.Minute + 5*time.Second: "+3 min 05 s", 2*time.Hour + 3*time.Minute: "+2 h 03 min", 50 * time.Hour: "+2 d 2 h"} {
		if got := sinceStart(d); got != want {
			t.Errorf("sinceStart(%s) = %q, want %q", d, got, want)
		}
	}
}

// The trend puts people's decisions in columns by day while every decision
// is recent, by week once one is older, and counts a policy's apart.
func TestApprovalTrend(t *testing.T) {
	now := time.Date(2026, 3, 12, 15, 0, 0, 0, time.UTC) // a Thursday
	decided := func(category, by string, status store.ApprovalStatus, at time.Time) store.Approval {
		return store.Approval{Category: category, DecidedBy: by, Status: status, DecidedAt: at}
	}
	recent := []store.Approval{
		decided("refund_large", "human:maya", store.ApprovalApproved, now.Add(-time.Hour)),
		decided("refund_large", "human:lee", store.ApprovalRejected, now.Add(-2*time.Hour)),
		decided("refund_large", "human:maya", store.ApprovalEdited, now.Add(-49*time.Hour)),
		decided("refund_large", "policy:demo-auto", store.ApprovalApproved, now.Add(-3*time.Hour)),
		decided("reply", "human:maya", store.ApprovalApproved, now.AddDate(0, 0, -13)),
		{Category: "refund_large", Status: store.ApprovalPending},
	}
	tr := approvalTrend(recent, now)
	if tr.Unit != "day" || len(tr.Charts) != 2 || tr.Charts[0].Category != "refund_large" || tr.Charts[1].Category != "reply" {
		t.Fatalf("trend by %s of %d charts; want days of refund_large and reply", tr.Unit, len(tr.Charts))
	}
	large := tr.Charts[0]
	if len(large.Columns) != trendDays || large.People != 3 || large.Policy != 1 {
		t.Fatalf("refund_large: %d columns, %d by people, %d by policy", len(large.Columns), large.People, large.Policy)
	}
	today, before := large.Columns[trendDays-1], large.Columns[trendDays-3]
	if today.Approved != 1 || today.Rejected != 1 || today.Policy != 1 || today.Rate() != 0.5 || before.Edited != 1 {
		t.Errorf("today %+v, two days before %+v", today, before)
	}
	if !strings.Contains(today.Title, "2 by people, 50% approved") || !strings.Contains(today.Title, "1 by policy, not counted") {
		t.Errorf("today's tooltip: %q", today.Title)
	}
	// The shares fill the plot's height exactly.
	height := 0
	for _, s := range today.Segments {
		height += s.H
	}
	if height != plotHeight || len(today.Segments) != 2 || today.Segments[0].Class != "seg-approved" {
		t.Errorf("today's segments %+v fill %d of %d", today.Segments, height, plotHeight)
	}
	if got := tr.Charts[1].Columns[0]; got.Approved != 1 || got.Label != "Feb 27" {
		t.Errorf("reply, 13 days ago: %+v", got)
	}

	older := append(recent, decided("refund_large", "human:maya", store.ApprovalApproved, now.AddDate(0, 0, -20)))
	tr = approvalTrend(older, now)
	if tr.Unit != "week" || len(tr.Charts[0].Columns) != trendWeeks {
		t.Fatalf("with a decision 20 days old: by %s, %d columns", tr.Unit, len(tr.Charts[0].Columns))
	}
	cols := tr.Charts[0].Columns
	if last := cols[trendWeeks-1]; last.Start.Weekday() != time.Monday || last.Approved != 1 || last.Rejected != 1 || last.Edited != 1 {
		t.Errorf("this week: %+v", last)
	}
	// 20 days before that Thursday is a Friday three weeks before this one.
	if week := cols[trendWeeks-4]; week.Approved != 1 || week.Start != time.Date(2026, 2, 16, 0, 0, 0, 0, time.UTC) {
		t.Errorf("the week 20 days ago: %+v", week)
	}
	if empty := cols[0]; len(empty.Segments) != 0 || !strings.Contains(empty.Title, "no decision by people") {
		t.Errorf("a week without decisions: %+v", empty)
	}
}

// The stats page draws the trend per category, people's decisions apart.
func TestConsoleStatsShowTheTrend(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	op := f.key("acme", "ops", store.RoleOperator)
	approver := f.key("acme", "maya", store.RoleApprover)
	run, _ := f.approvalFlow(op, approver)
	f.approveRun(approver, run.ID)
	_, body := get(t, f.signIn(approver), f.http.URL+"/console/stats")
	trend := section(t, body, `<section class="trend" id="trend">`, "</section>")
	if !containsAll(trend, `<figure class="trend-chart" data-category="refund_large">`, "1 by people", "<svg", `class="seg-approved"`,
		"1 by people, 100% approved (1 approved, 0 edited, 0 rejected)", "a column a day") {
		t.Errorf("the stats page has no trend of maya's approval:\n%s", trend)
	}
}

// The totals chart draws each category's segments end to end across the
// whole bar: the pending ones at its right end were once cut off.
func TestConsoleStatsBarsFillTheirWidth(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	op := f.key("acme", "ops", store.RoleOperator)
	approver := f.key("acme", "maya", store.RoleApprover)
	for i := range 3 {
		f.start(op, fmt.Sprintf("T-%d", 1001+i), "support", fmt.Sprintf("user%d", i), demoInput)
	}
	f.drain()
	pending := f.pending(approver)
	for _, a := range pending[:2] {
		if res := f.do("POST", "/v1/approvals/"+a.ID+"/decision", approver, map[string]any{"decision": "approve", "binding": a.Binding}); res.status != 200 {
			t.Fatalf("approve: %d", res.status)
		}
	}
	_, body := get(t, f.signIn(approver), f.http.URL+"/console/stats")
	bar := section(t, body, `<div class="bar-row">`, "</svg>")
	rect := regexp.MustCompile(`<rect x="(\d+)" y="0" width="(\d+)"`)
	end := 0
	for _, m := range rect.FindAllStringSubmatch(bar, -1) {
		var x, w int
		fmt.Sscan(m[1], &x)
		fmt.Sscan(m[2], &w)
		if x != end {
			t.Errorf("a segment starts at %d, after the last ended at %d", x, end)
		}
		end = x + w
	}
	if end != chartWidth || !strings.Contains(bar, `viewBox="0 0 560 24"`) {
		t.Errorf("the segments end at %d of %d:\n%s", end, chartWidth, bar)
	}
}
