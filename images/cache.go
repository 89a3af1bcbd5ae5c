package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// ErrCorrupt is returned when a compressed image does not decompress; the
// broken output is never cached.
var ErrCorrupt = errors.New("compressed image is corrupt")

// ErrTooLarge is returned when a compressed image unpacks past the limit
// (WithMaxUnpacked, default 64 GiB).
var ErrTooLarge = errors.New("compressed image unpacks past the size limit")

// codec is one compression format served transparently.
type codec struct {
	ext  string
	open func(io.Reader) (io.ReadCloser, error)
}

// codecs in lookup order: NAME.zst wins over NAME.gz.
var codecs = []codec{
	{".zst", func(r io.Reader) (io.ReadCloser, error) {
		d, err := zstd.NewReader(r)
		if err != nil {
			return nil, err
		}
		return d.IOReadCloser(), nil
	}},
	{".gz", func(r io.Reader) (io.ReadCloser, error) {
		return gzip.NewReader(r)
	}},
}

// cacheMeta is stored beside each unpacked image as KEY.json: the source's
// identity when it was unpacked and the output's size. Only the (smaller)
// source is hashed: hashing the output too cost a third of the unpack time,
// and the zstd/gzip checksums already vouch for it.
type cacheMeta struct {
	Name          string    `json:"name"`   // served name, root-relative
	Source        string    `json:"source"` // compressed file, root-relative
	SourceSize    int64     `json:"source_size"`
	SourceMtimeNS int64     `json:"source_mtime_ns"`
	SourceSHA256  string    `json:"source_sha256"`
	Size          int64     `json:"size"`
	Unpacked      time.Time `json:"unpacked"`
}

// sameSource reports whether the source looks unchanged (size and mtime).
func (m cacheMeta) sameSource(src string, st fs.FileInfo) bool {
	return m.Source == src && m.SourceSize == st.Size() && m.SourceMtimeNS == st.ModTime().UnixNano()
}

// cacheKey names a served name's cache files: a hash of the root's absolute
// path and the name, so every cache path is a flat file name inside the
// cache folder whatever the request, and two roots sharing a data folder
// never share an entry.
func (s *Store) cacheKey(name string) string {
	h := sha256.Sum256([]byte(s.absDir + "\x00" + name))
	return hex.EncodeToString(h[:20])
}

// openUnpacked serves n from its compressed source src (already opened
// inside the root), unpacking it into the cache when the cache is missing
// or stale. Concurrent requests for one name unpack once.
func (s *Store) openUnpacked(n, srcName string, c codec, src *os.File) (*os.File, int64, error) {
	if s.data == "" {
		return nil, 0, fmt.Errorf("%s exists only as %s and no cache folder is set (pass --data): %w", n, srcName, fs.ErrNotExist)
	}
	st, err := src.Stat()
	if err != nil {
		return nil, 0, err
	}
	if !st.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("%s is not a regular file: %w", srcName, fs.ErrNotExist)
	}
	key := s.cacheKey(n)
	// An eviction may remove the image between the unpack and the open
	// (it cannot once the shared lock is held): then ask again, a few
	// times at most.
	for range 3 {
		v, err, _ := s.flights.Do(key, func() (any, error) {
			return s.ensureCached(key, n, srcName, c, src, st)
		})
		if err != nil {
			return nil, 0, err
		}
		cr := v.(*os.Root)
		f, err := cr.Open(key + ".img")
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, 0, fmt.Errorf("opening cached %s: %w", n, err)
		}
		// The shared lock marks the entry in use until the client closes
		// the file; eviction skips it.
		lockShared(f)
		fst, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, 0, err
		}
		if unlinked(fst) {
			f.Close()
			continue
		}
		s.touch(key, fst.Size())
		return f, fst.Size(), nil
	}
	return nil, 0, fmt.Errorf("%s: the unpacked image kept being evicted from the cache: %w", n, ErrCacheFull)
}

