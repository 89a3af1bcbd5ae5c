package record

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// Waiting counts the fetch records in dataDir's journal that are not in
// the store yet: what a crash left for the next serve to import, or what a
// running serve has not written yet. report says so, rather than print
// tables that silently lack them. It reads the journal through a
// descriptor of its own and takes no lock, so it works while serve runs.
func (s *Store) Waiting(ctx context.Context, dataDir string) (int, string, error) {
	path := filepath.Join(dataDir, JournalName)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return 0, path, nil
	}
	st, err := s.db.PrepareContext(ctx, s.be.rebind(`SELECT 1 FROM records WHERE uid = ?`))
	if err != nil {
		return 0, path, s.wrap("checking the journal", err)
	}
	defer st.Close()
	j := &Journal{path: path}
	n := 0
	var qerr error
	_, _, err = j.scan(0, -1, nil, func(e *entry, _ int, _ int64) bool {
		if e.Record == nil {
			return true
		}
		var one int
		switch err := st.QueryRowContext(ctx, e.UID).Scan(&one); {
		case errors.Is(err, sql.ErrNoRows):
			n++
		case err != nil:
			qerr = err
			return false
		}
		return true
	})
	if qerr != nil {
		return n, path, s.wrap("checking the journal", qerr)
	}
	return n, path, err
}
