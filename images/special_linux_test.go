//go:build linux

package images

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSpecialFilesRefused: a FIFO, a device or a socket in the root is
// refused without blocking. Opening a FIFO for reading blocks until a writer
// comes, pinning an OS thread per request and holding up shutdown; a device
// may do anything on open.
func TestSpecialFilesRefused(t *testing.T) {
	s, root, _ := newStore(t)
	mk := func(name string, mode uint32, dev int) {
		t.Helper()
		p := filepath.Join(root, name)
		if err := unix.Mknod(p, mode, dev); err != nil {
			t.Skipf("mknod %s: %v (needs root and a filesystem without nodev)", name, err)
		}
		// Unblock an open that hangs, so a failing test still ends.
		t.Cleanup(func() {
			if fd, err := unix.Open(p, unix.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
				unix.Close(fd)
			}
		})
	}
	mk("fifo", unix.S_IFIFO|0o644, 0)
	mk("img.zst", unix.S_IFIFO|0o644, 0)
	mk("zero", unix.S_IFCHR|0o644, int(unix.Mkdev(1, 5)))
	if err := os.Symlink("fifo", filepath.Join(root, "link-to-fifo")); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(root, "sock")
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: sock}); err != nil {
		t.Fatal(err)
	}

	for _, name := range []string{"fifo", "img", "zero", "link-to-fifo", "sock"} {
		t.Run(name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				f, _, err := s.Open(name)
				if f != nil {
					f.Close()
				}
				done <- err
			}()
			select {
			case err := <-done:
				if !errors.Is(err, ErrNotRegular) || !errors.Is(err, fs.ErrPermission) {
					t.Fatalf("Open(%q) = %v, want ErrNotRegular (a permission error)", name, err)
				}
				if !strings.Contains(err.Error(), "not a regular file") {
					t.Errorf("Open(%q) error %q does not say why", name, err)
				}
			case <-time.After(3 * time.Second):
				t.Fatalf("Open(%q) blocked for 3 s on a special file", name)
			}
		})
	}
	// The inventory and verification paths refuse them too, without blocking.
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.hashServed("fifo")
		s.hashServed("img")
	}()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("hashing a FIFO blocked for 3 s")
	}
	if got := s.Refusals()[ReasonNotRegular]; got < 5 {
		t.Errorf("counted %d refusals of special files, want at least 5", got)
	}
}
