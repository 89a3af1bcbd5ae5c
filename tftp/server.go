// Package tftp is pxeperf's read-only TFTP server (RFC 1350 with the option
// extension of RFC 2347: blksize RFC 2348, timeout and tsize RFC 2349,
// windowsize RFC 7440). It serves files from an images.Store, sizes blocks
// to the interface MTU, and reports one event.Fetch per request (sent,
// missing, refused or aborted) with what was negotiated and counted on the
// wire.
//
// The server owns its listening socket and parses every request itself, so
// each refusal carries the right TFTP error code and only the options a
// client asked for are acknowledged (EFI clients reject others). A client
// that asks for windowsize gets windows of blocks (transfer.sendFile): an
// early ACK restarts the window at the lost block at once, a timeout resends
// the window; a client that does not ask gets lock-step RFC 1350 from the
// same loop with a window of one. Each transfer gets its own socket
// connected to the client: on a new port (RFC 1350's TID), or with
// SinglePort on the listening port itself (for NAT and containers; Linux
// hands a connected socket its peer's datagrams before the listener).
//
// pin/tftp's server is not used for serving (its netascii encoder is, and
// its client in tests): it has no RFC 7440 windowsize, answers every
// refusal with error code 1, caps blksize at 512 when given any
// net.PacketConn other than *net.UDPConn (so nothing can sit in front of
// it), reports client aborts only as error text, and its single-port
// Shutdown leaves Serve blocked in a read. See DESIGN.md.
package tftp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pxeperf/pxeperf/bootcfg"
	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/hosts"
	"github.com/pxeperf/pxeperf/images"
	"github.com/pxeperf/pxeperf/internal/refuse"
	"golang.org/x/net/ipv4"
)

// Files opens what a client asked for: *bootcfg.Source is one (a file in
// the root, else a loader config generated for the client). Errors wrap
// fs.ErrNotExist for a missing file and images.ErrOutsideRoot (or
// fs.ErrPermission) for a refused one.
type Files interface {
	Open(name string, peer bootcfg.Peer) (*bootcfg.Content, error)
}

// Config builds a Server.
type Config struct {
	// Listen is the IPv4 HOST:PORT to serve on, e.g. ":69".
	Listen string
	// Interface names the interface served on; it is put on each event.
	Interface string
	// MTU of that interface; the largest blksize is MTU - 32 (IPv4, UDP and
	// TFTP headers), 1468 at 1500. 0 means 1500.
	MTU int
	// MaxBlockSize caps blksize further when non-zero (8..65464).
	MaxBlockSize int
	// MaxWindowSize caps the RFC 7440 windowsize option (1..65535; the
	// server further keeps a window under 32768 blocks and 4 MiB). Clients
	// that do not ask for it get lock-step RFC 1350. Default 64.
	MaxWindowSize int
	// UBootMaxWindowSize caps the windowsize of a client DHCP saw as U-Boot
	// (hosts.Client.UBoot, option 60 "U-Boot..."): U-Boot under virtio-net
	// hangs at windowsize 32 and over (tftp/DESIGN.md#u-boot-windowsize-cap-issue-32).
	// Default 16; negative: no cap beyond MaxWindowSize.
	UBootMaxWindowSize int
	// Timeout before a packet is sent again, unless the client asks for
	// another with the timeout option. Default 1s.
	Timeout time.Duration
	// Retries: how many times one packet is sent again before the transfer
	// is given up. Default 5.
	Retries int
	// SinglePort answers every transfer from the listening port.
	SinglePort bool
	// ShutdownGrace is how long running transfers may finish once Serve's
	// context ends. Default 30s.
	ShutdownGrace time.Duration
	// MaxTransfers bounds concurrent transfers; requests beyond it are
	// dropped (the client will retry). Default 1024: two each for a lab of
	// 500 boards booting at once.
	MaxTransfers int
	// MaxTransfersPerClient bounds the concurrent transfers of one client
	// address (all its ports), so one address cannot take the whole of
	// MaxTransfers. Default 64; raise it when many boards share an address
	// (NAT).
	MaxTransfersPerClient int
	// MaxClientTimeout is the longest RFC 2349 timeout option accepted; a
	// longer one is left out of the OACK (RFC 2349 lets a server only
	// accept the value as asked or ignore it), so the client keeps its own
	// and the server uses Timeout. Default 10s: U-Boot asks for 5.
	MaxClientTimeout time.Duration
	// MaxTransferTime bounds one transfer's life, however slowly the client
	// acknowledges. Default 30m.
	MaxTransferTime time.Duration
	// MinRate is the slowest a transfer may run, in payload bytes a second
	// acknowledged since its first reply, and keep its slot while others
	// wait: at MaxTransfers a new request takes the slot of the slowest
	// transfer under it that has run preemptAfter (see Server.preempt).
	// Default 32 KiB/s; negative: never.
	MinRate int64
	// ErrorRecordsPerMinute is how many fetches that did not complete
	// (refused, not found, given up) one client address puts on record a
	// minute, and 16 times that all clients together; more are answered
	// and counted, not recorded. Default 120, as http's.
	ErrorRecordsPerMinute int
	// SinglePortBudget is how many bytes (headers included) one client
	// address may be sent per minute, in SinglePort mode, by windowed
	// transfers that have not yet proved the client reads them (see
	// proof.go). Default 4 MiB, many proofs' worth
	// (tftp/DESIGN.md#a-hostile-lab-network-issue-9).
	SinglePortBudget int64

	// OpenIn, when set, runs fn, which opens one transfer's socket, where
	// the listening socket lives: a goroutine's new socket opens in the
	// process's network namespace, so a server listening inside another
	// one (the bench's netlab testbed) passes a function that runs fn
	// there. nil: fn runs as it is.
	OpenIn func(fn func() error) error

	// minRTO overrides the adaptive retransmit timer's floor (tests that
	// must see no timeout on a slow machine). 0: defaultMinRTO.
	minRTO time.Duration

	Files  Files        // required
	Hosts  *hosts.Table // MAC, host name and labels for events; may be nil
	Sink   event.Sink   // default event.Discard
	Logger *slog.Logger // default: discard
	// Active, when set, lists each transfer while it runs, with the bytes
	// acknowledged so far (one atomic add per window); nil: none.
	Active *event.Active

	// TransferThreads is how many transfers, lock-step or windowed, at
	// once wait for their ACKs in a blocking read on an OS thread of their
	// own (Linux; thread_linux.go), which shortens each ACK's turnaround
	// (tftp/DESIGN.md#lock-step-threads). Further ones wait in Go's poller,
	// so a thousand slow clients cost no more than 16 threads. Default 16;
	// negative: none.
	TransferThreads int
}

