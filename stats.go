package belay

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/belayrun/belay/store"
)

// CategoryStats is how one category of approvals was decided. It is the
// data for granting autonomy one category at a time: a category people
// approve nearly always can be gated less, one they reject often shows
// where the agent is weak. Only people's decisions say that, so People and
// Policy split the decisions by who took them, and Suggestion is drawn
// from People.
type CategoryStats struct {
	Category string `json:"category"`
	Pending  int    `json:"pending"`
	// Decided counts approved, edited, rejected and expired approvals,
	// whoever decided them; so do the counts, rates and median that follow
	// it, as they did before People and Policy split them.
	Decided  int `json:"decided"`
	Approved int `json:"approved"`
	Edited   int `json:"edited"`
	Rejected int `json:"rejected"`
	Expired  int `json:"expired"`
	// The rates are shares of Decided.
	ApprovalRate  float64 `json:"approval_rate"`
	EditRate      float64 `json:"edit_rate"`
	RejectionRate float64 `json:"rejection_rate"`
	// MedianDecision is the median time from request to decision
	// (expiries excluded).
	MedianDecision time.Duration `json:"median_decision_ns"`
	// Suggestion says what people's decisions suggest, if anything.
	Suggestion string `json:"suggestion,omitempty"`
	// People are the decisions of people: deciders named human:<id>, and
	// any not named policy:<name>. Their rates are the ones to act on.
	People DeciderStats `json:"people"`
	// Policy are the decisions taken by a policy, named policy:<name>: an
	// automatic approval (the demo's policy:demo-auto) or the expiry of an
	// approval nobody decided (policy:expiry).
	Policy DeciderStats `json:"policy"`
}

// DeciderStats counts the decisions of one kind of decider in a category.
type DeciderStats struct {
	Decided  int `json:"decided"`
	Approved int `json:"approved"`
	Edited   int `json:"edited"`
	Rejected int `json:"rejected"`
	Expired  int `json:"expired"`
	// The rates are shares of Decided.
	ApprovalRate  float64 `json:"approval_rate"`
	EditRate      float64 `json:"edit_rate"`
	RejectionRate float64 `json:"rejection_rate"`
	// MedianDecision is the median time from request to decision
	// (expiries excluded).
	MedianDecision time.Duration `json:"median_decision_ns"`
	// By counts the decisions of each policy, by its name. Policy's only:
	// people's names stay out of statistics.
	By map[string]int `json:"by,omitempty"`
}

// policyDecider reports whether a decision was taken by a policy rather
// than a person.
func policyDecider(by string) bool { return strings.HasPrefix(by, "policy:") }

// Thresholds of the suggestions: enough decisions to mean something, and
// rates that stand out.
const (
	suggestMinDecisions   = 20
	suggestApproveRate    = 0.95
	suggestRejectDecided  = 10
	suggestRejectionShare = 0.30
)

// ApprovalStats is Operator.ApprovalStats over a bare store.
//
// Deprecated: use NewOperator(s).ApprovalStats.
func ApprovalStats(ctx context.Context, s store.Store, tenant string) ([]CategoryStats, error) {
	return NewOperator(s).ApprovalStats(ctx, tenant)
}

// ApprovalStats computes approval statistics per category from the store,
// for a tenant ("" for all), ordered by category.
func (op *Operator) ApprovalStats(ctx context.Context, tenant string) ([]CategoryStats, error) {
	approvals, err := op.store.Approvals(ctx, store.ListApprovalsParams{Tenant: tenant})
	if err != nil {
		return nil, fmt.Errorf("approval stats: %w", err)
	}
	type category struct {
		pending             int
		all, people, policy tally
	}
	by := map[string]*category{}
	for _, a := range approvals {
		c, ok := by[a.Category]
		if !ok {
			c = &category{}
			by[a.Category] = c
		}
		if a.Status == store.ApprovalPending {
			c.pending++
			continue
		}
		c.all.add(a)
		if policyDecider(a.DecidedBy) {
			c.policy.add(a)
			if c.policy.by == nil {
				c.policy.by = map[string]int{}
			}
			c.policy.by[a.DecidedBy]++
		} else {
			c.people.add(a)
		}
	}
	stats := make([]CategoryStats, 0, len(by))
	for name, c := range by {
		all := c.all.stats()
		cs := CategoryStats{Category: name, Pending: c.pending,
			Decided: all.Decided, Approved: all.Approved, Edited: all.Edited, Rejected: all.Rejected, Expired: all.Expired,
			ApprovalRate: all.ApprovalRate, EditRate: all.EditRate, RejectionRate: all.RejectionRate,
			MedianDecision: all.MedianDecision, People: c.people.stats(), Policy: c.policy.stats()}
		switch p := cs.People; {
		case p.Decided >= suggestMinDecisions && p.ApprovalRate >= suggestApproveRate:
			cs.Suggestion = fmt.Sprintf("people approved %.0f%% of %d times: a candidate for a higher auto-approve threshold", 100*p.ApprovalRate, p.Decided)
		case p.Decided >= suggestRejectDecided && p.RejectionRate >= suggestRejectionShare:
			cs.Suggestion = fmt.Sprintf("people rejected %.0f%% of %d times: the agent is weak here; read these runs' traces", 100*p.RejectionRate, p.Decided)
		}
		stats = append(stats, cs)
	}
	slices.SortFunc(stats, func(a, b CategoryStats) int { return strings.Compare(a.Category, b.Category) })
	return stats, nil
}

// tally adds up decided approvals.
type tally struct {
	s     DeciderStats
	waits []time.Duration
	by    map[string]int
}

func (t *tally) add(a store.Approval) {
	switch a.Status {
	case store.ApprovalApproved:
		t.s.Approved++
	case store.ApprovalEdited:
		t.s.Edited++
	case store.ApprovalRejected:
		t.s.Rejected++
	case store.ApprovalExpired:
		t.s.Expired++
	}
	t.s.Decided++
	if a.Status != store.ApprovalExpired {
		t.waits = append(t.waits, a.DecidedAt.Sub(a.CreatedAt))
	}
}

func (t *tally) stats() DeciderStats {
	s := t.s
	if s.Decided > 0 {
		d := float64(s.Decided)
		s.ApprovalRate = float64(s.Approved) / d
		s.EditRate = float64(s.Edited) / d
		s.RejectionRate = float64(s.Rejected) / d
	}
	if w := t.waits; len(w) > 0 {
		slices.Sort(w)
		s.MedianDecision = w[len(w)/2]
		if len(w)%2 == 0 {
			s.MedianDecision = (w[len(w)/2-1] + w[len(w)/2]) / 2
		}
	}
	s.By = t.by
	return s
}
