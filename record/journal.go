package record

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// JournalName is the sink's append-only journal inside the data folder.
const JournalName = "records.journal"

// Journal is an append-only JSONL file of entries not yet known to be in
// the store. The sink appends each event here before queuing it, with one
// write(2): once Fetch returns, the entry is in the OS page cache and
// survives kill -9 even if the store never saw it. Entries are imported at
// the next start (uid makes that idempotent) and the file is truncated
// whenever everything in it is in the store.
//
// An exclusive flock keeps two servers from sharing one data folder.
type Journal struct {
	path string
	f    *os.File
}

// OpenJournal opens (creating) <dataDir>/records.journal and locks it.
func OpenJournal(dataDir string) (*Journal, error) {
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating data folder %s: %w (set --data to a writable folder)", dataDir, err)
	}
	path := filepath.Join(dataDir, JournalName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("record journal %s: %w (make the data folder writable or set --data elsewhere)", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("record journal %s is locked: another pxeperf serve uses --data %s; stop it or use another --data", path, dataDir)
		}
		return nil, fmt.Errorf("locking record journal %s: %w", path, err)
	}
	return &Journal{path: path, f: f}, nil
}

// Path is the journal file.
func (j *Journal) Path() string { return j.path }

// Close releases the file and its lock.
func (j *Journal) Close() error { return j.f.Close() }

// maxLine bounds one journal line (a record with hours of intervals fits).
const maxLine = 16 << 20

// read returns the entries in the journal. Lines that do not parse (a line
// torn by a power loss) are skipped and counted.
func (j *Journal) read() (es []*entry, bad int, err error) {
	return j.readUpTo(-1)
}

// readUpTo reads the first size bytes (all when size < 0) through a
// descriptor of its own, so appends may go on meanwhile.
func (j *Journal) readUpTo(size int64) (es []*entry, bad int, err error) {
	f, err := os.Open(j.path)
	if err != nil {
		return nil, 0, fmt.Errorf("reading record journal %s: %w", j.path, err)
	}
	defer f.Close()
	var r io.Reader = f
	if size >= 0 {
		r = io.LimitReader(f, size)
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		e := new(entry)
		if err := json.Unmarshal(line, e); err != nil || e.UID == "" || (e.Record == nil && e.Lease == nil) {
			bad++
			continue
		}
		es = append(es, e)
	}
	if err := sc.Err(); err != nil {
		return es, bad, fmt.Errorf("reading record journal %s: %w", j.path, err)
	}
	return es, bad, nil
}

// size is the journal's length now.
func (j *Journal) size() (int64, error) {
	fi, err := j.f.Stat()
	if err != nil {
		return 0, fmt.Errorf("record journal %s: %w", j.path, err)
	}
	return fi.Size(), nil
}

// append writes one line (b ends in '\n') with a single write.
func (j *Journal) append(b []byte) error {
	if _, err := j.f.Write(b); err != nil {
		return fmt.Errorf("record journal %s: %w (free space or make the data folder writable)", j.path, err)
	}
	return nil
}

// truncate empties the journal; O_APPEND makes later writes start at 0.
func (j *Journal) truncate() error {
	if err := j.f.Truncate(0); err != nil {
		return fmt.Errorf("truncating record journal %s: %w", j.path, err)
	}
	return nil
}
