// Package postgres is Belay's PostgreSQL store, for when one machine is not
// enough: many processes on many machines share one database, and any of
// them resumes any run. It passes the conformance suite in store/storetest,
// as the SQLite store does.
//
// # Schema and migrations
//
// Belay's tables live in one schema (Config.Schema, "belay" by default),
// which every connection of the store has as its only search_path, so that
// its SQL names no schema. Several stores may share a database in different
// schemas.
//
// The migrations are embedded (migration/NNN_*.up.sql) and Open applies the
// missing ones in one transaction under an advisory lock on the schema's
// name: of many processes opening a new schema at once, one migrates and the
// others wait, then find the work done. Each applied migration is a row of
// belay_schema_version. A schema of a newer version is refused with
// store.ErrSchemaTooNew, one holding tables but no version table with
// store.ErrNotBelay; neither is modified.
//
// Times are stored as bigint unix nanoseconds (timestamptz keeps only
// microseconds) and JSON as bytea (jsonb would re-encode it), so both
// round-trip exactly.
//
// # Tenants, roles and row-level security
//
// Every table carries a tenant, and every key and reference includes it: a
// message, event, effect, approval, notification or delivery cannot sit in
// another tenant than its run, nor a session or delivery in another tenant
// than its key or webhook. Run, approval, API key and webhook ids alone are
// unique across tenants, since workers, operators and the server name them
// by id.
//
// Isolation is enforced by the database too, not only by WHERE clauses. Two
// roles take part:
//
//   - The owner is the role the URL connects as. It creates the schema and
//     its tables and owns them, so row-level security does not apply to it.
//     The store uses it for work across tenants: workers claiming due runs,
//     taking over, renewing leases, checkpointing, expiring approvals and
//     reading a run's messages, events and notifications by run id; webhook
//     senders fanning notifications out, claiming and settling deliveries;
//     the server finding an API key by id and a console session by token
//     hash, before it knows the tenant, ending a session, and deleting every
//     tenant's expired sessions when someone signs in; and operator
//     tools passing the empty tenant, which means every tenant.
//   - The application role (Config.AppRole, "belay_app" by default) runs the
//     requests of one tenant: creating a run, reading runs, effects,
//     approvals and kill switches of a tenant, beginning an effect, resuming
//     or canceling a run, deciding an approval, setting a tenant's kill
//     switch, creating, listing and revoking API keys, creating sessions,
//     creating, listing and disabling webhooks, listing deliveries. It cannot
//     log in, owns nothing, has neither SUPERUSER nor BYPASSRLS, and may
//     select, insert and update the tables (never delete: history is
//     append-only, and an ended session or revoked key is marked, not
//     removed). Open creates it if it does not exist, makes the owner a
//     member, grants what is missing (tables a later migration adds too), and
//     refuses a role that could escape the policies.
//
// Every tenant table has row-level security enabled, with a policy that
// admits the rows whose tenant equals the transaction's belay.tenant
// setting; an unset or empty setting admits none. (A tenant also sees the
// global kill switch, but cannot change it.) A transaction for one tenant
// begins with
//
//	SELECT set_config('role', 'belay_app', true), set_config('belay.tenant', $tenant, true)
//
// (SET LOCAL ROLE and SET LOCAL belay.tenant, which cannot take
// parameters), so that every statement after it sees and writes that
// tenant's rows only, whatever its WHERE clause says. Both settings end with
// the transaction, and the connection goes back to the pool as the owner.
// The statement is pipelined with the ones after it: the scope costs no
// round trip.
//
// This guards against a query that forgets its tenant, not against SQL
// injection: the store runs no SQL but its own, and a session could RESET
// ROLE.
//
// # Claims, leases and fencing
//
// ClaimRuns leases due runs in one statement that selects them FOR UPDATE
// SKIP LOCKED: workers claiming at once take disjoint runs without waiting
// for each other, and each claim raises the run's lease epoch. Every write
// under a lease is fenced by (run, owner, epoch) and by the run not being
// finished; a fence that matches no row writes nothing and returns
// store.ErrLeaseLost. A checkpoint made while no other is being written goes
// out as one pipelined batch, run as one implicit transaction in one round
// trip: its fenced update raises when the fence does not match, which
// aborts the rest. BeginEffect holds the run's row with FOR SHARE until it
// commits, so no claim slips between its fence check and its write.
//
// Checkpoints made at once are group-committed: a writer goroutine takes
// the ones waiting, up to 64, and writes them in one statement, so in one
// transaction and one commit. The statement updates the runs whose fence
// holds, in one UPDATE over the arrays of the batch, appends the messages,
// events, notifications and approvals of those runs only, settles their
// effects, and returns which fences held; the others are answered
// store.ErrLeaseLost and wrote nothing. If the statement fails (one
// checkpoint rewrote a message, or settled an effect never begun), nothing
// of it was written, and each checkpoint is written again alone, so that
// one bad checkpoint fails no other. Most of what a checkpoint written alone
// costs the server is per statement and per commit, not per row: a batch
// of 16 costs it about what 3 checkpoints written alone do, one of 64 about
// what 8 do. A second writer helps when many checkpoints wait.
//
// Claims take due runs oldest first by the time their status or lease last
// changed, walking the index of due runs in that order whatever the
// planner's statistics say. A mid-run checkpoint that keeps its lease
// changes none of the columns an index covers, so PostgreSQL rewrites the
// row in place (a HOT update) without new index entries; the runs table
// leaves room on its pages for that.
//
// Every write to a run's approvals (the checkpoint that asks, a decision, an
// expiry) holds the run's row, so decisions on one run take turns and the
// last one, seeing nothing pending, queues the run. Expirers lock with SKIP
// LOCKED, so several may run at once. Canceling a run locks it too, rejects
// its pending approvals and clears its lease owner, so the worker holding
// the lease finds every later write fenced off.
//
// Webhook senders work the same way. ClaimDeliveries fans the undispatched
// notifications out, one delivery per (notification, webhook) whatever
// runs at once, and leases due deliveries with SKIP LOCKED, in one
// transaction. The fan-out share-locks the webhooks it delivers to, so that
// disabling one waits for it and then fails what it fanned out.
//
// # Wakeups
//
// Whenever a run becomes due (created, resumed, its last approval decided or
// expired, requeued by a released kill switch, let go by a checkpoint while
// still running or queued) the transaction that made it so sends NOTIFY
// belay_wakeup with a JSON payload naming the schema, the tenant and the
// run; PostgreSQL delivers it on commit, and never for a transaction rolled
// back. Wakeups listens on a
// connection of its own and turns the notifications of its schema into
// signals, so that idle workers claim at once instead of at their next poll.
// Notifications are hints: a listener reconnecting loses the ones sent
// meanwhile, and a timer (resume_after) or an expired lease notifies nobody,
// so workers keep polling with backoff as the fallback.
//
// # Connection poolers
//
// The schema reaches the server as a startup parameter and wakeups need
// LISTEN on a session of their own: connect directly or through a pooler in
// session mode.
package postgres
