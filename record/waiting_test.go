package record

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Records a crash left in the journal are counted until imported.
func TestWaiting(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir)
	ctx := context.Background()
	if n, _, err := s.Waiting(ctx, dir); err != nil || n != 0 {
		t.Fatalf("no journal: %d, %v", n, err)
	}
	stored := &entry{UID: "in-store", Record: &Record{Time: time.Unix(1, 0), Proto: "http", File: "a", Outcome: "ok"}}
	if err := s.addBatch(ctx, []*entry{stored}); err != nil {
		t.Fatal(err)
	}
	var lines []byte
	for _, e := range []*entry{
		stored,
		{UID: "w1", Record: &Record{Time: time.Unix(2, 0), Proto: "http", File: "b", Outcome: "ok"}},
		{UID: "w2", Record: &Record{Time: time.Unix(3, 0), Proto: "tftp", File: "c", Outcome: "ok"}},
		{UID: "l1", Lease: &Lease{Time: time.Unix(4, 0), MAC: "52:54:00:00:00:01"}},
	} {
		b, _ := json.Marshal(e)
		lines = append(append(lines, b...), '\n')
	}
	lines = append(lines, `{"uid":"torn","record":{"fi`...)
	if err := os.WriteFile(filepath.Join(dir, JournalName), lines, 0o644); err != nil {
		t.Fatal(err)
	}
	ro, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	n, path, err := ro.Waiting(ctx, dir)
	if err != nil || n != 2 || path != filepath.Join(dir, JournalName) {
		t.Errorf("Waiting = %d, %s, %v; want 2 records (the stored one, the lease and the torn line do not count)", n, path, err)
	}
}
