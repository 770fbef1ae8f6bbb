// Package support is the support-desk agent that `belay demo` runs and that
// Belay's end-to-end tests drive: ticket T-1001, a customer charged twice for
// one invoice, and an agent that refunds the duplicate charge, records why and
// tells the customer.
//
// # The world
//
// The systems the agent touches (knowledge base, billing, mailbox, CRM) are
// state in a SQLite file of their own, opened with [OpenWorld]. They live in a
// database rather than in memory because the demo kills a worker in the middle
// of a run and resumes it in another process: whatever the first process did
// to the world must still be there, and the second must see it. Every method
// reads the database; nothing is cached.
//
// Billing behaves like a real payment API where it matters: refunds are keyed
// by charge, so a second refund of a charge returns the first; it records the
// caller's idempotency key so a caller can ask what happened; and it can be
// told to lose responses ([World.SetLoseRefundResponses]) or to fail reads
// ([World.SetInvoiceFailures]). The CRM, like many real ones, has no
// idempotency keys at all.
//
// [World.SeedTickets] adds many more tickets like T-1001, one customer
// charged twice each, for tests that run hundreds of runs on one world. A
// run's requirements are checked against its own ticket: the run's client
// request id when it is a ticket id, else T-1001.
//
// # The agent
//
// [NewAgent] builds the agent over a world and a model. [Script] is a
// scripted model for the scenario; it decides each turn from the conversation
// alone, so a run resumed in a new process continues where it stopped.
//
//	world, err := support.OpenWorld(ctx, "support.world")
//	...
//	agent := support.NewAgent(world, scripted.Func(support.Script()))
package support
