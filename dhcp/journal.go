package dhcp

import (
	"bufio"
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// JournalName is the lease journal's file name inside the data folder.
const JournalName = "dhcp-leases.journal"

// Journal record kinds, one line each:
//
//	bind MAC ADDR EXPIRY-UNIX
//	free MAC ADDR
const (
	recBind = "bind"
	recFree = "free"
)

func formatRecord(kind string, b *binding) []byte {
	if kind == recBind {
		return fmt.Appendf(nil, "%s %s %s %d\n", kind, b.key, b.addr, b.expiry.Unix())
	}
	return fmt.Appendf(nil, "%s %s %s\n", kind, b.key, b.addr)
}

// journal is an append-only lease log. Writers enqueue a record while they
// hold the store lock (so the file order is the memory order), then wait
// outside it until the record is fsynced: concurrent waiters share one
// fsync (group commit), so durability costs one disk flush per batch, not
// per lease.
type journal struct {
	mu      sync.Mutex
	cond    *sync.Cond
	f       *os.File
	pending []byte
	spare   []byte
	queued  uint64 // generation of the last enqueued record
	synced  uint64 // generation known durable
	syncing bool
	err     error // sticky: after a failed write nothing is acknowledged
	noSync  bool  // fuzzing only
	path    string
	lock    *os.File // holds the flock on path+".lock"
	records int      // lines in the file plus pending, since the last compaction
}

func (j *journal) enqueue(line []byte) uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.pending = append(j.pending, line...)
	j.queued++
	j.records++
	return j.queued
}

// compact replaces the file by snapshot, the records of every binding. The
// caller holds the store lock, so snapshot already reflects every record
// enqueued so far: once it is durable, so are they.
func (j *journal) compact(snapshot []byte, lines int) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	for j.syncing {
		j.cond.Wait()
	}
	if j.err != nil {
		return j.err
	}
	tmp := j.path + ".tmp"
	err := writeSync(tmp, snapshot, j.noSync)
	if err == nil {
		err = os.Rename(tmp, j.path)
	}
	var f *os.File
	if err == nil {
		syncDir(filepath.Dir(j.path))
		f, err = os.OpenFile(j.path, os.O_WRONLY|os.O_APPEND, 0o644)
	}
	if err != nil {
		j.err = err
		j.cond.Broadcast()
		return err
	}
	_ = j.f.Close()
	j.f = f
	j.pending = j.pending[:0]
	j.synced = j.queued
	j.records = lines
	j.cond.Broadcast()
	return nil
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}

// wait blocks until generation gen is on disk.
func (j *journal) wait(gen uint64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	for j.synced < gen && j.err == nil {
		if j.syncing {
			j.cond.Wait()
			continue
		}
		j.syncing = true
		buf, upto := j.pending, j.queued
		j.pending = j.spare[:0]
		j.mu.Unlock()
		_, err := j.f.Write(buf)
		if err == nil && !j.noSync {
			err = j.f.Sync()
		}
		j.mu.Lock()
		j.spare = buf[:0]
		j.syncing = false
		if err != nil {
			j.err = err
		} else {
			j.synced = upto
		}
		j.cond.Broadcast()
	}
	return j.err
}

func (j *journal) close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return nil
	}
	err := j.f.Close()
	j.f = nil
	if j.lock != nil {
		_ = j.lock.Close()
	}
	return err
}

// openJournal replays dir/JournalName into s, rewrites it compacted
// (temp file, fsync, rename, fsync of the folder) and opens it for appending.
// A torn last line (kill -9 mid-write) is skipped: its lease was never ACKed.
func openJournal(dir string, s *leaseStore, noSync bool, log *slog.Logger) (*journal, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating data folder %s: %w (set --data to a writable folder)", dir, err)
	}
	path := filepath.Join(dir, JournalName)
	lock, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening lease lock: %w (set --data to a writable folder)", err)
	}
	if err := lockFile(lock); err != nil {
		lock.Close()
		return nil, fmt.Errorf("lease journal %s is in use by another pxeperf (%w); stop it or give this one its own --data", path, err)
	}
	j, err := loadJournal(dir, path, s, noSync, log)
	if err != nil {
		lock.Close()
		return nil, err
	}
	j.lock = lock
	return j, nil
}

func loadJournal(dir, path string, s *leaseStore, noSync bool, log *slog.Logger) (*journal, error) {
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("reading lease journal: %w", err)
	}
	bad := replay(data, s)
	if bad > 0 {
		log.Warn("dhcp: skipped unreadable lease journal lines (a torn write from a crash is normal)", "file", path, "lines", bad)
	}
	snap, lines := s.snapshot()
	tmp := path + ".tmp"
	if err := writeSync(tmp, snap, noSync); err != nil {
		return nil, fmt.Errorf("compacting lease journal: %w (check the data folder %s)", err, dir)
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("compacting lease journal: %w", err)
	}
	syncDir(dir)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening lease journal: %w", err)
	}
	j := &journal{f: f, noSync: noSync, path: path, records: lines}
	j.cond = sync.NewCond(&j.mu)
	return j, nil
}

// snapshot returns the journal records that recreate every binding that was
// ever ACKed (history included), and their line count. Caller holds s.mu or
// owns s.
func (s *leaseStore) snapshot() ([]byte, int) {
	var out bytes.Buffer
	lines := 0
	for _, b := range s.byMAC {
		if b.expiry.IsZero() {
			continue // an offer that was never ACKed
		}
		out.Write(formatRecord(recBind, b))
		lines++
		if !b.bound {
			out.Write(formatRecord(recFree, b)) // kept as history
			lines++
		}
	}
	return out.Bytes(), lines
}

func writeSync(path string, data []byte, noSync bool) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if !noSync {
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// replay applies journal lines to s and returns how many were unreadable.
func replay(data []byte, s *leaseStore) (bad int) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 256), 4096)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 3 {
			bad++
			continue
		}
		mac, err1 := net.ParseMAC(f[1])
		addr, err2 := netip.ParseAddr(f[2])
		if err1 != nil || err2 != nil || !addr.Is4() {
			bad++
			continue
		}
		key := mac.String()
		switch {
		case f[0] == recBind && len(f) == 4:
			sec, err := strconv.ParseInt(f[3], 10, 64)
			if err != nil {
				bad++
				continue
			}
			b := s.assign(mac, key, addr)
			b.bound, b.expiry = true, time.Unix(sec, 0)
		case f[0] == recFree && len(f) == 3:
			if b := s.byMAC[key]; b != nil && b.addr == addr {
				b.bound = false
			}
		default:
			bad++
		}
	}
	if sc.Err() != nil {
		bad++
	}
	return bad
}
