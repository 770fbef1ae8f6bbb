package model

import (
	"fmt"
	"math"
)

// Nanodollars is an amount of US dollars in units of 1e-9. Costs are summed
// over thousands of calls; integers keep the sum exact.
type Nanodollars int64

// USD converts a dollar amount, rounding to the nearest nanodollar.
func USD(dollars float64) Nanodollars { return Nanodollars(math.Round(dollars * 1e9)) }

// Dollars returns the amount in dollars.
func (n Nanodollars) Dollars() float64 { return float64(n) / 1e9 }

// String formats the amount as dollars with enough digits for one cheap call.
func (n Nanodollars) String() string { return fmt.Sprintf("$%.6f", n.Dollars()) }

// Price is what a model charges, in dollars per million tokens.
type Price struct {
	InputPerMTok  float64 `json:"input_per_mtok"`
	OutputPerMTok float64 `json:"output_per_mtok"`
}

// Cost returns what usage costs at this price.
func (p Price) Cost(u Usage) Nanodollars {
	// dollars per million tokens is nanodollars per thousandth of a token:
	// $1/MTok = 1000 nanodollars per token.
	return Nanodollars(math.Round(float64(u.InputTokens)*p.InputPerMTok*1000 +
		float64(u.OutputTokens)*p.OutputPerMTok*1000))
}

// PriceTable maps model names to prices.
type PriceTable map[string]Price

// Lookup returns the price of a model and whether the table has it.
func (t PriceTable) Lookup(name string) (Price, bool) {
	p, ok := t[name]
	return p, ok
}
