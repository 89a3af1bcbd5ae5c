//go:build unix

package images

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// openNonblock is added to the flags of every open for reading: if a
// regular file is swapped for a FIFO between the Stat and the open, the
// open returns at once instead of waiting for a writer.
const openNonblock = syscall.O_NONBLOCK

// setBlocking clears O_NONBLOCK again on a file known to be regular.
func setBlocking(f *os.File) {
	if rc, err := f.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { _ = syscall.SetNonblock(int(fd), false) })
	}
}

// freeBytes is the space on the filesystem holding dir that an unprivileged
// writer may still use.
func freeBytes(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// tryLockExclusive takes an exclusive flock on f without waiting; false
// when another open file (a client's download) holds a shared one.
func tryLockExclusive(f *os.File) bool {
	ok := false
	if rc, err := f.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { ok = unix.Flock(int(fd), unix.LOCK_EX|unix.LOCK_NB) == nil })
	}
	return ok
}

// lockShared takes a shared flock on f, marking the file in use until f is
// closed; it waits only while an eviction holds the exclusive lock.
func lockShared(f *os.File) {
	if rc, err := f.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) {
			for range 100 { // EINTR only; the eviction holds its lock for a moment
				if unix.Flock(int(fd), unix.LOCK_SH) != unix.EINTR {
					return
				}
			}
		})
	}
}

// unlinked reports whether an open file's name is gone (evicted).
func unlinked(st os.FileInfo) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	return ok && sys.Nlink == 0
}
