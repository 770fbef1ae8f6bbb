-- A compact copy of the database as of this statement's snapshot.
VACUUM INTO @path;
