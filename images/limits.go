package images

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
	"time"
)

// DefaultCacheMaxBytes bounds the unpacked images in the cache together
// (256 GiB): a lab with a few dozen large images never reaches it, a root
// full of archives cannot fill the data filesystem through it.
const DefaultCacheMaxBytes int64 = 256 << 30

// DefaultMinFreeBytes is the free space (1 GiB) an unpack leaves on the data
// filesystem, for the record store, journals and leases.
const DefaultMinFreeBytes int64 = 1 << 30

// ErrCacheFull is returned when an image does not fit under the cache cap
// (WithCacheLimits) even after evicting every entry no client has open.
var ErrCacheFull = errors.New("image cache full")

// ErrLowSpace is returned when an unpack would leave the data filesystem
// with less than the minimum free space, after evicting what it could.
var ErrLowSpace = errors.New("data filesystem low on space")

// reserveChunk is how much room an unpack claims at a time: the cap and the
// free space are checked before it starts and every chunk after.
const reserveChunk = 16 << 20

// cacheEntry is one unpacked image in the cache.
type cacheEntry struct {
	size int64
	used time.Time // last Open, or the file's mtime when found at start
}

// scanEntries fills the entry table from the cache folder (at first use,
// after removeTemps). Caller holds mu.
func (s *Store) scanEntries(r *os.Root) {
	ents, err := fs.ReadDir(r.FS(), ".")
	if err != nil {
		return
	}
	for _, e := range ents {
		key, ok := strings.CutSuffix(e.Name(), ".img")
		if !ok || !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		s.entries[key] = &cacheEntry{size: fi.Size(), used: fi.ModTime()}
		s.cacheBytes += fi.Size()
	}
}

// touch marks key used now, adding it when another writer put it there.
func (s *Store) touch(key string, size int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[key]
	if !ok {
		e = &cacheEntry{size: size}
		s.entries[key] = e
		s.cacheBytes += size
	}
	e.used = time.Now()
}

// replaced accounts for KEY.img now holding size bytes (a finished unpack
// whose reservation was reserved bytes). Caller does not hold mu.
func (s *Store) replaced(key string, size, reserved int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cacheBytes -= reserved
	if old, ok := s.entries[key]; ok {
		s.cacheBytes -= old.size
	}
	s.entries[key] = &cacheEntry{size: size, used: time.Now()}
	s.cacheBytes += size
}

// release gives back a reservation that was not used.
func (s *Store) release(n int64) {
	s.mu.Lock()
	s.cacheBytes -= n
	s.mu.Unlock()
}

// reserve claims n more bytes of cache for an unpack of srcName under the
// cap and, when ahead > 0, checks that ahead more bytes would still leave
// the minimum free on the data filesystem. It evicts the least recently
// used entries no client has open (never skip, the entry being unpacked) to
// make room, and fails with ErrCacheFull or ErrLowSpace when it cannot.
func (s *Store) reserve(cr *os.Root, skip, srcName string, n, ahead int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if over := s.cacheBytes + n - s.cacheMax; over > 0 {
		if freed := s.evict(cr, skip, over); freed < over {
			return fmt.Errorf("%s: %w: it needs room beyond images.cache_max_bytes (%d bytes; %d cached or being unpacked, every entry left is in use); raise the cap or unpack the image into the root",
				srcName, ErrCacheFull, s.cacheMax, s.cacheBytes)
		}
	}
	if ahead > 0 {
		if free, err := s.freeSpace(s.data); err == nil {
			if short := s.minFree + ahead - free; short > 0 {
				if freed := s.evict(cr, skip, short); freed < short {
					return fmt.Errorf("%s: %w: %s has %d bytes free, and unpacking would leave less than images.min_free_bytes (%d); free space there or lower the minimum",
						srcName, ErrLowSpace, s.data, free+freed, s.minFree)
				}
			}
		}
	}
	s.cacheBytes += n
	return nil
}

// evict removes least recently used entries that no client has open
// (their files carry a shared flock while open; see openUnpacked) until
// need bytes are freed, and returns how many were. Caller holds mu.
func (s *Store) evict(cr *os.Root, skip string, need int64) int64 {
	keys := make([]string, 0, len(s.entries))
	for k := range s.entries {
		if k != skip {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return s.entries[keys[i]].used.Before(s.entries[keys[j]].used) })
	var freed int64
	for _, k := range keys {
		if freed >= need {
			break
		}
		f, err := cr.Open(k + ".img")
		if errors.Is(err, fs.ErrNotExist) { // removed behind our back
			freed += s.entries[k].size
			s.cacheBytes -= s.entries[k].size
			delete(s.entries, k)
			continue
		}
		if err != nil {
			continue
		}
		if !tryLockExclusive(f) {
			f.Close() // a client is reading it
			continue
		}
		err = cr.Remove(k + ".img")
		f.Close()
		if err != nil {
			continue
		}
		cr.Remove(k + ".json")
		e := s.entries[k]
		freed += e.size
		s.cacheBytes -= e.size
		delete(s.entries, k)
		delete(s.metas, k)
		s.logger.Info("evicted an unpacked image from the cache to make room", "key", k, "bytes", e.size,
			"last_used", e.used.Format(time.RFC3339), "cache", s.data)
	}
	return freed
}

// reservingWriter claims cache room for an unpack's output as it is
// written: every byte against the cap, and the free space a chunk ahead.
type reservingWriter struct {
	s         *Store
	cr        *os.Root
	key, src  string
	reserved  int64 // claimed against the cap (all written bytes)
	checkedTo int64 // free space known to suffice up to here
}

// start checks the free space for the first chunk, before anything is
// written.
func (w *reservingWriter) start() error {
	if err := w.s.reserve(w.cr, w.key, w.src, 0, reserveChunk); err != nil {
		return err
	}
	w.checkedTo = reserveChunk
	return nil
}

func (w *reservingWriter) claim(n int) error {
	var ahead int64
	if w.reserved+int64(n) > w.checkedTo {
		ahead = reserveChunk
	}
	if err := w.s.reserve(w.cr, w.key, w.src, int64(n), ahead); err != nil {
		return err
	}
	w.reserved += int64(n)
	if ahead > 0 {
		w.checkedTo = w.reserved + reserveChunk
	}
	return nil
}
