// Package images maps a requested file name to a file on disk for TFTP and
// HTTP: every path confined to the root (os.Root), compressed-only images
// served decompressed from a cache under the data folder, and Debian's iPXE
// binaries used where the root lacks them.
//
// Every Open returns a real *os.File with its exact size, so the protocol
// servers can announce the size up front (TFTP tsize, HTTP Content-Length)
// and let the kernel copy the bytes (sendfile).
package images

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/pxeperf/pxeperf/internal/refuse"
	"golang.org/x/sync/singleflight"
)

// ErrOutsideRoot is returned for names that would leave the root ("..",
// absolute paths, symlinks pointing out).
var ErrOutsideRoot = fmt.Errorf("path leaves the image root: %w", fs.ErrPermission)

// ErrNotRegular is returned for a FIFO, device or socket in the root: it is
// never opened for reading (a FIFO would block the open until a writer
// comes, a device may do anything on open).
var ErrNotRegular = fmt.Errorf("not a regular file (a FIFO, device or socket), pxeperf serves only regular files: %w", fs.ErrPermission)

// Refusal reasons counted by Refusals.
const (
	ReasonNotRegular = "not a regular file"
	ReasonCorrupt    = "corrupt compressed image"
	ReasonTooLarge   = "compressed image too large"
	ReasonCacheFull  = "image cache full"
	ReasonLowSpace   = "data filesystem low on space"
)

// DefaultFallbackDir is where Debian's ipxe package installs its binaries.
const DefaultFallbackDir = "/usr/lib/ipxe"

// DefaultMaxUnpacked bounds the decompressed size of one image (64 GiB), so
// a hostile or broken archive cannot fill the data folder.
const DefaultMaxUnpacked int64 = 64 << 30

// Store serves files from one root folder.
type Store struct {
	root   *os.Root
	dir    string
	absDir string // keys the cache
	data   string
	logger *slog.Logger

	fallbackDir string
	signed      map[string]string // Secure Boot loaders from the host's packages (signed.go)
	maxUnpacked int64
	cacheMax    int64
	minFree     int64

	flights  singleflight.Group
	mu       sync.Mutex
	cache    *os.Root             // opened on first unpack; guarded by mu
	metas    map[string]cacheMeta // by cache key; guarded by mu
	failures map[string]failure   // by cache key: sources that did not unpack; guarded by mu
	noRooms  map[string]noRoom    // by cache key: sources that did not fit; guarded by mu
	logged   sync.Map             // fallback names already logged
	unpacks  atomic.Int64         // decompressions done, for tests and logs
	attempts atomic.Int64         // decompressions started, failed ones included
	refused  *refuse.Log
	// The cache's entries and bytes (unpacked images plus reservations of
	// unpacks under way); guarded by mu.
	entries    map[string]*cacheEntry
	cacheBytes int64
	freeSpace  func(dir string) (int64, error) // statfs; tests fake it
}

// Option changes a Store's defaults.
type Option func(*Store)

// WithFallbackDir sets the folder iPXE binaries missing from the root are
// served from (default DefaultFallbackDir); "" turns the fallback off.
func WithFallbackDir(dir string) Option { return func(s *Store) { s.fallbackDir = dir } }

// WithMaxUnpacked bounds the decompressed size of one compressed image
// (default DefaultMaxUnpacked). n <= 0 keeps the default.
func WithMaxUnpacked(n int64) Option {
	return func(s *Store) {
		if n > 0 {
			s.maxUnpacked = n
		}
	}
}

// WithCacheLimits bounds the decompression cache: at most maxBytes of
// unpacked images in all (least recently used entries no client has open are
// evicted to make room; default DefaultCacheMaxBytes), and no unpack while
// the data filesystem has less than minFree bytes free (default
// DefaultMinFreeBytes). 0 keeps a default.
func WithCacheLimits(maxBytes, minFree int64) Option {
	return func(s *Store) {
		if maxBytes > 0 {
			s.cacheMax = maxBytes
		}
		if minFree > 0 {
			s.minFree = minFree
		}
	}
}

