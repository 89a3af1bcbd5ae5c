package dhcp

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pxeperf/pxeperf/internal/datalock"
	"github.com/pxeperf/pxeperf/internal/hwaddr"
)

// JournalName is the lease journal's file name inside the data folder.
const JournalName = "dhcp-leases.journal"

// Journal record kinds, one line each:
//
//	bind MAC ADDR EXPIRY-UNIX
//	free MAC ADDR
//	hold ADDR UNTIL-UNIX   (declined, or named by a damaged record)
//
// MAC is the client's hardware address as net.HardwareAddr.String writes
// it, 1 to 16 bytes.
const (
	recBind = "bind"
	recFree = "free"
	recHold = "hold"
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
//
// A failed write (disk full, I/O error) fails the ACKs of that batch only:
// the file is cut back to where the batch began, the batch stays pending in
// front of later records, and the next ACK tries again, so serving recovers
// by itself once the disk does. Records pending while the disk fails are
// bounded: past maxFailedPending bytes they are dropped and the next write
// is a compaction (the snapshot holds every binding, so nothing is lost).
type journal struct {
	mu      sync.Mutex
	cond    *sync.Cond
	f       *os.File
	pending []byte
	spare   []byte
	queued  uint64 // generation of the last enqueued record
	synced  uint64 // generation known durable
	syncing bool
	// failGen is the last generation of a batch whose write failed, with
	// failErr: its waiters return the error (no ACK), later ones try again.
	failGen uint64
	failErr error
	// mustCompact: pending records were dropped while writes failed; only
	// a successful compaction makes anything durable again.
	mustCompact bool
	// dirty: a failed write may have left a partial line the file could
	// not be cut back from; the next write starts with a newline.
	dirty   bool
	noSync  bool // fuzzing only
	path    string
	lock    *os.File // holds the flock on path+".lock"
	records int      // lines in the file plus pending, since the last compaction
	// flushes counts the batches written and fsynced (Stats.JournalFlushes).
	flushes atomic.Uint64
}

// testHookSync, when set, runs before each batch's write: tests hold a
// flush there.
var testHookSync atomic.Pointer[func()]

// maxFailedPending bounds the records held in memory while writes fail.
const maxFailedPending = 1 << 20

func (j *journal) enqueue(line []byte) uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.mustCompact {
		j.pending = append(j.pending, line...)
	}
	j.queued++
	j.records++
	return j.queued
}

// compact replaces the file by snapshot, the records of every binding. The
// caller holds the store lock, so snapshot already reflects every record
// enqueued so far: once it is durable, so are they. A failure leaves the
// old file and the pending records as they were.
func (j *journal) compact(snapshot []byte, lines int) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	for j.syncing {
		j.cond.Wait()
	}
	tmp := j.path + ".tmp"
	err := writeSync(tmp, os.O_TRUNC, snapshot, j.noSync)
	if err == nil {
		err = os.Rename(tmp, j.path)
	}
	var f *os.File
	if err == nil {
		syncDir(filepath.Dir(j.path))
		f, err = os.OpenFile(j.path, os.O_WRONLY|os.O_APPEND, 0o644)
	}
	if err != nil {
		_ = os.Remove(tmp)
		if j.mustCompact {
			j.failGen, j.failErr = j.queued, err
		}
		j.cond.Broadcast()
		return err
	}
	_ = j.f.Close()
	j.f = f
	j.pending = j.pending[:0]
	j.synced = j.queued
	j.records = lines
	j.mustCompact, j.dirty = false, false
	j.cond.Broadcast()
	return nil
}

// wait blocks until generation gen is on disk, or the write that carried
// it failed.
func (j *journal) wait(gen uint64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	for j.synced < gen {
		if j.syncing {
			j.cond.Wait()
			continue
		}
		if j.failGen >= gen || j.mustCompact {
			return j.failErr
		}
		j.syncing = true
		buf, upto, f, dirty := j.pending, j.queued, j.f, j.dirty
		j.pending = j.spare[:0]
		j.spare = nil
		j.mu.Unlock()
		if h := testHookSync.Load(); h != nil {
			(*h)()
		}
		dirty, err := appendSync(f, buf, dirty, j.noSync)
		j.mu.Lock()
		j.syncing = false
		j.dirty = dirty
		if err != nil {
			// Keep the batch, in front of what came meanwhile.
			j.pending = append(buf, j.pending...)
			j.failGen, j.failErr = upto, err
			if len(j.pending) > maxFailedPending {
				j.pending, j.mustCompact = nil, true
			}
		} else {
			j.spare = buf[:0]
			j.synced = upto
			j.flushes.Add(1)
		}
		j.cond.Broadcast()
	}
	return nil
}

