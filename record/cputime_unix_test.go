//go:build unix

package record

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// cpuTime is the process's user+system CPU time so far: the handler's
// part (convert, encode, journal write) and the writer's (SQLite) alike.
func cpuTime(tb testing.TB) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
