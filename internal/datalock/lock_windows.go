//go:build windows

package datalock

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// lockedByte is the one byte TryLock locks, at offset 2^62 (OffsetHigh
// 1<<30), far past anything the file holds: Windows locks are mandatory,
// and a lock over the contents would keep a second pxeperf from reading
// the holder's pid (and the record journal's own reader from its lines).
func lockedByte() *windows.Overlapped { return &windows.Overlapped{OffsetHigh: 1 << 30} }

// TryLock takes an exclusive LockFileEx lock on f without waiting, or
// fails at once: with ErrLocked when another open file holds it. Windows
// drops it when the process dies.
func TryLock(f *os.File) error {
	err := windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, lockedByte())
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
		return ErrLocked
	}
	return err
}

// Unlock lets TryLock's lock go before f closes: Windows may release the
// lock of a closed file only some time later.
func Unlock(f *os.File) error {
	return windows.UnlockFileEx(windows.Handle(f.Fd()), 0, 1, 0, lockedByte())
}
