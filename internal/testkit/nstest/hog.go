//go:build linux

package nstest

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Hog keeps one CPU busy in bursts, as another real-time job on a busy
// host does: a thread pinned to the CPU at SCHED_FIFO priority 50 (above
// netlab's delay line, 10) spins for on, sleeps for off, and so on until
// Stop or limit. Pin what it should compete with to the same CPU.
type Hog struct {
	stop   atomic.Bool
	done   chan struct{}
	bursts atomic.Int64
}

// LastCPU is the highest-numbered CPU this process may run on.
func LastCPU(t testing.TB) int {
	t.Helper()
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatalf("nstest: CPUs of this process: %v", err)
	}
	last := -1
	for c := range len(set) * 64 {
		if set.IsSet(c) {
			last = c
		}
	}
	return last
}

// CPUHog starts a Hog on cpu for at most limit (stopped at cleanup too). It
// skips the test where the thread may not be real-time (no CAP_SYS_NICE).
func CPUHog(t testing.TB, cpu int, on, off, limit time.Duration) *Hog {
	t.Helper()
	h := &Hog{done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		defer close(h.done)
		runtime.LockOSThread() // never unlocked: the thread's policy dies with it
		var set unix.CPUSet
		set.Set(cpu)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			started <- err
			return
		}
		if err := unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 50}, 0); err != nil {
			started <- err
			return
		}
		started <- nil
		for end := time.Now().Add(limit); !h.stop.Load() && time.Now().Before(end); {
			for burst := time.Now().Add(on); !h.stop.Load() && time.Now().Before(burst); {
			}
			h.bursts.Add(1)
			time.Sleep(off)
		}
	}()
	if err := <-started; err != nil {
		<-h.done
		t.Skipf("nstest: a real-time CPU hog on CPU %d: %v (needs CAP_SYS_NICE)", cpu, err)
	}
	t.Cleanup(func() { h.Stop() })
	return h
}

// Stop ends the hog and returns how many bursts it spun.
func (h *Hog) Stop() int {
	h.stop.Store(true)
	<-h.done
	return int(h.bursts.Load())
}