// Stats counts what the server did outside of transfers.
type Stats struct {
	Requests   int64 // RRQs and WRQs accepted for handling
	Malformed  int64 // packets on the listening port that were not a valid request
	Duplicates int64 // a request from a client address already in a transfer
	Busy       int64 // requests dropped at MaxTransfers or MaxTransfersPerClient
	Replaced   int64 // running transfers ended by a new request from the same address and port
	Stray      int64 // packets to a transfer that were not an ACK or ERROR
	// Unsent counts refusals whose ERROR packet the kernel would not take
	// (no socket or buffer for it): dropped, never waited for
	// (sendRefusal).
	Unsent int64
	// PassedOn counts datagrams a single-port transfer socket took in
	// between its bind and its connect, handed on as the listener's
	// (Server.passOn).
	PassedOn int64
	// Transfers by how they waited for their ACKs: in a blocking read on
	// a thread of their own (thread_linux.go), or
	// in Go's poller because every thread under TransferThreads was taken
	// or the thread's socket could not be opened (and always off Linux).
	Threaded int64
	Polled   int64
	// ThreadRecvs counts the datagrams read on those threads, added
	// as each threaded transfer ends.
	ThreadRecvs int64
	// Pinned counts the threaded transfers that moved onto the
	// CPU taking in their client's packets (threadLink.pin; Linux).
	Pinned int64
	// ThreadsBusy is how many threads transfers hold now
	// (at most ThreadsCap).
	ThreadsBusy int64
	// ThreadsCap is how many they may hold: Config.TransferThreads
	// on Linux (0 when negative), 0 elsewhere.
	ThreadsCap int64
	// Refused counts refusals by reason (the Refuse* constants), each also
	// logged once per client per minute.
	Refused map[string]uint64
}

// Refusal reasons, as counted in Stats.Refused and logged.
const (
	RefuseBusy          = "tftp: too many transfers"
	RefuseClientBusy    = "tftp: too many transfers from one client"
	RefuseClientTimeout = "tftp: client timeout option over tftp.max_client_timeout"
	RefuseTransferTime  = "tftp: transfer over tftp.max_transfer_time"
	RefuseUnproven      = "tftp: single-port client did not prove it reads"
	RefuseUnheard       = "tftp: too many unacknowledged transfers from one client"
	RefuseSlow          = "tftp: transfer under tftp.min_rate_kibps gave its slot to a new request"
	RefuseErrorRecords  = "tftp: failed fetches over the record budget (answered, not recorded)"
)

// Server is a read-only TFTP server. Build it with New.
type Server struct {
	cfg    Config
	maxBlk int
	conn   *net.UDPConn
	pc     *ipv4.PacketConn
	log    *slog.Logger

	mu sync.Mutex
	// active maps a client address and port to its running transfer.
	active map[netip.AddrPort]*entry
	// running counts transfers until their goroutines end, in all and by
	// client address: a replaced or refused one counts until it has ended,
	// so goroutines and sockets stay within the caps whatever the request
	// rate. ending is how many of them were preempted and are ending.
	running  int
	byClient map[netip.Addr]int
	// unheard counts by client address the transfers its client has not
	// acknowledged yet (refusals included), within unheardPerClient.
	unheard  map[netip.Addr]int
	ending   int
	draining bool
	wg       sync.WaitGroup

	refused *refuse.Log
	budget  *budget // SinglePort only
	// errRecords and allErrRecords budget the records of fetches that did
	// not complete, per client and in all (Config.ErrorRecordsPerMinute).
	errRecords, allErrRecords *budget

	requests, malformed, duplicates, busy, replaced, stray, passedOn, unsent atomic.Int64

	// threads counts the transfers on threads of their own now;
	// threaded and polled count transfers so far by how they
	// waited, threadRecvs the datagrams read on those threads.
	threads                       atomic.Int32
	threaded, polled, threadRecvs atomic.Int64
	pinned                        atomic.Int64 // threaded transfers that rode their client's CPU
	// cpuRiders is which CPUs a threaded transfer rides (Linux; see
	// threadLink.pin).
	cpuRiders cpuRiders
}

