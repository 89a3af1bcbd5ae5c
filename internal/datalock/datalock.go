// Package datalock makes a data folder single-owner: one pxeperf serve at
// a time holds <data>/pxeperf.lock (an exclusive lock the system drops
// when the process dies, kill -9 included: flock on Unix, LockFileEx on
// Windows, both behind TryLock, which the record and lease journals take
// on files of their own too). The file carries the owner's pid and start
// time, so a second serve is refused with an error naming
// the folder and the process that has it. Take it before anything touches
// the folder (the lease and record journals, the image cache and its temp
// files).
package datalock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// FileName is the lock file inside the data folder.
const FileName = "pxeperf.lock"

// ErrInUse means another process holds the data folder.
var ErrInUse = errors.New("data folder in use by another pxeperf")

// ErrLocked is TryLock's error when another open file holds the lock.
var ErrLocked = errors.New("locked by another open file")

// Lock is a held data folder.
type Lock struct {
	f   *os.File
	dir string
}

// Acquire locks dir (creating it), or fails at once with an error wrapping
// ErrInUse that names the folder and the holder.
func Acquire(dir string) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating data folder %s: %w (set --data to a writable folder)", dir, err)
	}
	path := filepath.Join(dir, FileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("data folder lock %s: %w (set --data to a writable folder)", path, err)
	}
	if err := TryLock(f); err != nil {
		holder := "another process"
		if b, rerr := os.ReadFile(path); rerr == nil && len(strings.TrimSpace(string(b))) > 0 {
			holder = strings.Join(strings.Fields(string(b)), " ")
		}
		f.Close()
		if errors.Is(err, ErrLocked) {
			abs, _ := filepath.Abs(dir)
			return nil, fmt.Errorf("%w: %s is held by %s; stop that pxeperf or give this one its own --data", ErrInUse, abs, holder)
		}
		return nil, fmt.Errorf("locking data folder %s: %w", dir, err)
	}
	exe, _ := os.Executable()
	_ = f.Truncate(0)
	_, _ = fmt.Fprintf(f, "pid %d (%s) since %s\n", os.Getpid(), filepath.Base(exe), time.Now().UTC().Format(time.RFC3339))
	return &Lock{f: f, dir: dir}, nil
}

// Dir is the locked folder.
func (l *Lock) Dir() string { return l.dir }

// Release lets the folder go.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	_ = l.f.Truncate(0)
	_ = Unlock(l.f)
	err := l.f.Close()
	l.f = nil
	return err
}
