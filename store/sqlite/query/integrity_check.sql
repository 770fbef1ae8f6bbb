-- Every page, every b-tree, and that every index holds exactly its table's
-- rows; the first 100 problems, or one row "ok".
PRAGMA integrity_check;