// New checks cfg and binds the listening socket, so a busy port fails here.
func New(cfg Config) (*Server, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	conn, pc, err := listen(cfg.Listen, cfg.SinglePort)
	if err != nil {
		return nil, err
	}
	log = log.With("service", "tftp")
	s := &Server{
		cfg:      cfg,
		maxBlk:   blockLimit(cfg.MTU, cfg.MaxBlockSize),
		conn:     conn,
		pc:       pc,
		log:      log,
		active:   make(map[netip.AddrPort]*entry),
		byClient: make(map[netip.Addr]int),
		unheard:  make(map[netip.Addr]int),
		refused:  refuse.New(log, 0),
		// A fixed window per client, as the single-port budget: a flood
		// of forged addresses cannot grow the table past its cap, and
		// the total holds however many addresses it forges.
		errRecords:    newBudget(int64(cfg.ErrorRecordsPerMinute), time.Minute),
		allErrRecords: newBudget(allErrorRecords*int64(cfg.ErrorRecordsPerMinute), time.Minute),
	}
	if cfg.SinglePort {
		s.budget = newBudget(cfg.SinglePortBudget, time.Minute)
	}
	return s, nil
}

// check puts the documented defaults in cfg's unset fields and reports the
// first field out of range, and how to fix it.
func (cfg *Config) check() error {
	if cfg.Files == nil {
		return errors.New("tftp: no Files to serve (pass the images store)")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = time.Second
	}
	if cfg.Retries <= 0 {
		cfg.Retries = 5
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = 30 * time.Second
	}
	if cfg.MaxTransfers <= 0 {
		cfg.MaxTransfers = 1024
	}
	if cfg.MaxTransfersPerClient <= 0 {
		cfg.MaxTransfersPerClient = 64
	}
	if cfg.MaxClientTimeout <= 0 {
		cfg.MaxClientTimeout = 10 * time.Second
	}
	if cfg.MaxTransferTime <= 0 {
		cfg.MaxTransferTime = 30 * time.Minute
	}
	if cfg.MinRate == 0 {
		cfg.MinRate = defaultMinRate
	}
	if cfg.ErrorRecordsPerMinute <= 0 {
		cfg.ErrorRecordsPerMinute = DefaultErrorRecordsPerMinute
	}
	if cfg.SinglePortBudget <= 0 {
		cfg.SinglePortBudget = 4 << 20
	}
	if cfg.TransferThreads == 0 {
		cfg.TransferThreads = defaultTransferThreads
	}
	if cfg.MaxBlockSize != 0 && (cfg.MaxBlockSize < minBlockSize || cfg.MaxBlockSize > maxBlockSize) {
		return fmt.Errorf("tftp: max block size %d is outside %d..%d (RFC 2348); use 0 for the MTU's limit",
			cfg.MaxBlockSize, minBlockSize, maxBlockSize)
	}
	if cfg.MaxWindowSize == 0 {
		cfg.MaxWindowSize = defaultMaxWindow
	}
	if cfg.MaxWindowSize < 1 || cfg.MaxWindowSize > 65535 {
		return fmt.Errorf("tftp: max window size %d is outside 1..65535 (RFC 7440); 64 is a good cap",
			cfg.MaxWindowSize)
	}
	if cfg.UBootMaxWindowSize == 0 {
		cfg.UBootMaxWindowSize = defaultUBootMaxWindow
	}
	if cfg.UBootMaxWindowSize > 65535 {
		return fmt.Errorf("tftp: U-Boot max window size %d is over 65535 (RFC 7440); 16 is safe, negative for no cap",
			cfg.UBootMaxWindowSize)
	}
	if cfg.Sink == nil {
		cfg.Sink = event.Discard{}
	}
	return nil
}

// listen binds the listening socket on addr, with a large receive buffer
// and IP_PKTINFO; with singlePort, transfer sockets may then share its port.
func listen(addr string, singlePort bool) (*net.UDPConn, *ipv4.PacketConn, error) {
	pconn, err := (&net.ListenConfig{}).ListenPacket(context.Background(), "udp4", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("tftp: listening on %s: %w (is another TFTP server running? stop it or set tftp.listen / --tftp-addr)", addr, err)
	}
	conn := pconn.(*net.UDPConn)
	if rc, err := conn.SyscallConn(); err == nil {
		growRcvbuf(rc)
	}
	pc := ipv4.NewPacketConn(conn)
	// The destination address tells which local address a request came to,
	// so replies leave from it on a multi-homed host.
	if err := pc.SetControlMessage(ipv4.FlagDst|ipv4.FlagInterface, true); err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("tftp: enabling IP_PKTINFO on %s: %w", addr, err)
	}
	if singlePort {
		// Set only after the bind, so the bind above still fails on a busy
		// port; transfer sockets then share the port (see shareAddr).
		rc, err := conn.SyscallConn()
		if err == nil {
			err = shareAddr("", "", rc)
		}
		if err != nil {
			conn.Close()
			return nil, nil, fmt.Errorf("tftp: single-port mode on %s: %w", addr, err)
		}
	}
	return conn, pc, nil
}

