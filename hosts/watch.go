package hosts

import (
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/pxeperf/pxeperf/event"
)

// Watch is the event sink (after Stamping, so fetches carry their MAC)
// that turns finished fetches into boot milestones and consumes once next
// boots:
//   - loader-fetched: an ok fetch of a boot binary (IsBoot);
//   - kernel-fetched: an ok fetch of the effective host's kernel;
//   - next-boot-consumed: an ok fetch, by a host whose next boot is once,
//     of what it was told to boot (action boot: the kernel, not the script;
//     a boot of a script alone: the script; local and shell: the loader
//     config or script that carried it). The next boot is then cleared
//     durably, off the fetch's goroutine.
//
// It never blocks a transfer: a lookup in the store's snapshot, and a
// MAC put in a set a goroutine of the store drains.
type Watch struct {
	Store *Store
	// IsBoot says a fetch is of a boot binary (record.Classify's kind
	// boot; serve passes it, this package cannot import record).
	IsBoot     func(*event.Fetch) bool
	Milestones event.MilestoneSink
}

// Fetch implements event.Sink.
func (w Watch) Fetch(f *event.Fetch) {
	if f.Outcome != event.OutcomeOK || f.MAC == nil || w.Store == nil {
		return
	}
	file := cleanName(f.File)
	if w.IsBoot != nil && w.IsBoot(f) {
		w.emit(event.MilestoneLoaderFetched, f, map[string]string{"file": f.File, "proto": f.Proto})
	}
	e, ok := w.Store.Get(f.MAC)
	if !ok {
		return
	}
	eff := e.Effective()
	if eff.Kernel != "" && cleanName(eff.Kernel) == file {
		w.emit(event.MilestoneKernelFetched, f, map[string]string{"file": f.File, "record": "", "proto": f.Proto,
			"mbps": strconv.FormatFloat(f.Mbps(), 'f', 2, 64)})
	}
	if nb := e.NextBoot; nb != nil && nb.Once && takes(nb, f, file) {
		w.Store.consumeLater(f.MAC.String(), nb.Set)
	}
}

// takes says whether fetch f (of file, cleaned) is what nb told its
// board to boot.
func takes(nb *NextBoot, f *event.Fetch, file string) bool {
	switch {
	case nb.Action == ActionBoot && nb.Kernel != "":
		return cleanName(nb.Kernel) == file
	default: // local, shell, or a script alone: the config that carried it
		return f.Kind == event.KindConfig
	}
}

// Lease implements event.Sink.
func (w Watch) Lease(*event.Lease) {}

func (w Watch) emit(what string, f *event.Fetch, detail map[string]string) {
	if w.Milestones == nil {
		return
	}
	w.Milestones.Milestone(event.Milestone{Time: time.Now().UTC(), MAC: f.MAC, Host: f.Host, What: what, Detail: detail})
}

// cleanName is a file name as TFTP and HTTP fetches and host entries may
// write it: without the leading slash, the query, or the scheme and host
// of a URL, cleaned.
func cleanName(name string) string {
	if i := strings.Index(name, "://"); i >= 0 {
		rest := name[i+3:]
		if j := strings.IndexByte(rest, '/'); j >= 0 {
			name = rest[j:]
		} else {
			name = ""
		}
	}
	name, _, _ = strings.Cut(name, "?")
	name = strings.TrimLeft(name, "/")
	if name == "" {
		return ""
	}
	return path.Clean(name)
}

// consumeLater queues mac's once next boot (set at set) to be cleared.
// The set is bounded by the hosts with a once next boot; one goroutine
// drains it.
func (s *Store) consumeLater(mac string, set time.Time) {
	s.pmu.Lock()
	if s.pending == nil {
		s.pending = map[string]time.Time{}
	}
	s.pending[mac] = set
	start := !s.draining
	s.draining = true
	s.pmu.Unlock()
	if start {
		go s.drain()
	}
}

func (s *Store) drain() {
	for {
		s.pmu.Lock()
		var mac string
		var set time.Time
		for mac, set = range s.pending {
			break
		}
		if mac == "" {
			s.draining = false
			s.pmu.Unlock()
			return
		}
		delete(s.pending, mac)
		s.pmu.Unlock()
		s.consume(mac, set)
	}
}

// consume clears mac's next boot if it is still the once one set at set
// (a newer one set meanwhile stays), durably, and says so.
func (s *Store) consume(mac string, set time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.recs[mac]
	e := s.entry(mac)
	if r == nil || r.Next == nil || !r.Next.Once || !r.Next.Set.Equal(set) || e == nil {
		return
	}
	ms := s.milestone(event.MilestoneNextBootConsumed, e.MAC, e.Host.Name, nextDetail(r.Next))
	if err := s.commit(s.withoutNext(mac), s.cfg, true, ms); err != nil {
		s.opt.Logger.Error("hosts: a once next boot was taken but could not be cleared; the board boots it again until it is",
			"client_mac", mac, "err", err)
		return
	}
	s.opt.Logger.Info("hosts: once next boot consumed", "client_mac", mac, "host", e.Host.Name)
}
