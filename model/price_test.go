package model

import (
	"math"
	"testing"
)

// The llm_call event of the source texts: 787 tokens in, 50 out, printed as
// $0.0001481 at $0.15 / $0.60 per million tokens.
func TestPriceCostMatchesTheTrace(t *testing.T) {
	p := Price{InputPerMTok: 0.15, OutputPerMTok: 0.60}
	got := p.Cost(Usage{InputTokens: 787, OutputTokens: 50})
	if got != 148050 {
		t.Errorf("cost %d nanodollars, want 148050", got)
	}
	if printed := math.Round(got.Dollars()*1e7) / 1e7; printed != 0.0001481 {
		t.Errorf("cost rounds to %v, want 0.0001481", printed)
	}
}