// cacheRoot opens (creating) the cache folder once.
func (s *Store) cacheRoot() (*os.Root, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cache != nil {
		return s.cache, nil
	}
	if err := os.MkdirAll(s.data, 0o755); err != nil {
		return nil, fmt.Errorf("creating cache folder %s: %w (set --data to a writable folder)", s.data, err)
	}
	r, err := os.OpenRoot(s.data)
	if err != nil {
		return nil, fmt.Errorf("opening cache folder %s: %w", s.data, err)
	}
	s.cache = r
	s.removeTemps(r)
	s.scanEntries(r)
	return r, nil
}

// removeTemps deletes temp files an interrupted unpack left behind. One
// server owns a cache folder, so any temp file there at start is garbage.
func (s *Store) removeTemps(r *os.Root) {
	ents, err := fs.ReadDir(r.FS(), ".")
	if err != nil {
		return
	}
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp") && e.Type().IsRegular() {
			if err := r.Remove(e.Name()); err == nil {
				s.logger.Debug("removed a leftover temp file from the cache", "file", e.Name(), "cache", s.data)
			}
		}
	}
}

// loadMeta returns the remembered metadata for key, reading KEY.json once.
func (s *Store) loadMeta(cr *os.Root, key string) (cacheMeta, bool) {
	s.mu.Lock()
	m, ok := s.metas[key]
	s.mu.Unlock()
	if ok {
		return m, true
	}
	b, err := cr.ReadFile(key + ".json")
	if err != nil || json.Unmarshal(b, &m) != nil {
		return cacheMeta{}, false
	}
	return m, true
}

// saveMeta writes KEY.json (temp file, then rename) and remembers it.
func (s *Store) saveMeta(cr *os.Root, key string, m cacheMeta) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp := key + ".json.tmp"
	if err := cr.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing cache metadata: %w", err)
	}
	if err := cr.Rename(tmp, key+".json"); err != nil {
		cr.Remove(tmp)
		return fmt.Errorf("writing cache metadata: %w", err)
	}
	s.mu.Lock()
	s.metas[key] = m
	s.mu.Unlock()
	return nil
}

// ensureCached makes KEY.img the unpacked src and returns the cache root.
func (s *Store) ensureCached(key, n, srcName string, c codec, src *os.File, st fs.FileInfo) (*os.Root, error) {
	cr, err := s.cacheRoot()
	if err != nil {
		return nil, err
	}
	m, ok := s.loadMeta(cr, key)
	imgOK := false
	if ok {
		if ist, err := cr.Stat(key + ".img"); err == nil && ist.Mode().IsRegular() && ist.Size() == m.Size {
			imgOK = true
		}
	}
	if imgOK && m.sameSource(srcName, st) {
		return cr, nil
	}
	if imgOK && m.Source == srcName && m.SourceSize == st.Size() {
		// Same size, new mtime (touched, copied with a new date): compare
		// contents before paying for a full unpack.
		sum, err := hashReader(src)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", srcName, err)
		}
		if sum == m.SourceSHA256 {
			m.SourceMtimeNS = st.ModTime().UnixNano()
			if err := s.saveMeta(cr, key, m); err != nil {
				return nil, err
			}
			return cr, nil
		}
	}
	if err := s.knownFailure(key, srcName, src, st); err != nil {
		return nil, err
	}
	room, full, err := s.knownNoRoom(key, srcName, st)
	if err != nil {
		return nil, err
	}
	if err := s.declaredFits(c, src, srcName, room, full); err != nil {
		if errors.Is(err, ErrTooLarge) {
			s.rememberFailure(key, srcName, src, st, err)
		}
		return nil, err
	}
	m, err = s.unpack(cr, key, n, srcName, c, src, st)
	if err != nil {
		switch {
		case errors.Is(err, ErrCorrupt) || errors.Is(err, ErrTooLarge):
			s.rememberFailure(key, srcName, src, st, err)
		case errors.Is(err, ErrCacheFull) || errors.Is(err, ErrLowSpace):
			s.rememberNoRoom(key, srcName, st, room, err)
		}
		return nil, err
	}
	return cr, s.saveMeta(cr, key, m)
}

