// Package migration reads the migrations a driver embeds: one file of SQL
// per schema version, named for it (001_init.up.sql), numbered 1, 2, 3...
// without gaps, so that a schema's version says which have run. Each
// driver keeps its own files, in its own dialect.
package migration

import (
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
)

// File is one migration.
type File struct {
	// Version is the schema version the migration brings a database to.
	Version int
	// Name is the file's name, for errors.
	Name string
	SQL  string
}

// Load returns the migrations in fsys whose names match pattern, in order
// of version, or an error naming the first file out of step.
func Load(fsys fs.FS, pattern string) ([]File, error) {
	names, err := fs.Glob(fsys, pattern)
	if err != nil {
		return nil, err
	}
	var ms []File
	for i, name := range names {
		base := path.Base(name)
		prefix, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(prefix)
		if !ok || err != nil || v != i+1 {
			return nil, fmt.Errorf("migration %s: want version %03d", base, i+1)
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, File{Version: v, Name: base, SQL: string(b)})
	}
	return ms, nil
}