// appendSync writes buf at the end of f and fsyncs it. On failure it cuts
// the file back to its old length, so no partial line stays; it reports
// whether one may have stayed anyway (then the next write starts with a
// newline, which ends that line).
func appendSync(f *os.File, buf []byte, dirty, noSync bool) (bool, error) {
	end, serr := f.Seek(0, io.SeekEnd)
	if dirty {
		buf = append([]byte{'\n'}, buf...)
	}
	_, err := f.Write(buf)
	if err == nil && !noSync {
		err = f.Sync()
	}
	if err == nil {
		return false, nil
	}
	if serr != nil || f.Truncate(end) != nil {
		return true, err
	}
	return false, err
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
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
//
// A line that does not parse (a torn last line after kill -9, a line the
// disk damaged) does not end the replay: it is appended to
// JournalName+".damaged", which the log names, and replay goes on past it.
// What a damaged line still says is kept on the safe side: a MAC and an
// address become a binding until a lease time from now, an address alone
// is held out of the pool as long (see salvage). Only once the damaged
// lines are safely aside is the journal compacted; otherwise it is kept as
// it is and appended to.
func openJournal(dir string, s *leaseStore, noSync bool, log *slog.Logger) (*journal, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating data folder %s: %w (set --data to a writable folder)", dir, err)
	}
	path := filepath.Join(dir, JournalName)
	lock, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening lease lock: %w (set --data to a writable folder)", err)
	}
	// Two servers never share one lease journal (datalock.TryLock: the
	// system drops the lock when the process dies).
	if err := datalock.TryLock(lock); err != nil {
		lock.Close()
		return nil, fmt.Errorf("lease journal %s is in use by another pxeperf (%w); stop it or give this one its own --data", path, err)
	}
	j, err := loadJournal(dir, path, s, noSync, log, time.Now())
	if err != nil {
		lock.Close()
		return nil, err
	}
	j.lock = lock
	return j, nil
}

// DamagedSuffix is appended to a journal's name for the file its damaged
// lines are kept in.
const DamagedSuffix = ".damaged"

func loadJournal(dir, path string, s *leaseStore, noSync bool, log *slog.Logger, now time.Time) (*journal, error) {
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("reading lease journal: %w", err)
	}
	damaged := replay(data, s, now)
	compact := true
	if len(damaged) > 0 {
		aside := path + DamagedSuffix
		if err := keepAside(aside, JournalName, damaged, noSync, now); err != nil {
			// Keep the journal as it is: replay copes with its damage.
			compact = false
			log.Error("dhcp: lease journal has damaged lines and they could not be kept aside; the journal is kept uncompacted",
				"file", path, "lines", len(damaged), "damaged_file", aside, "err", err)
		} else {
			log.Warn("dhcp: lease journal had damaged lines; replay went on past them, and they are kept aside (a torn last line after a crash is normal)",
				"file", path, "lines", len(damaged), "damaged_file", aside)
		}
	}
	j := &journal{noSync: noSync, path: path}
	j.cond = sync.NewCond(&j.mu)
	if compact {
		snap, lines := s.snapshot(now)
		tmp := path + ".tmp"
		err := writeSync(tmp, os.O_TRUNC, snap, noSync)
		if err == nil {
			err = os.Rename(tmp, path)
		}
		if err != nil {
			// Serve from the journal as it is; the next compaction retries.
			os.Remove(tmp)
			log.Error("dhcp: compacting the lease journal failed; appending to it as it is (check free space in the data folder)",
				"file", path, "err", err)
			compact = false
		} else {
			syncDir(dir)
			j.records = lines
		}
	}
	if !compact {
		j.records = bytes.Count(data, []byte{'\n'}) + 1
		j.dirty = len(data) > 0 && data[len(data)-1] != '\n'
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening lease journal: %w", err)
	}
	j.f = f
	return j, nil
}

