package record

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/pxeperf/pxeperf/internal/datalock"
)

// JournalName is the sink's append-only journal inside the data folder.
const JournalName = "records.journal"

// Journal is an append-only JSONL file of entries kept until they are known
// to be in the store. The sink appends each event here before queuing it, with one
// write(2): once Fetch returns, the entry is in the OS page cache and
// survives kill -9 even if the store never saw it. Entries are imported at
// the next start (uid makes that idempotent) and the file is truncated
// when everything in it is in the store and it has reached journalKeep, or
// the sink closes.
//
// Damage never costs more than the damaged line: a line that does not
// parse, or is longer than maxLine, is skipped (and at start kept aside in
// JournalName+DamagedSuffix, which the log names); a last line without its
// newline (a write cut short) is ended before anything is appended after
// it, so it cannot swallow the next entry.
//
// An exclusive lock (datalock.TryLock) keeps two servers from sharing one
// data folder.
type Journal struct {
	path string
	f    *os.File
	// torn: an append failed and may have left part of a line; the next
	// append starts with a newline. Guarded by the sink's lock.
	torn bool
	// n is the file's length as of the last append or truncate (guarded
	// by the sink's lock), so that checking the cap costs no stat.
	n int64
}

// DamagedSuffix is appended to the journal's name for the file damaged
// lines are kept in.
const DamagedSuffix = ".damaged"

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
	if err := datalock.TryLock(f); err != nil {
		f.Close()
		if errors.Is(err, datalock.ErrLocked) {
			return nil, fmt.Errorf("record journal %s is locked: another pxeperf serve uses --data %s; stop it or use another --data", path, dataDir)
		}
		return nil, fmt.Errorf("locking record journal %s: %w", path, err)
	}
	j := &Journal{path: path, f: f}
	j.torn = !endsInNewline(f)
	if fi, err := f.Stat(); err == nil {
		j.n = fi.Size()
	}
	return j, nil
}

// endsInNewline reports whether f is empty or its last byte is a newline.
func endsInNewline(f *os.File) bool {
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return true
	}
	var b [1]byte
	if _, err := f.ReadAt(b[:], fi.Size()-1); err != nil {
		return false
	}
	return b[0] == '\n'
}

// Path is the journal file.
func (j *Journal) Path() string { return j.path }

// Close releases the file and its lock.
func (j *Journal) Close() error { return j.f.Close() }

// maxLine bounds one journal line (a record with hours of intervals fits);
// put trims an entry to fit, and a longer line is skipped when read.
const maxLine = 16 << 20

// scan reads the entries in bytes [off, end) of the journal (end < 0: to
// its end) through a descriptor of its own, so appends may go on meanwhile.
// keep is called with each entry, the length of its line and where the
// line begins; when it returns false, scanning stops and next is where
// that entry's line begins, for the next scan to start at. Lines that do not parse or are
// longer than maxLine are counted in bad and, when aside is not nil,
// copied there. Memory stays bounded by maxLine whatever the file holds.
func (j *Journal) scan(off, end int64, aside *aside, keep func(e *entry, size int, at int64) bool) (next int64, bad int, err error) {
	f, err := os.Open(j.path)
	if err != nil {
		return off, 0, fmt.Errorf("reading record journal %s: %w", j.path, err)
	}
	defer f.Close()
	var r io.Reader = io.NewSectionReader(f, off, math.MaxInt64-off)
	if end >= 0 {
		r = io.NewSectionReader(f, off, max(end-off, 0))
	}
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	over := false // the current line is longer than maxLine
	pos := off    // where the current line begins
	var lineLen int64
	for {
		chunk, rerr := br.ReadSlice('\n')
		lineLen += int64(len(chunk))
		switch {
		case over:
			aside.write(chunk) // passed through, never held
		case len(line)+len(chunk) > maxLine:
			over = true
			aside.write(line)
			aside.write(chunk)
			line = line[:0]
		default:
			line = append(line, chunk...)
		}
		if rerr == bufio.ErrBufferFull {
			continue
		}
		complete := len(chunk) > 0 && chunk[len(chunk)-1] == '\n'
		if over {
			bad++
			aside.endLine(complete)
		} else if l := bytes.TrimSpace(line); len(l) > 0 {
			e := new(entry)
			if jerr := json.Unmarshal(l, e); jerr != nil || e.UID == "" || (e.Record == nil && e.Lease == nil) {
				bad++
				aside.write(line)
				aside.endLine(complete)
			} else if !keep(e, len(line), pos) {
				return pos, bad, nil
			}
		}
		pos += lineLen
		lineLen, line, over = 0, line[:0], false
		if rerr == io.EOF {
			return pos, bad, nil
		}
		if rerr != nil {
			return pos, bad, fmt.Errorf("reading record journal %s: %w", j.path, rerr)
		}
	}
}

// aside appends damaged journal lines to a side file, opened on first use
// under a line naming the source and the time. A nil *aside discards.
type aside struct {
	path  string
	from  string
	f     *os.File
	err   error
	lines int
}

func (a *aside) write(p []byte) {
	if a == nil || a.err != nil || len(p) == 0 {
		return
	}
	if a.f == nil {
		a.f, a.err = os.OpenFile(a.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if a.err != nil {
			return
		}
		_, a.err = fmt.Fprintf(a.f, "# %s: damaged line(s) from %s\n", time.Now().UTC().Format(time.RFC3339), a.from)
	}
	if a.err == nil {
		_, a.err = a.f.Write(p)
	}
}

// endLine ends a damaged line (adding the newline a torn one lacks).
func (a *aside) endLine(complete bool) {
	if a == nil {
		return
	}
	if !complete {
		a.write([]byte{'\n'})
	}
	a.lines++
}

// close syncs and closes the side file; it returns the first error.
func (a *aside) close() error {
	if a == nil || a.f == nil {
		return a.errOrNil()
	}
	if a.err == nil {
		a.err = a.f.Sync()
	}
	if err := a.f.Close(); a.err == nil {
		a.err = err
	}
	return a.err
}

func (a *aside) errOrNil() error {
	if a == nil {
		return nil
	}
	return a.err
}

// size is the journal's length now.
func (j *Journal) size() (int64, error) {
	fi, err := j.f.Stat()
	if err != nil {
		return 0, fmt.Errorf("record journal %s: %w", j.path, err)
	}
	return fi.Size(), nil
}

// append writes one line (b ends in '\n') with a single write. After a
// failed write the next line starts with a newline, ending whatever part of
// the failed one reached the file.
func (j *Journal) append(b []byte) error {
	if j.torn {
		b = append([]byte{'\n'}, b...)
	}
	if _, err := j.f.Write(b); err != nil {
		j.torn = true
		if n, serr := j.size(); serr == nil {
			j.n = n // a short write may have left part of the line
		}
		return fmt.Errorf("record journal %s: %w (free space or make the data folder writable)", j.path, err)
	}
	j.torn = false
	j.n += int64(len(b))
	return nil
}

// truncate empties the journal; O_APPEND makes later writes start at 0.
func (j *Journal) truncate() error {
	if err := j.f.Truncate(0); err != nil {
		return fmt.Errorf("truncating record journal %s: %w", j.path, err)
	}
	j.torn, j.n = false, 0
	return nil
}