// blockLimit is the largest blksize for an MTU and an optional cap.
func blockLimit(mtu, limit int) int {
	if mtu <= 0 {
		mtu = 1500
	}
	m := min(mtu-ipUDPTFTPOverhead, maxBlockSize)
	if limit > 0 {
		m = min(m, limit)
	}
	return max(m, minBlockSize)
}

// Addr is the bound listening address.
func (s *Server) Addr() netip.AddrPort {
	return s.conn.LocalAddr().(*net.UDPAddr).AddrPort()
}

// MaxBlockSize is the largest blksize the server agrees to.
func (s *Server) MaxBlockSize() int { return s.maxBlk }

// Stats returns the counters so far.
func (s *Server) Stats() Stats {
	return Stats{
		Requests:   s.requests.Load(),
		Malformed:  s.malformed.Load(),
		Duplicates: s.duplicates.Load(),
		Busy:       s.busy.Load(),
		Replaced:   s.replaced.Load(),
		Stray:      s.stray.Load(),
		PassedOn:   s.passedOn.Load(),
		Unsent:     s.unsent.Load(),
		Refused:    s.refused.Counts(),

		Threaded:    s.threaded.Load(),
		Polled:      s.polled.Load(),
		ThreadRecvs: s.threadRecvs.Load(),
		Pinned:      s.pinned.Load(),
		ThreadsBusy: int64(s.threads.Load()),
		ThreadsCap:  s.threadCap(),
	}
}

// Serve answers requests until ctx ends, then lets running transfers finish
// for up to ShutdownGrace, and returns nil. It returns an error only when
// the listening socket fails. Call it once.
func (s *Server) Serve(ctx context.Context) error {
	tctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	loopErr := make(chan error, 1)
	go func() { loopErr <- s.readLoop(tctx) }()
	select {
	case <-ctx.Done():
	case err := <-loopErr:
		s.conn.Close()
		cancel()
		s.wg.Wait()
		return err
	}
	s.mu.Lock()
	s.draining = true
	s.mu.Unlock()
	// Transfers have sockets of their own (also in single-port mode), so
	// the listener can go now: the kernel refuses new requests.
	s.conn.Close()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	timer := time.NewTimer(s.cfg.ShutdownGrace)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		s.log.Warn("stopping TFTP transfers still running after the shutdown grace", "grace", s.cfg.ShutdownGrace)
		cancel()
		<-done
	}
	<-loopErr
	return nil
}

// readLoop reads the listening socket until it is closed.
func (s *Server) readLoop(ctx context.Context) error {
	buf := make([]byte, 65536)
	failures := 0
	for {
		n, cm, src, err := s.pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			failures++
			s.log.Debug("reading the TFTP socket", "err", err)
			if failures > 100 {
				return fmt.Errorf("tftp: reading %s: %w", s.Addr(), err)
			}
			continue
		}
		failures = 0
		ua, ok := src.(*net.UDPAddr)
		if !ok {
			continue
		}
		peer := netip.AddrPortFrom(ua.AddrPort().Addr().Unmap(), ua.AddrPort().Port())
		var local netip.Addr
		if cm != nil {
			if a, ok := netip.AddrFromSlice(cm.Dst); ok && a.Unmap().Is4() && a.Unmap() != netip.IPv4Unspecified() &&
				a.Unmap() != netip.AddrFrom4([4]byte{255, 255, 255, 255}) && !a.Unmap().IsMulticast() {
				local = a.Unmap()
			}
		}
		s.dispatch(ctx, buf[:n], peer, local)
	}
}

// entry is one running transfer in Server.active.
type entry struct {
	req  []byte                  // the request as received, to spot the client's resends
	stop context.CancelCauseFunc // ends the transfer (its socket closes)
	// begun is when the transfer sent its first reply (UnixNano; 0:
	// not yet), acked the payload bytes acknowledged since: its rate.
	begun, acked atomic.Int64
	preempted    bool // under Server.mu: counted in Server.ending
	unheard      bool // under Server.mu: counted in Server.unheard
}

// errReplaced ends a transfer whose client sent a new request from the
// same address and port: the client gave up on it (U-Boot and EDK2 do this
// after an abort), so only the new one runs.
var errReplaced = errors.New("replaced by a new request from the same client port")

// errTransferTime ends a transfer at MaxTransferTime.
var errTransferTime = errors.New("transfer time limit reached")

// errPreempted ends a transfer under MinRate whose slot a new request
// took at MaxTransfers.
var errPreempted = errors.New("too slow while others waited: its slot went to a new request (tftp.min_rate_kibps)")

