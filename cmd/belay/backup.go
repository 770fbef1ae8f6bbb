package main

import (
	"context"
	"fmt"
	"io"
	"os"
)

const backupUsage = `usage: belay backup [--db PATH] FILE

Writes a consistent copy of the SQLite database to FILE, a new file, while workers
go on: it holds every step committed before the backup began. Do not copy the
database file itself while Belay runs: what its WAL holds is not in it yet.
To restore, stop every belay process on the database, move its -wal and -shm files
away if they are left (SQLite would replay an old WAL onto the backup), and put
FILE in the database's place; or pass --db FILE.`

func runBackup(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("backup", backupUsage, stdout)
	db := dbFlag(fs)
	asJSON := jsonFlag(fs, "the copy written, one object")
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if err := db.check(); err != nil {
		return usageError{"backup: " + err.Error()}
	}
	switch {
	case len(pos) != 1:
		return usageError{"backup: want the path of the new file (usage: belay backup [--db PATH] FILE)"}
	case db.url != "":
		return usageError{"backup: the PostgreSQL store is backed up with PostgreSQL's tools, for example: pg_dump --schema belay " + redactURL(db.url)}
	}
	to := pos[0]

	s, err := openExistingStore(ctx, db.path, true)
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.Backup(ctx, to); err != nil {
		return err
	}
	info, err := os.Stat(to)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(stdout, struct {
			DB     string `json:"db"`
			Backup string `json:"backup"`
			Bytes  int64  `json:"bytes"`
		}{db.path, to, info.Size()})
	}
	fmt.Fprintf(stdout, "backed up %s to %s (%.1f MB)\n", db.path, to, float64(info.Size())/(1<<20))
	return nil
}
