// Package images maps a requested file name to a file on disk for TFTP and
// HTTP: every path confined to the root (os.Root), compressed-only images
// served decompressed from a cache under the data folder, and Debian's iPXE
// binaries used where the root lacks them.
package images

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"strings"
)

// ErrOutsideRoot is returned for names that would leave the root ("..",
// absolute paths, symlinks pointing out).
var ErrOutsideRoot = fmt.Errorf("path leaves the image root: %w", fs.ErrPermission)

// Store serves files from one root folder.
type Store struct {
	root   *os.Root
	dir    string
	data   string
	logger *slog.Logger
}

// Open opens the root folder. data is the state folder (decompression cache).
func Open(rootDir, dataDir string, logger *slog.Logger) (*Store, error) {
	r, err := os.OpenRoot(rootDir)
	if err != nil {
		return nil, fmt.Errorf("opening image root %s: %w (create it or set --root)", rootDir, err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Store{root: r, dir: rootDir, data: dataDir, logger: logger}, nil
}

// Close releases the root.
func (s *Store) Close() error { return s.root.Close() }

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
func (s *Store) Open(name string) (*os.File, int64, error) {
	n, err := Clean(name)
	if err != nil {
		return nil, 0, err
	}
	f, err := s.root.Open(n)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, 0, err
		}
		if strings.Contains(err.Error(), "escapes") || errors.Is(err, fs.ErrPermission) {
			return nil, 0, ErrOutsideRoot
		}
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, 0, fmt.Errorf("%s is not a regular file: %w", n, fs.ErrNotExist)
	}
	return f, st.Size(), nil
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