// failure is a compressed source that did not unpack (ErrCorrupt,
// ErrTooLarge): it is not tried again until it changes, so a broken image
// costs one unpack, not one per request. Kept in memory only: a restart
// tries once more.
type failure struct {
	source  string
	size    int64
	mtimeNS int64
	sha256  string
	checked time.Time // when the source was last compared
	err     error
}

// racyWindow: a source modified this close to when it was looked at may
// change again without its mtime moving (coarse file system clocks), so
// its contents are compared, as git does for "racily clean" files.
const racyWindow = 2 * time.Second

// knownFailure returns the remembered error when src is the source that
// failed before: same name and size, and the same mtime (unless racily
// recent) or else the same contents.
func (s *Store) knownFailure(key, srcName string, src *os.File, st fs.FileInfo) error {
	s.mu.Lock()
	f, ok := s.failures[key]
	s.mu.Unlock()
	if !ok {
		return nil
	}
	forget := func() {
		s.mu.Lock()
		delete(s.failures, key)
		s.mu.Unlock()
	}
	if f.source != srcName || f.size != st.Size() {
		forget()
		return nil
	}
	mtime := st.ModTime().UnixNano()
	if mtime == f.mtimeNS && f.checked.Sub(st.ModTime()) > racyWindow {
		return f.err
	}
	sum, err := hashReader(src)
	if err != nil || sum != f.sha256 {
		forget()
		return nil
	}
	s.mu.Lock()
	f.mtimeNS, f.checked = mtime, time.Now()
	s.failures[key] = f
	s.mu.Unlock()
	return f.err
}

// rememberFailure records that src did not unpack, and logs it once.
func (s *Store) rememberFailure(key, srcName string, src *os.File, st fs.FileInfo, err error) {
	sum, herr := hashReader(src)
	if herr != nil {
		return // cannot tell it again: try again next time
	}
	s.mu.Lock()
	s.failures[key] = failure{
		source: srcName, size: st.Size(), mtimeNS: st.ModTime().UnixNano(), sha256: sum,
		checked: time.Now(), err: fmt.Errorf("%w (not unpacked again until %s changes)", err, srcName),
	}
	s.mu.Unlock()
	s.logger.Warn("compressed image does not unpack; refusing it until the file changes",
		"source", srcName, "source_bytes", st.Size(), "err", err)
}

// noRoom is a compressed source that did not fit (ErrCacheFull,
// ErrLowSpace) with room bytes for it (Store.room) and nothing else in the
// cache to evict: it cannot fit until there is more room, so it is refused
// at once, without another unpack, until the room has grown by a chunk
// (reserveChunk) or the source changes: else an image too big for the
// cache is unpacked up to the free space on every request before its 503
// (see images/DESIGN.md#an-image-that-cannot-fit). Kept in memory only.
type noRoom struct {
	source  string
	size    int64
	mtimeNS int64
	room    int64
	err     error
}

// room is what an unpack of key could take now: under the cache cap and
// on the data filesystem above images.min_free_bytes, with every other
// entry evicted (an entry in use cannot be, so this is at most what the
// unpack gets). full is the error of the bound that binds: ErrCacheFull
// or ErrLowSpace.
func (s *Store) room(key string) (room int64, full error) {
	s.mu.Lock()
	var others int64
	for k, e := range s.entries {
		if k != key {
			others += e.size
		}
	}
	held := s.cacheBytes - others // reservations, and key's own stale entry
	s.mu.Unlock()
	room, full = s.cacheMax-held, ErrCacheFull
	if free, err := s.freeSpace(s.data); err == nil && free+others-s.minFree < room {
		room, full = free+others-s.minFree, ErrLowSpace
	}
	return room, full
}