// dispatch hands a packet to its transfer (single-port mode) or starts a
// new transfer for a request.
//
// One client address and port runs one transfer: a different request from
// it ends the running one (the client moved on) before the new one starts.
// A client address runs at most MaxTransfersPerClient transfers and the
// server MaxTransfers; a request beyond either is dropped (the client
// sends it again), counted and logged once per client per minute. A
// replaced or refused transfer counts until its goroutine has ended (its
// socket closed), so goroutines and sockets stay within the caps whatever
// the request rate. At MaxTransfers a request may take the slot of a
// transfer that runs too slowly (preempt).
func (s *Server) dispatch(ctx context.Context, pkt []byte, peer netip.AddrPort, local netip.Addr) {
	req, err := parseRequest(pkt)
	if err != nil {
		s.malformed.Add(1)
		s.log.Debug("dropped a packet that is not a TFTP request", "client", peer, "bytes", len(pkt), "err", err)
		return
	}
	s.mu.Lock()
	old := s.active[peer]
	switch {
	case s.draining:
		s.mu.Unlock()
		return
	case old != nil && bytes.Equal(old.req, pkt):
		// The client sent its request again before our first reply came:
		// answering it would start a second transfer to the same TID.
		s.mu.Unlock()
		s.duplicates.Add(1)
		s.log.Debug("dropped a repeated request for a running transfer", "client", peer, "file", req.file)
		return
	}
	if old != nil {
		// A different request from a running client's port means it moved
		// on (it got its last block, or gave up): end the old transfer.
		old.stop(errReplaced)
		delete(s.active, peer)
		s.replaced.Add(1)
	}
	switch {
	case s.byClient[peer.Addr()] >= s.cfg.MaxTransfersPerClient:
		s.mu.Unlock()
		s.busy.Add(1)
		s.refused.Refuse(RefuseClientBusy, peer.Addr().String(), "file", req.file, "max", s.cfg.MaxTransfersPerClient,
			"fix", "raise tftp.max_transfers_per_client if many boards share this address")
		return
	case s.unheard[peer.Addr()] >= s.unheardPerClient():
		s.mu.Unlock()
		s.refused.Refuse(RefuseUnheard, peer.Addr().String(), "file", req.file, "max", s.unheardPerClient(),
			"fix", "raise tftp.max_transfers_per_client (a 16th of it) if many boards share this address")
		return
	case s.running-s.ending >= s.cfg.MaxTransfers && !s.preempt(time.Now()):
		s.mu.Unlock()
		s.busy.Add(1)
		s.refused.Refuse(RefuseBusy, peer.Addr().String(), "file", req.file, "max", s.cfg.MaxTransfers,
			"fix", "raise tftp.max_transfers")
		return
	}
	tctx, stop := context.WithCancelCause(ctx)
	tctx, stopTimer := context.WithTimeoutCause(tctx, s.cfg.MaxTransferTime, errTransferTime)
	e := &entry{req: append([]byte(nil), pkt...), stop: stop, unheard: true}
	s.active[peer] = e
	s.running++
	s.byClient[peer.Addr()]++
	s.unheard[peer.Addr()]++
	s.wg.Add(1)
	s.mu.Unlock()
	s.requests.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.ended(peer, e)
		var once sync.Once
		release := func() { once.Do(func() { s.forget(peer, e) }) }
		defer release()
		defer stop(nil)
		defer stopTimer()
		s.handle(ctx, tctx, req, peer, local, release, e)
	}()
}

// forget removes e from the running transfers; its client may send its
// next request now.
func (s *Server) forget(peer netip.AddrPort, e *entry) {
	s.mu.Lock()
	if s.active[peer] == e {
		delete(s.active, peer)
	}
	s.mu.Unlock()
}

// heard takes e off its client's unheard transfers: the client
// acknowledged it.
func (s *Server) heard(peer netip.AddrPort, e *entry) {
	s.mu.Lock()
	s.hearLocked(peer, e)
	s.mu.Unlock()
}

func (s *Server) hearLocked(peer netip.AddrPort, e *entry) {
	if !e.unheard {
		return
	}
	e.unheard = false
	if s.unheard[peer.Addr()]--; s.unheard[peer.Addr()] <= 0 {
		delete(s.unheard, peer.Addr())
	}
}

// unheardPerClient is how many transfers of one client address may wait
// for their first acknowledgement at once: a 16th of
// MaxTransfersPerClient, at least 4 (a board asks for one file at a
// time). A request forged from an address that never answers holds a
// transfer (a file and a socket opened, a reply and its resend, 2 s), and
// a flood of them kept every slot busy; beyond this share they are
// dropped at the door (tftp/DESIGN.md#a-hostile-lab-network-round-two-issue-27).
func (s *Server) unheardPerClient() int { return max(s.cfg.MaxTransfersPerClient/16, 4) }

// ended frees e's slot once its goroutine is done.
func (s *Server) ended(peer netip.AddrPort, e *entry) {
	s.mu.Lock()
	s.hearLocked(peer, e)
	s.running--
	if s.byClient[peer.Addr()]--; s.byClient[peer.Addr()] <= 0 {
		delete(s.byClient, peer.Addr())
	}
	if e.preempted {
		s.ending--
	}
	s.mu.Unlock()
}

// preemptAfter is how long a transfer runs from its first reply before
// MinRate may judge it: a client answers its first reply within a round
// trip (a few ms on a LAN, longer for U-Boot under QEMU), and a request
// forged from an address that never answers has shown it by then.
const preemptAfter = 100 * time.Millisecond

// maxEnding bounds the preempted transfers still ending (their sockets
// closing): each lets one new transfer run over MaxTransfers until then.
// A preempted transfer ends as soon as its goroutine runs, but a flood
// keeps the CPUs busy, and a lower bound left new requests dropped as busy
// (tftp/DESIGN.md#a-hostile-lab-network-round-two-issue-27).
const maxEnding = 256

