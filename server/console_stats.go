package server

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/store"
)

// bar is one category of the approvals chart: its segments' widths are
// shares of the chart's width.
type bar struct {
	belay.CategoryStats
	Segments []segment
	// ByPolicy says how many decisions policies took, and which.
	ByPolicy string
}

type segment struct {
	X, Width int
	Class    string
	Label    string
}

const chartWidth = 560

// statsPage charts each category's approvals: what people decided, apart
// from what a policy decided (an automatic approval, an expiry), and what
// is pending. People's decisions are the ones that say how far to trust the
// agent.
func (s *Server) statsPage(w http.ResponseWriter, r *http.Request, p Principal) (*page, error) {
	stats, err := s.rt.Operator().ApprovalStats(r.Context(), p.Tenant)
	if err != nil {
		return nil, err
	}
	var bars []bar
	for _, c := range stats {
		b := bar{CategoryStats: c, ByPolicy: byPolicy(c.Policy)}
		total := c.Decided + c.Pending
		x, done := 0, 0
		for _, part := range []struct {
			n     int
			class string
			label string
		}{{c.People.Approved, "seg-approved", "approved by people"}, {c.People.Edited, "seg-edited", "edited by people"},
			{c.People.Rejected, "seg-rejected", "rejected by people"}, {c.Policy.Decided, "seg-policy", "by policy: " + b.ByPolicy},
			{c.Pending, "seg-pending", "pending"}} {
			if part.n == 0 || total == 0 {
				continue
			}
			// Widths from cumulative shares, so that the last segment ends
			// at the chart's edge whatever the rounding.
			done += part.n
			width := done*chartWidth/total - x
			b.Segments = append(b.Segments, segment{X: x, Width: width, Class: part.class,
				Label: fmt.Sprintf("%d %s", part.n, part.label)})
			x += width
		}
		bars = append(bars, b)
	}
	// The trend reads the decisions again, with their times: the statistics
	// above are totals.
	approvals, err := s.st.Approvals(r.Context(), store.ListApprovalsParams{Tenant: p.Tenant})
	if err != nil {
		return nil, err
	}
	data := struct {
		Bars  []bar
		Width int
		Trend trend
	}{Bars: bars, Width: chartWidth, Trend: approvalTrend(approvals, s.cfg.now())}
	return &page{Title: "Approval statistics", Nav: "stats", Data: data}, nil
}

// byPolicy names the policies that decided and how often:
// "policy:demo-auto 2, policy:expiry 1".
func byPolicy(s belay.DeciderStats) string {
	names := slices.Sorted(maps.Keys(s.By))
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = fmt.Sprintf("%s %d", name, s.By[name])
	}
	return strings.Join(parts, ", ")
}
