package server

// The trend of approval rates on the stats page: per category, what people
// decided per day or per week, drawn as inline SVG.

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/belayrun/belay/store"
)

// The trend shows the last trendDays days, a day a column, while every
// decision falls within them; then the last trendWeeks weeks, a week a
// column.
const (
	trendDays  = 14
	trendWeeks = 12
)

// The geometry of one category's trend chart, in SVG user units: the plot
// is plotHeight high, below a margin for the axis labels on its left.
const (
	trendWidth  = 360
	trendHeight = 150
	plotLeft    = 36
	plotTop     = 10
	plotHeight  = 100
)

type trend struct {
	// Unit is "day" or "week"; Span says over how long, in words.
	Unit   string
	Span   string
	Width  int
	Height int
	Charts []trendChart
	Axis   []trendTick
	// Left is where the plot starts, AxisX where its labels end.
	Left, AxisX int
}

// trendChart is one category's columns.
type trendChart struct {
	Category string
	Columns  []trendColumn
	// People and Policy count the category's decisions in the span.
	People, Policy int
}

// trendColumn is one day or week of a category: people's decisions as
// shares stacked to the full height, and how many there were.
type trendColumn struct {
	Start    time.Time
	Label    string
	X, W     int
	Mid      int
	Segments []trendSegment
	// Approved, Edited, Rejected and Expired are people's decisions;
	// Policy counts the decisions policies took, kept apart.
	Approved, Edited, Rejected, Expired, Policy int
	Title                                       string
	// Anchor aligns the column's date under it: the first and last to the
	// plot's edges, so that they are not cut off.
	Anchor string
	// Baseline is the y of the plot's bottom, where an empty column's mark
	// and the counts go.
	Baseline int
}

type trendSegment struct {
	X, Y, W, H int
	Class      string
}

type trendTick struct {
	Y     int
	Label string
}

// People counts the decisions of people in the column.
func (c trendColumn) People() int { return c.Approved + c.Edited + c.Rejected + c.Expired }

// Rate is the share of people's decisions that approved the call as asked.
func (c trendColumn) Rate() float64 {
	if c.People() == 0 {
		return 0
	}
	return float64(c.Approved) / float64(c.People())
}

// approvalTrend buckets decided approvals by the day or week they were
// decided in, per category, up to now. People's decisions are the ones
// drawn; a policy's (decided by policy:<name>: an automatic approval, an
// expiry) are counted beside them, since they say nothing of how far people
// trust the agent.
func approvalTrend(approvals []store.Approval, now time.Time) trend {
	now = now.UTC()
	t := trend{Unit: "day", Width: trendWidth, Height: trendHeight, Left: plotLeft - 2, AxisX: plotLeft - 6}
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	first := today.AddDate(0, 0, 1-trendDays)
	for _, a := range approvals {
		if a.Status != store.ApprovalPending && a.DecidedAt.Before(first) {
			t.Unit = "week"
			break
		}
	}
	n, step := trendDays, func(d time.Time, k int) time.Time { return d.AddDate(0, 0, k) }
	t.Span = fmt.Sprintf("the last %d days, a column a day", trendDays)
	if t.Unit == "week" {
		// Weeks start on Monday.
		monday := today.AddDate(0, 0, -((int(today.Weekday()) + 6) % 7))
		first = monday.AddDate(0, 0, -7*(trendWeeks-1))
		n, step = trendWeeks, func(d time.Time, k int) time.Time { return d.AddDate(0, 0, 7*k) }
		t.Span = fmt.Sprintf("the last %d weeks, a column a week (from Monday)", trendWeeks)
	}
	slot := (trendWidth - plotLeft) / n
	charts := map[string]*trendChart{}
	for _, a := range approvals {
		if a.Status == store.ApprovalPending || a.DecidedAt.Before(first) || a.DecidedAt.After(now) {
			continue
		}
		c, ok := charts[a.Category]
		if !ok {
			c = &trendChart{Category: a.Category, Columns: make([]trendColumn, n)}
			for i := range c.Columns {
				c.Columns[i].Start = step(first, i)
			}
			charts[a.Category] = c
		}
		i := 0
		for i+1 < n && !a.DecidedAt.Before(step(first, i+1)) {
			i++
		}
		col := &c.Columns[i]
		if strings.HasPrefix(a.DecidedBy, "policy:") {
			col.Policy++
			c.Policy++
			continue
		}
		c.People++
		switch a.Status {
		case store.ApprovalApproved:
			col.Approved++
		case store.ApprovalEdited:
			col.Edited++
		case store.ApprovalRejected:
			col.Rejected++
		case store.ApprovalExpired:
			col.Expired++
		}
	}
	for _, c := range charts {
		for i := range c.Columns {
			col := &c.Columns[i]
			col.X = plotLeft + i*slot + slot/6
			col.W = slot - slot/3
			col.Mid = col.X + col.W/2
			// Three labels fit under the columns: the first, the middle
			// and the last.
			if i == 0 || i == n/2 || i == n-1 {
				col.Label = col.Start.Format("Jan 2")
			}
			col.Anchor = "middle"
			switch i {
			case 0:
				col.Anchor = "start"
			case n - 1:
				col.Anchor = "end"
			}
			col.Segments, col.Title = stack(*col, t.Unit)
			col.Baseline = plotTop + plotHeight
		}
		t.Charts = append(t.Charts, *c)
	}
	slices.SortFunc(t.Charts, func(a, b trendChart) int { return cmp.Compare(a.Category, b.Category) })
	for _, share := range []int{100, 50, 0} {
		t.Axis = append(t.Axis, trendTick{Y: plotTop + plotHeight - share*plotHeight/100, Label: fmt.Sprintf("%d%%", share)})
	}
	return t
}

// stack draws a column's decisions as shares of its height, approvals at
// the bottom, and says them in words for its tooltip.
func stack(c trendColumn, unit string) ([]trendSegment, string) {
	when := c.Start.Format("Mon Jan 2")
	if unit == "week" {
		when = "week of " + c.Start.Format("Jan 2")
	}
	people := c.People()
	title := fmt.Sprintf("%s: no decision by people", when)
	if people > 0 {
		title = fmt.Sprintf("%s: %d by people, %.0f%% approved (%d approved, %d edited, %d rejected", when, people,
			100*c.Rate(), c.Approved, c.Edited, c.Rejected)
		if c.Expired > 0 {
			title += fmt.Sprintf(", %d expired", c.Expired)
		}
		title += ")"
	}
	if c.Policy > 0 {
		title += fmt.Sprintf("; %d by policy, not counted", c.Policy)
	}
	if people == 0 {
		return nil, title
	}
	var segs []trendSegment
	y := plotTop + plotHeight
	done := 0
	for _, part := range []struct {
		n     int
		class string
	}{{c.Approved, "seg-approved"}, {c.Edited, "seg-edited"}, {c.Rejected, "seg-rejected"}, {c.Expired, "seg-pending"}} {
		if part.n == 0 {
			continue
		}
		// Heights from cumulative shares, so that rounding never leaves a
		// gap or overshoots the top.
		top := plotTop + plotHeight - (done+part.n)*plotHeight/people
		segs = append(segs, trendSegment{X: c.X, Y: top, W: c.W, H: y - top, Class: part.class})
		y = top
		done += part.n
	}
	return segs, title
}
