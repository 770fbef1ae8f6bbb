-- What a Belay file says of itself: store/sqlite's mark, its schema
-- version, and whether it holds any table at all.
SELECT
    (SELECT application_id FROM pragma_application_id()),
    (SELECT user_version FROM pragma_user_version()),
    (SELECT count(*) FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%');
