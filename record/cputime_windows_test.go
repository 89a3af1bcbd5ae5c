//go:build windows

package record

import (
	"testing"
	"time"

	"golang.org/x/sys/windows"
)

// cpuTime is the process's user+system CPU time so far (GetProcessTimes,
// in 100 ns units), as getrusage gives it on Unix.
func cpuTime(tb testing.TB) time.Duration {
	var created, exited, kernel, user windows.Filetime
	if err := windows.GetProcessTimes(windows.CurrentProcess(), &created, &exited, &kernel, &user); err != nil {
		tb.Fatal(err)
	}
	ticks := func(f windows.Filetime) int64 { return int64(f.HighDateTime)<<32 | int64(f.LowDateTime) }
	return time.Duration(ticks(kernel)+ticks(user)) * 100
}
