package belay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

// provider is the payment system of the source texts: the charge always
// lands; whether the response comes back is another matter.
type provider struct {
	mu     sync.Mutex
	ledger [][2]any // (order id, cents) for every charge made
	flaky  bool
}

func (p *provider) refund(order string, cents int) (json.RawMessage, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ledger = append(p.ledger, [2]any{order, cents})
	if p.flaky {
		p.flaky = false
		return nil, fmt.Errorf("no response from the payment provider: %w", ErrUnknownOutcome)
	}
	return json.RawMessage(fmt.Sprintf(`{"refund_id":"R-%d","cents":%d}`, len(p.ledger), cents)), nil
}

func (p *provider) row(label string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	total := 0
	var items []string
	for _, c := range p.ledger {
		total += c[1].(int)
		items = append(items, fmt.Sprintf("('%s', %d)", c[0], c[1]))
	}
	return fmt.Sprintf("%-14s%d charges %d cents [%s]", label, len(p.ledger), total, strings.Join(items, ", "))
}

type orderRefund struct {
	OrderID string `json:"order_id"`
	Cents   int    `json:"cents"`
}

// refundThroughBelay runs an agent that asks for the refund `asks` times,
// each under a new tool_use id, against p.
func refundThroughBelay(t *testing.T, p *provider, order string, asks int) store.Run {
	t.Helper()
	tool := NewTool("refund", "refund an order", Irreversible, func(ctx context.Context, in orderRefund) (json.RawMessage, error) {
		return p.refund(in.OrderID, in.Cents)
	})
	tool.Reconcile = func(ctx context.Context, key string, args json.RawMessage) (json.RawMessage, bool, error) {
		// Ask the payment system what it has for this order.
		var in orderRefund
		if err := json.Unmarshal(args, &in); err != nil {
			return nil, false, err
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		for i := len(p.ledger) - 1; i >= 0; i-- {
			if p.ledger[i][0] == in.OrderID {
				return json.RawMessage(fmt.Sprintf(`{"refund_id":"recovered","cents":%d}`, p.ledger[i][1])), true, nil
			}
		}
		return nil, false, nil
	}
	var replies []scripted.Reply
	for range asks {
		replies = append(replies, scripted.Reply{Calls: []scripted.Call{{Name: "refund", Args: orderRefund{OrderID: order, Cents: 2900}}}})
	}
	replies = append(replies, scripted.Reply{Text: "refunded"})
	agent := &Agent{Name: "refunds", Model: scripted.New(replies...), Tools: []Tool{tool}}
	run := startAndDrain(t, newRuntime(t, openStore(t), nil, agent), RunRequest{Agent: "refunds", User: "u", Input: "refund " + order})
	if run.Status != store.StatusDone {
		t.Fatalf("run %s (%s)", run.Status, run.StopDetail)
	}
	return run
}

// The idempotency table of the source texts, from Belay's engine: a naive
// retry charges twice; Belay, with a lost response, charges once; the same
// call arriving three times charges once.
func TestIdempotencyTable(t *testing.T) {
	t.Parallel()
	naive := &provider{flaky: true}
	if _, err := naive.refund("A-1", 2900); errors.Is(err, ErrUnknownOutcome) {
		_, _ = naive.refund("A-1", 2900) // "it failed, try again"
	}
	belay := &provider{flaky: true}
	refundThroughBelay(t, belay, "A-2", 1)
	replayed := &provider{}
	refundThroughBelay(t, replayed, "A-3", 3)

	got := []string{naive.row("naive retry"), belay.row("idempotent"), replayed.row("replayed x3")}
	want := []string{
		"naive retry   2 charges 5800 cents [('A-1', 2900), ('A-1', 2900)]",
		"idempotent    1 charges 2900 cents [('A-2', 2900)]",
		"replayed x3   1 charges 2900 cents [('A-3', 2900)]",
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d:\n got %s\nwant %s", i, got[i], want[i])
		}
	}
	t.Log("\n" + strings.Join(got, "\n"))
}
