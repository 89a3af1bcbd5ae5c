package netlab

import (
	"fmt"
	"time"
)

// tbf sizing.
const (
	// kernelHZ is the scheduler tick the burst is sized for (CONFIG_HZ=250,
	// Debian's default and this kernel's). tbf's watchdog uses a high-res
	// timer, but the qdisc is dequeued from softirq context, which a busy
	// host may delay by up to a tick: a bucket smaller than one tick of
	// tokens would overflow and lose them, and the link would run slow. A
	// kernel with a lower HZ wants a larger burst (netlab/DESIGN.md#tbf-sizing).
	kernelHZ = 250
	// minBurst covers one GSO/TSO super-packet (64 KiB), so tbf does not
	// have to segment in software, and any MTU up to 65521.
	minBurst = 64 << 10
	// TBFLatency is the longest a packet may wait in the tbf queue; the
	// queue limit is burst + rate*TBFLatency. Sized like a switch port's
	// buffer: TCP (paced, TSQ-limited) rarely fills it, UDP above the rate
	// is dropped after 20 ms of queueing rather than bloating the RTT.
	TBFLatency = 20 * time.Millisecond
	// MinRate and MaxRate bound SetRate: below 64 kbit/s the bucket's time
	// in kernel ticks overflows, above 100 Gbit/s the queue limit does.
	MinRate = 64_000
	MaxRate = 100_000_000_000
)

// tbfSize returns the bucket and queue sizes, in bytes, for a rate in bit/s
// on an interface with this MTU:
//
//	burst = max(rate/8/HZ, 64 KiB, MTU+14)
//	limit = burst + rate/8 * TBFLatency
//
// (worked examples in netlab/DESIGN.md#tbf-sizing).
func tbfSize(bitsPerSec uint64, mtu int) (burst, limit uint32, err error) {
	if bitsPerSec < MinRate || bitsPerSec > MaxRate {
		return 0, 0, fmt.Errorf("netlab: rate %d bit/s out of range %d..%d (e.g. 1e9 for 1gbit)", bitsPerSec, uint64(MinRate), uint64(MaxRate))
	}
	bytesPerSec := bitsPerSec / 8
	b := max(bytesPerSec/kernelHZ, minBurst, uint64(mtu)+14)
	l := b + bytesPerSec*uint64(TBFLatency)/uint64(time.Second)
	return uint32(b), uint32(l), nil
}
