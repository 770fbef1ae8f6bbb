SELECT count(*) FROM approvals WHERE status = 'pending';
