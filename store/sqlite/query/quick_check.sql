-- Every page and every b-tree, but not that indexes agree with their
-- tables: linear in the file's size; the first 100 problems, or one row "ok".
PRAGMA quick_check;