// preempt ends the running transfer with the lowest rate under MinRate
// (the oldest of equals) once it has run preemptAfter, so that a new
// request can have its slot, and reports whether there was one. A slot is
// for a client that moves: transfers forged from addresses that never
// answer get no ACK at all, and slow real clients could hold every slot
// until tftp.max_transfer_time while a board waited
// (tftp/DESIGN.md#a-hostile-lab-network-round-two-issue-27). s.mu is held.
func (s *Server) preempt(now time.Time) bool {
	if s.cfg.MinRate < 0 || s.ending >= maxEnding {
		return false
	}
	var (
		victim *entry
		vpeer  netip.AddrPort
		vrate  float64
		vbegun int64
	)
	for p, e := range s.active {
		begun := e.begun.Load()
		age := now.Sub(time.Unix(0, begun))
		if begun == 0 || age < preemptAfter {
			continue
		}
		rate := float64(e.acked.Load()) / age.Seconds()
		if rate >= float64(s.cfg.MinRate) {
			continue
		}
		if victim == nil || rate < vrate || rate == vrate && begun < vbegun {
			victim, vpeer, vrate, vbegun = e, p, rate, begun
		}
	}
	if victim == nil {
		return false
	}
	victim.stop(errPreempted)
	victim.preempted = true
	delete(s.active, vpeer)
	s.ending++
	s.refused.Refuse(RefuseSlow, vpeer.Addr().String(), "bytes_per_second", int64(vrate),
		"min_kibps", s.cfg.MinRate>>10, "fix", "lower tftp.min_rate_kibps for clients this slow, or raise tftp.max_transfers")
	return true
}

// handle answers one request and reports it.
//
// release is called as soon as the client may send its next request (before
// the final error, after the last ACK), so that request is not mistaken for
// a resend of this one. ctx is the transfer's (it ends when the transfer is
// replaced, preempted or runs out of time), base the server's; e is its
// entry, where its progress is kept.
func (s *Server) handle(base, ctx context.Context, req request, peer netip.AddrPort, local netip.Addr, release func(), e *entry) {
	a := &answer{s: s, base: base, ctx: ctx, req: req, peer: peer, local: local, release: release, e: e}
	a.f, a.uboot = s.newFetch(req, peer, local)
	defer a.report()
	if a.refuseRequest() {
		return
	}
	file := a.open()
	if file == nil {
		return
	}
	defer file.Close()
	a.describe(file)
	a.transfer(file, a.negotiate(file.Size))
}

// answer is one request being answered (Server.handle): what it came
// with, and its event.
type answer struct {
	s         *Server
	base, ctx context.Context
	req       request
	peer      netip.AddrPort
	local     netip.Addr
	release   func()
	e         *entry
	f         *event.Fetch
	uboot     bool // DHCP saw the client as U-Boot: Config.UBootMaxWindowSize applies
}

// newFetch is the event of a request, before anything was sent. The host
// entry is stamped on it now (hosts.Table.Stamp, the rule's one home), so
// the live view names the board while the transfer runs; serve stamps
// every event again before its sinks (hosts.Stamping), which changes
// nothing here. uboot tells whether the client is U-Boot (hosts.Client.UBoot).
func (s *Server) newFetch(req request, peer netip.AddrPort, local netip.Addr) (f *event.Fetch, uboot bool) {
	f = &event.Fetch{
		Start:     time.Now(),
		Proto:     event.ProtoTFTP,
		Client:    peer,
		File:      req.file,
		Size:      -1,
		Interface: s.cfg.Interface,
		Local:     local,
		TFTP:      &event.TFTPInfo{BlockSize: defaultBlockSize, WindowSize: 1, Timeout: s.cfg.Timeout},
	}
	_, f.TFTP.TSize = req.opt("tsize")
	c, _ := s.cfg.Hosts.Stamp(f)
	return f, c.UBoot
}

// report hands the event to the sink: every completed fetch, and those
// that did not complete within the error records' budget.
func (a *answer) report() {
	f := a.f
	if f.Duration == 0 {
		f.Duration = time.Since(f.Start)
	}
	if f.Outcome != event.OutcomeOK && !a.s.recordError(f) {
		return
	}
	a.s.cfg.Sink.Fetch(f)
}

// refuse ends the request with an ERROR packet (code, msg) and puts
// outcome and err on its event. The client may send its next request at
// once.
func (a *answer) refuse(outcome string, code uint16, msg string, err error) {
	a.f.Outcome, a.f.Err = outcome, err.Error()
	a.release()
	if serr := a.s.sendRefusal(a.base, appendError(nil, code, msg), a.peer, a.local); serr != nil {
		a.s.unsent.Add(1)
		a.s.log.Debug("dropped a TFTP error the kernel would not take", "client", a.peer, "err", serr)
	}
}

// refuseRequest refuses what the server does not do, writes and modes
// other than octet and netascii, and reports whether it did.
func (a *answer) refuseRequest() bool {
	switch {
	case a.req.op == opWRQ:
		a.refuse(event.OutcomeDenied, errAccess, "Access violation: pxeperf is read-only",
			errors.New("write request refused"))
	case a.req.mode != "octet" && a.req.mode != "netascii":
		a.refuse(event.OutcomeError, errIllegalOp, "Illegal TFTP operation: unsupported mode "+a.req.mode,
			fmt.Errorf("unsupported mode %q", a.req.mode))
	default:
		return false
	}
	return true
}

