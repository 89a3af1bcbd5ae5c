//go:build linux

package netlab

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// ReapLeftovers removes the namespaces a crashed netlab process left behind: every
// /run/netns entry named by netlab whose creating pid no longer exists. It
// kills processes still running in them first. Testbeds of live processes
// (this one included) are left alone; so is a leftover whose pid has since
// been reused, until that process ends. It returns the names removed.
func ReapLeftovers(log *slog.Logger) ([]string, error) {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	entries, err := os.ReadDir(netnsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("netlab: reading %s: %w", netnsDir, err)
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		pid, ok := parseName(e.Name())
		if !ok || alive(pid) {
			continue
		}
		err := errors.Join(killNetnsProcs(e.Name()), deleteNamed(e.Name()))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		log.Info("netlab: removed a leftover namespace", "netns", e.Name(), "pid", pid)
		removed = append(removed, e.Name())
	}
	return removed, errors.Join(errs...)
}

// alive reports whether a process exists (EPERM: it exists, not ours).
func alive(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

// killNetnsProcs SIGKILLs every process in the named namespace (found as
// `ip netns pids` does: by the namespace's inode in /proc/PID/ns/net).
func killNetnsProcs(name string) error {
	target, err := nsInode(name)
	if err != nil || target == nil {
		return err
	}
	return killIn(name, *target)
}

// nsInode stats a named namespace; nil when the name is gone.
func nsInode(name string) (*unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(netnsDir, name), &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, nil
		}
		return nil, fmt.Errorf("netlab: stat %s: %w", name, err)
	}
	return &st, nil
}

// killIn SIGKILLs the processes in the namespace with this inode and waits,
// at most 2 s, until none is left in it.
func killIn(name string, target unix.Stat_t) error {
	deadline := time.Now().Add(2 * time.Second)
	for {
		pids := netnsPids(target)
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("netlab: processes %v still in namespace %s after SIGKILL", pids, name)
		}
		for _, pid := range pids {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// netnsPids lists the processes (not ours) in the namespace with this
// inode. Zombies have no namespace and are not listed.
func netnsPids(target unix.Stat_t) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self || pid <= 1 {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(filepath.Join("/proc", e.Name(), "ns", "net"), &st) != nil {
			continue
		}
		if st.Dev == target.Dev && st.Ino == target.Ino {
			pids = append(pids, pid)
		}
	}
	return pids
}
