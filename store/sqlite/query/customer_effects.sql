-- columns: customer_effect
-- The customer's runs through runs_user, then each run's effects through
-- effects_run: only the customer's effects are read and sorted. Belay runs
-- no ANALYZE, and without statistics the planner would rather walk the
-- tenant's whole ledger by its primary key (tenant, key); CROSS JOIN keeps
-- runs outside and INDEXED BY holds the effects to their run's index.
SELECT e.tenant, e.key, e.run_id, e.tool, e.args_hash, e.args, e.state, e.result, e.step, e.attempts, e.epoch, e.in_flight_until,
    e.created_at, e.updated_at, r.agent, r.sensitive
FROM runs AS r CROSS JOIN effects AS e INDEXED BY effects_run
WHERE r.tenant = @tenant AND r.user_id = @user AND r.id <> @except_run
    AND e.run_id = r.id AND e.tenant = r.tenant
    AND e.state IN ('done', 'unknown')
ORDER BY e.created_at DESC, e.key DESC
LIMIT @limit;