// declaredFits refuses a zstd source whose first frame declares
// (Frame_Content_Size, which zstd writes when it knows the input's size)
// more unpacked bytes than images.max_unpacked_bytes (ErrTooLarge) or
// than the room there is (full), before anything is unpacked. The first
// frame's size is a lower bound of the image's; a source that declares
// none is unpacked and found out as it writes.
func (s *Store) declaredFits(c codec, src io.ReaderAt, srcName string, room int64, full error) error {
	if c.ext != ".zst" {
		return nil
	}
	var b [zstd.HeaderMaxSize]byte
	n, _ := src.ReadAt(b[:], 0)
	var h zstd.Header
	if h.Decode(b[:n]) != nil || !h.HasFCS || h.FrameContentSize > math.MaxInt64 {
		return nil
	}
	switch size := int64(h.FrameContentSize); {
	case size > min(s.maxUnpacked, s.cacheMax):
		return fmt.Errorf("%s: %w (it declares %d bytes unpacked, past %d; raise the limit or unpack it into the root yourself)",
			srcName, ErrTooLarge, size, min(s.maxUnpacked, s.cacheMax))
	case size > room:
		return fmt.Errorf("%s: %w: it declares %d bytes unpacked and there is room for %d (images.cache_max_bytes, images.min_free_bytes); free space or raise the cap",
			srcName, full, size, room)
	}
	return nil
}

// knownNoRoom returns the remembered refusal when the unchanged source
// did not fit before and the room has not grown by reserveChunk since;
// and the room there is now (Store.room), for rememberNoRoom.
func (s *Store) knownNoRoom(key, srcName string, st fs.FileInfo) (room int64, full, err error) {
	room, full = s.room(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.noRooms[key]
	if !ok {
		return room, full, nil
	}
	if f.source == srcName && f.size == st.Size() && f.mtimeNS == st.ModTime().UnixNano() && room < f.room+reserveChunk {
		return room, full, f.err
	}
	delete(s.noRooms, key)
	return room, full, nil
}

// rememberNoRoom records that src did not fit with room bytes for it,
// when nothing else held the cache (no entry in use, no other unpack under
// way): otherwise the room may come back without the cache changing.
func (s *Store) rememberNoRoom(key, srcName string, st fs.FileInfo, room int64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	held := s.cacheBytes
	if e := s.entries[key]; e != nil {
		held -= e.size
	}
	if held != 0 {
		return
	}
	s.noRooms[key] = noRoom{source: srcName, size: st.Size(), mtimeNS: st.ModTime().UnixNano(), room: room,
		err: fmt.Errorf("%w (it did not fit in %d bytes; not unpacked again until there is more room or %s changes)", err, room, srcName)}
}

// unpack decompresses src into KEY.img through a temp file and a rename, so
// a reader never sees a partial image.
func (s *Store) unpack(cr *os.Root, key, n, srcName string, c codec, src *os.File, st fs.FileInfo) (cacheMeta, error) {
	start := time.Now()
	s.attempts.Add(1)
	if _, err := src.Seek(0, io.SeekStart); err != nil {
		return cacheMeta{}, err
	}
	// Room for the first chunk before anything is written; the writer
	// claims the rest as it goes.
	rw := &reservingWriter{s: s, cr: cr, key: key, src: srcName}
	if err := rw.start(); err != nil {
		return cacheMeta{}, err
	}
	tmpName := fmt.Sprintf("%s.img.tmp%d", key, start.UnixNano())
	tmp, err := cr.OpenFile(tmpName, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		s.release(rw.reserved)
		return cacheMeta{}, fmt.Errorf("unpacking %s: %w (is the cache folder %s writable?)", srcName, err, s.data)
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			cr.Remove(tmpName)
			s.release(rw.reserved)
		}
	}()
	srcHash := sha256.New()
	in := io.TeeReader(src, srcHash)
	dec, err := c.open(in)
	if err != nil {
		return cacheMeta{}, fmt.Errorf("%s: %w: %v", srcName, ErrCorrupt, err)
	}
	out := &limitWriter{w: tmp, left: min(s.maxUnpacked, s.cacheMax), claim: rw.claim}
	size, err := io.Copy(out, dec)
	dec.Close()
	if out.err != nil {
		if errors.Is(out.err, ErrTooLarge) {
			return cacheMeta{}, fmt.Errorf("%s: %w (%d bytes; raise the limit or unpack it into the root yourself)", srcName, ErrTooLarge, min(s.maxUnpacked, s.cacheMax))
		}
		if errors.Is(out.err, ErrCacheFull) || errors.Is(out.err, ErrLowSpace) {
			return cacheMeta{}, out.err
		}
		return cacheMeta{}, fmt.Errorf("unpacking %s into %s: %w", srcName, s.data, out.err)
	}
	if err != nil {
		return cacheMeta{}, fmt.Errorf("%s: %w: %v (replace the file or remove it)", srcName, ErrCorrupt, err)
	}
	// Hash whatever the decoder left unread so the source digest covers
	// the whole file.
	if _, err := io.Copy(srcHash, src); err != nil {
		return cacheMeta{}, fmt.Errorf("reading %s: %w", srcName, err)
	}
	if err := tmp.Close(); err != nil {
		return cacheMeta{}, fmt.Errorf("unpacking %s into %s: %w", srcName, s.data, err)
	}
	if err := cr.Rename(tmpName, key+".img"); err != nil {
		return cacheMeta{}, fmt.Errorf("unpacking %s into %s: %w", srcName, s.data, err)
	}
	ok = true
	s.replaced(key, size, rw.reserved)
	s.unpacks.Add(1)
	took := time.Since(start)
	s.logger.Info("unpacked compressed image into the cache", "file", n, "source", srcName,
		"bytes", size, "source_bytes", st.Size(), "took", took.Round(time.Millisecond),
		"mbps", float64(size)*8/1e6/max(took.Seconds(), 1e-9))
	return cacheMeta{
		Name:          n,
		Source:        srcName,
		SourceSize:    st.Size(),
		SourceMtimeNS: st.ModTime().UnixNano(),
		SourceSHA256:  hex.EncodeToString(srcHash.Sum(nil)),
		Size:          size,
		Unpacked:      time.Now().UTC(),
	}, nil
}