// open opens the file asked for; when it cannot, it refuses the request
// with the error code that says why and returns nil.
func (a *answer) open() *bootcfg.Content {
	file, err := a.s.cfg.Files.Open(a.req.file, bootcfg.Peer{Client: a.peer.Addr(), Local: a.local})
	switch {
	case err == nil:
		return file
	case errors.Is(err, images.ErrOutsideRoot) || errors.Is(err, fs.ErrPermission):
		a.refuse(event.OutcomeDenied, errAccess, "Access violation", err)
	case errors.Is(err, fs.ErrNotExist):
		a.refuse(event.OutcomeNotFound, errNotFound, "File not found", err)
	case errors.Is(err, images.ErrCacheFull) || errors.Is(err, images.ErrLowSpace):
		// The image exists but cannot be unpacked now (the store logged
		// why): say so in RFC 1350's words, so the board retries later.
		a.refuse(event.OutcomeError, errDiskFull, "Disk full or allocation exceeded: image cache full, retry later", err)
	default:
		a.refuse(event.OutcomeError, errNotDefined, "Cannot read the file", err)
	}
	return nil
}

// describe puts the file's size on the event and, for a loader config
// generated for the client, its kind and the host it was made for.
func (a *answer) describe(file *bootcfg.Content) {
	f := a.f
	f.Size = file.Size
	if !file.Generated() {
		return
	}
	f.Kind = event.KindConfig
	if f.MAC == nil && file.MAC != nil {
		f.MAC = file.MAC
	}
	if f.Host == "" && file.Host != nil {
		f.Host = file.Host.Name
	}
}

// negotiate settles the options the server acknowledges for a file of
// size bytes, and puts them on the event.
func (a *answer) negotiate(size int64) negotiated {
	cfg := &a.s.cfg
	lim := limits{maxBlock: a.s.maxBlk, maxWindow: cfg.MaxWindowSize, maxTimeout: cfg.MaxClientTimeout}
	capped := a.uboot && cfg.UBootMaxWindowSize > 0 && cfg.UBootMaxWindowSize < lim.maxWindow
	if capped {
		lim.maxWindow = cfg.UBootMaxWindowSize
	}
	neg := negotiate(&a.req, lim, size)
	if capped {
		a.logUBootCap(neg.windowSize)
	}
	if neg.timeoutRefused != "" {
		a.s.refused.Refuse(RefuseClientTimeout, a.peer.Addr().String(), "timeout", neg.timeoutRefused,
			"max", cfg.MaxClientTimeout, "fix", "raise tftp.max_client_timeout")
	}
	if neg.timeout == 0 {
		neg.timeout = cfg.Timeout
	}
	a.f.TFTP.BlockSize, a.f.TFTP.WindowSize, a.f.TFTP.Timeout = neg.blockSize, neg.windowSize, neg.timeout
	return neg
}

// logUBootCap logs a U-Boot client's windowsize lowered to agreed by
// Config.UBootMaxWindowSize; the fetch's record carries agreed.
func (a *answer) logUBootCap(agreed int) {
	v, _ := a.req.opt("windowsize")
	asked, err := strconv.Atoi(v)
	if err != nil || asked <= agreed {
		return
	}
	a.s.log.Info("tftp windowsize capped for U-Boot", "client", a.peer, "file", a.req.file,
		"asked", asked, "windowsize", agreed, "why", "U-Boot under virtio-net hangs at windowsize 32 and over",
		"fix", "tftp.uboot_max_windowsize (0: no cap)")
}

// transfer sends file on a socket of its own, connected to the client,
// and puts how it went on the event (finish).
func (a *answer) transfer(file *bootcfg.Content, neg negotiated) {
	s, f, e := a.s, a.f, a.e
	l, err := s.newLink(a.base, a.ctx, a.peer, a.local)
	if err != nil {
		a.refuse(event.OutcomeError, errNotDefined, "Server error", err)
		s.log.Warn("opening a TFTP transfer socket", "client", a.peer, "file", a.req.file, "err", err)
		return
	}
	t := &transfer{link: l, timeout: neg.timeout, minRTO: s.cfg.minRTO, retries: s.cfg.Retries, info: f.TFTP, req: e.req,
		progress: &e.acked, onHeard: func() { s.heard(a.peer, e) }}
	e.begun.Store(time.Now().UnixNano())
	t.live = s.cfg.Active.Begin(f)
	defer t.live.End()
	if s.budget != nil && neg.windowSize > 2 {
		t.proof = newProof(neg.windowSize, func(n int64) bool { return s.budget.spend(a.peer.Addr(), n) })
	}
	err = t.run(a.req.mode, file, neg)
	f.Duration = time.Since(f.Start)
	l.close()
	a.release()
	if err != nil && a.ctx.Err() != nil {
		// The socket was closed under the transfer: say why.
		err = fmt.Errorf("%w (%v)", context.Cause(a.ctx), err)
	}
	a.finish(t, err)
}

