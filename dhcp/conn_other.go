//go:build !linux

package dhcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
)

// sock is a DHCP socket read through Go's poller by Options.Workers
// goroutines, each of which waits for its own ACK's lease to be durable
// (the journal lets concurrent waiters share one fsync).
type sock struct{ *net.UDPConn }

func (c *sock) closeNeighbours() {}

// listenSock without SO_BINDTODEVICE: pxeperf serves DHCP on Linux only,
// because replies must be pinned to the interface the board is on.
func listenSock(ctx context.Context, ifname string, port, rcvbuf int) (*sock, error) {
	if ifname != "" {
		return nil, errors.New("binding DHCP to an interface needs Linux (SO_BINDTODEVICE); run pxeperf on Linux or use --dhcp off")
	}
	var lc net.ListenConfig
	pc, err := lc.ListenPacket(ctx, "udp4", fmt.Sprintf("0.0.0.0:%d", port))
	if err != nil {
		return nil, err
	}
	c := pc.(*net.UDPConn)
	_ = c.SetReadBuffer(rcvbuf)
	return &sock{c}, nil
}

// serveSock runs s.workers workers on c until it is closed.
func (s *Server) serveSock(c *sock, onProxy bool) {
	var wg sync.WaitGroup
	for range s.workers {
		wg.Go(func() { s.worker(c.UDPConn, onProxy) })
	}
	wg.Wait()
}

func (s *Server) worker(c *net.UDPConn, onProxy bool) {
	buf := make([]byte, 1500) // reused for every packet this worker reads
	w := &wire{}              // and its parsed request and built reply
	for {
		n, src, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.log.Debug("dhcp: read", "err", err)
			continue
		}
		out, dst := s.handleSafe(w, buf[:n], src, onProxy)
		if out == nil || !s.settleNow(w) {
			continue
		}
		if _, err := c.WriteToUDPAddrPort(out, dst); err != nil {
			s.stats.errors.Add(1)
			s.log.Warn("dhcp: send", "to", dst, "err", err)
		}
	}
}

// settleNow waits for w's pending ACK, if any, on its own (no batch), and
// reports whether w's reply may be sent.
func (s *Server) settleNow(w *wire) bool {
	if !w.ack.pending {
		return true
	}
	return s.settleSafe(&w.ack, s.leases.wait(w.ack.gen))
}
