UPDATE signals SET consumed_by = @wait_id WHERE id = @id AND consumed_by = '';
