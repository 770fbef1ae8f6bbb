// Package belay is a durable runtime for AI agents: a model that calls tools
// in a loop, some of which change the world.
//
// Belay makes the failures of such a loop survivable. Every step is
// checkpointed in a store, so a run whose worker dies resumes on any other
// worker without doing anything twice; side effects go through a ledger of
// business-level idempotency keys; and a run is done only when code has
// checked the world.
//
// # Agents, tools and runs
//
// An [Agent] names a [model.Model], its instructions and its [Tool]s. A tool
// declares its [EffectClass]: reads run freely, writes and irreversible
// calls go through the idempotency ledger. [NewTool] builds a tool from a
// typed Go function and derives its JSON Schema from the input type.
//
// A [Runtime] executes runs from a store (store/sqlite by default). Starting
// a run is idempotent per (tenant, user, client request id).
//
// # The step protocol
//
// Each step of a run:
//
//  1. claims the run with a lease whose epoch grows on every claim;
//  2. checks the guards (turn limit, ...);
//  3. calls the model and makes its response durable before any tool runs,
//     so a crash never pays for the same call twice;
//  4. executes the tool calls; a side-effecting call records its intent
//     under a key derived from the run, the tool and the business arguments
//     (never the tool_use id), then calls, then records the result;
//  5. checkpoints the results, usage, cost, plan and guard state in one
//     transaction fenced by the lease epoch: a worker whose lease was taken
//     over writes nothing. The checkpoint goes out with the next model
//     response, so a step costs one commit: the turn's side effects are
//     settled in the ledger by then, and a crash in between only runs the
//     turn's reads again.
//
// When the model stops asking for tools, the agent's [Requirement]s are
// checked against real state; only a verified run is done.
//
// # Conversations
//
// An agent with a [Conversation] offers its model the built-in ask_user tool.
// A turn that asks persists a wait and lets go of the run, which is
// waiting_input and holds no lease until [Operator.Say] (the API's POST
// /v1/runs/{id}/messages, belay say) answers it; any worker then runs the
// turn again with the reply as the tool's result.
//
// # What Belay promises
//
// A step is recorded exactly once. A tool call may be attempted more than
// once. A side effect happens exactly once whenever the tool either honours
// Belay's key downstream ([Tool.HonorsKey]) or can be asked what happened
// ([Tool.Reconcile]). A tool that can do neither is never retried blindly:
// when its outcome is unknown the run pauses for a person.
package belay
