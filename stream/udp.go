package stream

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/ipv4"

	"github.com/pxeperf/pxeperf/measure"
)

// udpBatch is the most datagrams one sendmmsg carries.
const udpBatch = 32

// udpGrace is how long a receiver keeps counting after the sender says it
// is done: datagrams still queued in a shaper (tbf holds up to 20 ms) or a
// socket buffer are not lost.
const udpGrace = 250 * time.Millisecond

// sendMeter counts what a sender put on the wire.
type sendMeter struct {
	bytes, packets atomic.Int64
}

func (m *sendMeter) stats() measure.Sample {
	return measure.Sample{Bytes: m.bytes.Load(), Packets: m.packets.Load()}
}

// sendUDP paces datagrams of size bytes at rate bit/s on conn (to dst, or
// to the connected peer when dst is nil) until the deadline or stop
// closes. Timestamps are the sender's clock since epoch.
func sendUDP(conn *net.UDPConn, dst net.Addr, session uint64, rate int64, size int, epoch, deadline time.Time,
	stop <-chan struct{}, m *sendMeter) error {
	pc := ipv4.NewPacketConn(conn)
	msgs := make([]ipv4.Message, udpBatch)
	for i := range msgs {
		msgs[i] = ipv4.Message{Buffers: [][]byte{make([]byte, size)}, Addr: dst}
	}
	p := measure.NewPacer(rate, size, udpBatch, epoch)
	want := measure.BatchFor(rate, size, udpBatch)
	var seq uint64
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Now()
		if !now.Before(deadline) {
			return nil
		}
		select {
		case <-stop:
			return nil
		default:
		}
		k := p.Take(now, size, udpBatch)
		if k == 0 {
			timer.Reset(min(p.Wait(want*size), deadline.Sub(now)))
			select {
			case <-stop:
				return nil
			case <-timer.C:
			}
			continue
		}
		sent := now.Sub(epoch)
		for i := range k {
			datagram{session: session, seq: seq + uint64(i), sent: sent}.put(msgs[i].Buffers[0])
		}
		off := 0
		for off < k {
			n, err := pc.WriteBatch(msgs[off:k], 0)
			if err != nil {
				if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOBUFS) {
					// The peer's port is not open yet or the queue is full:
					// the datagram is lost, as it would be on the wire.
					n = max(n, 1)
				} else {
					return err
				}
			}
			off += n
			m.packets.Add(int64(n))
			m.bytes.Add(int64(n * size))
		}
		seq += uint64(k)
	}
}

// recvState is a receiver's measure.UDPRecv shared between the reading goroutine
// and the sampler.
type recvState struct {
	mu    sync.Mutex
	u     *measure.UDPRecv
	epoch time.Time
	sent  atomic.Int64 // the sender's count, once known
}

func (r *recvState) add(d datagram, size int, at time.Time) {
	r.mu.Lock()
	r.u.Add(d.seq, size, at.Sub(r.epoch)-d.sent)
	r.mu.Unlock()
}

func (r *recvState) stats() measure.Sample {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.u.Sample(0, r.sent.Load())
}