// keepAside appends damaged lines to path under a line naming their
// source and the time, and fsyncs them.
func keepAside(path, from string, lines [][]byte, noSync bool, now time.Time) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s: %d damaged line(s) from %s\n", now.UTC().Format(time.RFC3339), len(lines), from)
	for _, l := range lines {
		b.Write(l)
		b.WriteByte('\n')
	}
	return writeSync(path, os.O_APPEND, b.Bytes(), noSync)
}

// snapshot returns the journal records that recreate every binding that was
// ever ACKed (history included) and every address held out of the pool,
// and their line count. Caller holds s.mu or owns s.
func (s *leaseStore) snapshot(now time.Time) ([]byte, int) {
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
	for a, until := range s.declined {
		if until.After(now) {
			fmt.Fprintf(&out, "%s %s %d\n", recHold, a, until.Unix())
			lines++
		}
	}
	return out.Bytes(), lines
}

// writeSync writes data to path (created if need be; mode O_APPEND or
// O_TRUNC) and fsyncs it unless noSync.
func writeSync(path string, mode int, data []byte, noSync bool) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|mode, 0o644)
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

// replay applies journal lines to s in order and returns the lines it
// could not read (a last line without its newline among them). It has no
// line length limit: the file is in memory already.
func replay(data []byte, s *leaseStore, now time.Time) (damaged [][]byte) {
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil // torn: no newline
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if !s.apply(string(line)) {
			damaged = append(damaged, line)
			s.salvage(string(line), now)
		}
	}
	return damaged
}

// apply replays one record; false when it does not parse.
func (s *leaseStore) apply(line string) bool {
	f := strings.Fields(line)
	switch {
	case len(f) == 3 && f[0] == recHold:
		addr, err1 := netip.ParseAddr(f[1])
		sec, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil || !addr.Is4() {
			return false
		}
		if until := time.Unix(sec, 0); until.After(s.declined[addr]) {
			s.declined[addr] = until
		}
		return true
	case len(f) < 3:
		return false
	}
	mac, ok := hwaddr.Parse(f[1], ':') // net.ParseMAC takes 6, 8 or 20 bytes only
	addr, err := netip.ParseAddr(f[2])
	if !ok || err != nil || !addr.Is4() {
		return false
	}
	key := mac.String()
	switch {
	case f[0] == recBind && len(f) == 4:
		sec, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			return false
		}
		b := s.assign(mac, key, addr)
		b.bound, b.expiry = true, time.Unix(sec, 0)
	case f[0] == recFree && len(f) == 3:
		if b := s.byMAC[key]; b != nil && b.addr == addr {
			b.bound = false
		}
	default:
		return false
	}
	return true
}

// salvage keeps what a damaged line still says, on the safe side: it may be
// the only record of a lease, so its address must not go to anyone else
// for as long as that lease could last. A MAC and an address in it become
// a binding until a lease time from now, unless the address is actively
// bound to another MAC by an intact record; an address alone is held out
// of the pool as long. (A damaged "free" line frees nothing.)
func (s *leaseStore) salvage(line string, now time.Time) {
	var mac net.HardwareAddr
	var addr netip.Addr
	for _, w := range strings.Fields(line) {
		if !addr.IsValid() {
			if a, err := netip.ParseAddr(w); err == nil && a.Is4() && (s.pool.Contains(a) || s.reserved[a] != "") {
				addr = a
				continue
			}
		}
		if mac == nil {
			if m, ok := hwaddr.Parse(w, ':'); ok && len(m) >= 6 {
				mac = m
			}
		}
	}
	if !addr.IsValid() {
		return
	}
	until := now.Add(s.leaseTime)
	if other := s.byAddr[addr]; mac != nil && (other == nil || other.key == mac.String() || !other.active(now)) {
		b := s.assign(mac, mac.String(), addr)
		if !b.bound || b.expiry.Before(until) {
			b.bound, b.expiry = true, until
		}
		return
	}
	if until.After(s.declined[addr]) {
		s.declined[addr] = until
	}
}