// finish logs a transfer the server's limits ended, starts the client's
// new request if that is what ended it, and puts the outcome on the event.
func (a *answer) finish(t *transfer, err error) {
	s, f := a.s, a.f
	switch {
	case errors.Is(err, errTransferTime):
		s.refused.Refuse(RefuseTransferTime, a.peer.Addr().String(), "file", a.req.file,
			"max", s.cfg.MaxTransferTime, "fix", "raise tftp.max_transfer_time for very large images")
	case errors.Is(err, errUnproven), errors.Is(err, errBudget):
		s.refused.Refuse(RefuseUnproven, a.peer.Addr().String(), "file", a.req.file, "err", err,
			"fix", "turn tftp.single_port off, or raise tftp.single_port_budget_kib")
	}
	if nr, ok := errors.AsType[*newRequestError](err); ok {
		s.dispatch(a.base, nr.pkt, a.peer, a.local)
	}
	f.Bytes = t.acked
	f.Outcome = outcomeOf(err)
	if err != nil {
		f.Err = err.Error()
	}
	s.stray.Add(t.stray)
}

// recordError reports whether f, a fetch that did not complete, fits its
// client's budget of error records and the total (ErrorRecordsPerMinute,
// 16 times that in all); one that does not is counted and logged once per
// client a minute. Forged requests from any address are answered, but
// without this budget each put a record in the store
// (tftp/DESIGN.md#a-hostile-lab-network-round-two-issue-27).
func (s *Server) recordError(f *event.Fetch) bool {
	if s.errRecords.spend(f.Client.Addr(), 1) && s.allErrRecords.spend(netip.Addr{}, 1) {
		return true
	}
	s.refused.Refuse(RefuseErrorRecords, f.Client.Addr().String(), "outcome", f.Outcome, "file", f.File,
		"cap_per_minute", s.cfg.ErrorRecordsPerMinute, "fix", "raise tftp.error_records_per_minute")
	return false
}

// allErrorRecords is how many clients' worth of error records all clients
// together put on record a minute: a lab of 16 failing boards is recorded
// whole, and forged requests from a whole subnet cannot fill the store.
const allErrorRecords = 16

// DefaultErrorRecordsPerMinute is Config.ErrorRecordsPerMinute's default.
const DefaultErrorRecordsPerMinute = 120

// defaultMinRate is Config.MinRate's default: 64 lock-step blocks of 512
// bytes a second, a client 15 ms away.
const defaultMinRate = 32 << 10

// openIn runs fn, which opens a transfer's socket, through Config.OpenIn.
func (s *Server) openIn(fn func() error) error {
	if s.cfg.OpenIn != nil {
		return s.cfg.OpenIn(fn)
	}
	return fn()
}

// passOn hands what a single-port transfer socket, just connected, took
// in before its connect to dispatch, as if the listener had read it. The
// socket is bound to the listening port before it is connected, and in
// between it is a second unconnected socket on that port, the newest,
// which Linux prefers: a request another client sent then lands on it.
// Read there as the transfer's own client's new request, it sent that
// client the other one's file (TestSinglePortRequestInBindWindow makes it
// happen every time; tftp/DESIGN.md#bind-window).
// After the connect only the client's own datagrams arrive, so what is
// queued now is all there is to pass on (its resent request is a
// duplicate there).
func (s *Server) passOn(base context.Context, fd int, local netip.Addr) {
	// A request is at most 512 bytes (RFC 2347); a longer datagram comes
	// cut and dispatch counts it malformed. dispatch keeps no part of buf,
	// as with the listener's.
	buf := make([]byte, 4096)
	for range maxPassOn {
		n, from, err := recvQueued(fd, buf)
		if err != nil || from == nil {
			return
		}
		s.passedOn.Add(1)
		s.dispatch(base, buf[:n], *from, local)
	}
}

// maxPassOn bounds passOn: a bind-to-connect window holds a few datagrams
// at most.
const maxPassOn = 64

// newLink opens the socket of one transfer, connected to the client and
// bound to the address the request came to: on a new port, or in
// single-port mode on the listening port. A transfer waits for its ACKs
// on a thread of its own while TransferThreads allow, else in the poller.
func (s *Server) newLink(base, ctx context.Context, peer netip.AddrPort, local netip.Addr) (link, error) {
	if l := s.threadLink(base, ctx, peer, local); l != nil {
		return l, nil
	}
	la := &net.UDPAddr{}
	if local.IsValid() {
		la.IP = local.AsSlice()
	}
	d := net.Dialer{LocalAddr: la}
	if s.cfg.SinglePort {
		la.Port = int(s.Addr().Port())
		d.Control = shareAddr
	}
	var c net.Conn
	dial := func() (err error) {
		c, err = d.DialContext(ctx, "udp4", peer.String())
		return err
	}
	if err := s.openIn(dial); err != nil {
		return nil, err
	}
	uc := c.(*net.UDPConn)
	if s.cfg.SinglePort {
		if rc, err := uc.SyscallConn(); err == nil {
			_ = rc.Control(func(fd uintptr) { s.passOn(base, int(fd), local) })
		}
	}
	stop := context.AfterFunc(ctx, func() { uc.Close() })
	// A window leaves in one sendmmsg call, much cheaper than a write per
	// block (tftp/DESIGN.md#sendmmsg).
	return &connLink{conn: uc, pc: ipv4.NewPacketConn(uc), stop: stop}, nil
}