// limitWriter fails with ErrTooLarge past left bytes, asks claim for room
// before each write (the cache cap and free space), and remembers the first
// write error, so unpack can tell a full disk from a corrupt archive.
type limitWriter struct {
	w     io.Writer
	left  int64
	claim func(n int) error // nil: no claim
	err   error
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	if int64(len(p)) > l.left {
		l.err = ErrTooLarge
		return 0, l.err
	}
	if l.claim != nil {
		if err := l.claim(len(p)); err != nil {
			l.err = err
			return 0, err
		}
	}
	n, err := l.w.Write(p)
	l.left -= int64(n)
	if err != nil {
		l.err = err
	}
	return n, err
}

// hashReader returns the hex sha256 of r from its start.
func hashReader(r io.ReadSeeker) (string, error) {
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Prepare unpacks every compressed-only image into the cache now, so the
// first client of each does not wait for it (a TFTP client may give up
// while a large image unpacks). It logs and skips images that fail, stops
// when ctx ends, and returns how many images are ready in the cache.
func (s *Store) Prepare(ctx context.Context) int {
	if s.data == "" {
		return 0
	}
	var names []string
	_ = s.walk(func(n string, err error) {
		if err != nil {
			return
		}
		if c, ok := codecFor(n); ok {
			names = append(names, strings.TrimSuffix(n, c.ext))
		}
	})
	ready := 0
	seen := map[string]bool{}
	for _, n := range names {
		if ctx.Err() != nil || seen[n] {
			continue
		}
		seen[n] = true
		if _, err := s.root.Stat(n); err == nil {
			continue // a plain file shadows the compressed one
		}
		f, _, err := s.Open(n)
		if err != nil {
			s.logger.Warn("cannot unpack compressed image", "file", n, "err", err)
			continue
		}
		f.Close()
		ready++
	}
	return ready
}