// Open opens the root folder. dataDir is the decompression cache folder
// (serve passes <data>/cache); it is created on the first unpack, and ""
// turns serving compressed-only images off.
func Open(rootDir, dataDir string, logger *slog.Logger, opts ...Option) (*Store, error) {
	r, err := os.OpenRoot(rootDir)
	if err != nil {
		return nil, fmt.Errorf("opening image root %s: %w (create it or set --root)", rootDir, err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	abs, err := filepath.Abs(rootDir)
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("image root %s: %w", rootDir, err)
	}
	s := &Store{
		root: r, dir: rootDir, absDir: abs, data: dataDir, logger: logger,
		fallbackDir: DefaultFallbackDir,
		signed:      SignedLoaders,
		maxUnpacked: DefaultMaxUnpacked,
		metas:       map[string]cacheMeta{},
		failures:    map[string]failure{},
		noRooms:     map[string]noRoom{},
		entries:     map[string]*cacheEntry{},
		cacheMax:    DefaultCacheMaxBytes,
		minFree:     DefaultMinFreeBytes,
		freeSpace:   freeBytes,
		refused:     refuse.New(logger, 0),
	}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// Close releases the root and the cache folder.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.cache != nil {
		s.cache.Close()
		s.cache = nil
	}
	s.mu.Unlock()
	return s.root.Close()
}

// Refusals counts what the store refused, by reason (Reason*).
func (s *Store) Refusals() map[string]uint64 { return s.refused.Counts() }

// Dir is the root folder's path.
func (s *Store) Dir() string { return s.dir }

// Clean turns a client's file name into a root-relative slash path. TFTP
// clients send leading slashes and backslashes; both are accepted, but a name
// that climbs out of the root is ErrOutsideRoot.
func Clean(name string) (string, error) {
	n := strings.ReplaceAll(name, "\\", "/")
	n = strings.TrimLeft(n, "/")
	if n == "" {
		return "", fmt.Errorf("empty file name: %w", fs.ErrNotExist)
	}
	for _, part := range strings.Split(n, "/") {
		if part == ".." {
			return "", ErrOutsideRoot
		}
	}
	if strings.ContainsRune(n, 0) {
		return "", ErrOutsideRoot
	}
	return path.Clean(n), nil
}

// Open opens a file for reading and returns it with its size. Errors wrap
// fs.ErrNotExist for a missing file and ErrOutsideRoot for an escape.
//
// Lookup order: the file itself; NAME.zst then NAME.gz, served decompressed
// from the cache (ErrCorrupt, ErrTooLarge, ErrCacheFull, ErrLowSpace); for a
// top-level iPXE binary, the fallback folder. A FIFO, device or socket is
// never opened (ErrNotRegular).
func (s *Store) Open(name string) (*os.File, int64, error) { return s.OpenFor(name, "") }

// OpenFor is Open for a client (its address, for the refusal log: each
// client's refusals are logged once per reason and minute, all counted).
func (s *Store) OpenFor(name, client string) (*os.File, int64, error) {
	f, size, err := s.open(name)
	if err != nil {
		if reason := refusalReason(err); reason != "" {
			s.refused.Refuse(reason, client, "file", name, "err", err)
		}
	}
	return f, size, err
}

func (s *Store) open(name string) (*os.File, int64, error) {
	n, err := Clean(name)
	if err != nil {
		return nil, 0, err
	}
	f, size, err := openRegular(s.root, n)
	if !errors.Is(err, errMissing) {
		return f, size, err
	}
	for _, c := range codecs {
		src, _, err := openRegular(s.root, n+c.ext)
		if errors.Is(err, errMissing) {
			continue
		}
		if err != nil {
			return nil, 0, err
		}
		defer src.Close()
		return s.openUnpacked(n, n+c.ext, c, src)
	}
	if f, size, ok := s.openFallback(n); ok {
		return f, size, nil
	}
	return nil, 0, fmt.Errorf("%s: not in %s (nor %s.zst or %s.gz): %w", n, s.dir, n, n, fs.ErrNotExist)
}

// refusalReason names what err refuses, "" for a plain missing file or
// escape (the protocol servers count those).
func refusalReason(err error) string {
	switch {
	case errors.Is(err, ErrNotRegular):
		return ReasonNotRegular
	case errors.Is(err, ErrCorrupt):
		return ReasonCorrupt
	case errors.Is(err, ErrTooLarge):
		return ReasonTooLarge
	case errors.Is(err, ErrCacheFull):
		return ReasonCacheFull
	case errors.Is(err, ErrLowSpace):
		return ReasonLowSpace
	}
	return ""
}

// errMissing marks "nothing at this name", so Open moves on to compressed
// sources and the fallback; it wraps fs.ErrNotExist.
var errMissing = fmt.Errorf("missing: %w", fs.ErrNotExist)

// openRegular opens n inside r for reading and insists on a regular file.
// It looks before it opens, so a FIFO, device or socket is never opened
// (ErrNotRegular); the open itself is non-blocking in case the file was
// swapped for a FIFO in between. A directory is "no file here"
// (fs.ErrNotExist), so loader config names inside folders still resolve.
func openRegular(r opener, n string) (*os.File, int64, error) {
	st, err := r.Stat(n)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, 0, errMissing
		}
		return nil, 0, rootErr(n, err)
	}
	if err := checkRegular(n, st); err != nil {
		return nil, 0, err
	}
	f, err := r.OpenFile(n, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, 0, errMissing
		}
		return nil, 0, rootErr(n, err)
	}
	st, err = f.Stat()
	if err == nil {
		err = checkRegular(n, st)
	}
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	setBlocking(f)
	return f, st.Size(), nil
}

// opener is an *os.Root, or hostFS for a path outside any root.
type opener interface {
	Stat(name string) (fs.FileInfo, error)
	OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error)
}

// hostFS opens paths as they are (the fallback folder).
type hostFS struct{}

func (hostFS) Stat(name string) (fs.FileInfo, error) { return os.Stat(name) }
func (hostFS) OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	return os.OpenFile(name, flag, perm)
}

// checkRegular refuses anything but a regular file: a directory as missing,
// a FIFO, device or socket as ErrNotRegular.
func checkRegular(n string, st fs.FileInfo) error {
	switch m := st.Mode(); {
	case m.IsRegular():
		return nil
	case m.IsDir():
		return fmt.Errorf("%s is a folder, not a file: %w", n, fs.ErrNotExist)
	default:
		return fmt.Errorf("%s is a %s: %w", n, kindOf(m), ErrNotRegular)
	}
}

func kindOf(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "block device"
	}
	return "special file (" + m.Type().String() + ")"
}

// rootErr maps os.Root's escape error (unexported in package os) to
// ErrOutsideRoot and keeps every other error as it is.
func rootErr(n string, err error) error {
	if strings.Contains(err.Error(), "escapes from parent") {
		return fmt.Errorf("%s: %w", n, ErrOutsideRoot)
	}
	return err
}

// EnsureRoot creates the root folder with a sample iPXE script when it is
// missing, so a bare `pxeperf serve` has something to boot.
func EnsureRoot(dir string, logger *slog.Logger) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("image root %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating image root %s: %w (set --root to a writable folder)", dir, err)
	}
	if err := os.WriteFile(path.Join(dir, "sample.ipxe"), []byte(sampleScript), 0o644); err != nil {
		return err
	}
	logger.Info("created image root with a sample iPXE script", "root", dir)
	return nil
}

const sampleScript = `#!ipxe
# Sample script written by pxeperf. Put kernels and images beside it, and
# chain to it from a host entry's script, or edit the served /boot.ipxe.
echo pxeperf sample: ${net0/mac} got ${net0/ip} from ${next-server}
shell
`

// Source says where Open would serve name from: "root" (the file, or its
// .zst/.gz unpacked), "fallback" (Debian's iPXE folder), or "" with the
// reason when nothing serves it.
func (s *Store) Source(name string) (string, error) {
	n, err := Clean(name)
	if err != nil {
		return "", err
	}
	for _, ext := range []string{"", ".zst", ".gz"} {
		if st, err := s.root.Stat(n + ext); err == nil && st.Mode().IsRegular() {
			return "root", nil
		}
	}
	if s.FallbackPath(n) != "" {
		return "fallback", nil
	}
	return "", fmt.Errorf("%s: not in %s (nor %s.zst or %s.gz): %w", n, s.dir, n, n, fs.ErrNotExist)
}
