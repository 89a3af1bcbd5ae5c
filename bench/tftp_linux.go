package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/pxeperf/pxeperf/bootcfg"
	"github.com/pxeperf/pxeperf/images"
	"github.com/pxeperf/pxeperf/netlab"
	"github.com/pxeperf/pxeperf/record"
	"github.com/pxeperf/pxeperf/tftp"
	"golang.org/x/sys/unix"
)

// tftpRcvbuf is the client socket's SO_RCVBUF asked for: room for a
// 64-block window of 1468-byte blocks several times over, so the Go client's
// scheduling on a busy host does not drop what a board's NIC ring would
// hold (the kernel caps it at net.core.rmem_max; read back into a label).
const tftpRcvbuf = 1 << 20

// testbedTFTP fetches the image from pxeperf's tftp server in the server
// namespace with the bench's TFTP client (tftp.Get) in the client
// namespace, one record per fetch.
type testbedTFTP struct {
	*runner
	sink   *matcher
	server netip.AddrPort
}

// startTFTP starts pxeperf's tftp server in the server namespace, serving
// the generated image.
func startTFTP(ctx context.Context, r *runner, store *images.Store) (driver, func(), error) {
	sink := newMatcher()
	tb := r.tb
	cfg := tftp.Config{
		Listen:    netip.AddrPortFrom(tb.ServerIP, 0).String(),
		Interface: tb.ServerIf,
		// The largest MTU of the sweep: Validate keeps every blksize
		// within each MTU, so the server never lowers one.
		MTU:           slices.Max(r.opt.Spec.MTUs),
		MaxWindowSize: tftp.MaxWindowSize,
		ShutdownGrace: time.Second,
		Files:         bootcfg.RootOnly(store),
		Sink:          r.tee(sink),
		Logger:        r.log.With("svc", "tftp"),
		// Transfer sockets open in the server namespace too.
		OpenIn: func(fn func() error) error { return tb.Run(netlab.Server, fn) },
	}
	var srv *tftp.Server
	err := tb.Run(netlab.Server, func() error {
		var err error
		srv, err = tftp.New(cfg)
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("bench: starting the TFTP server in the testbed: %w", err)
	}
	stop := serveInBackground(ctx, r.log, "tftp", srv.Serve)
	return &testbedTFTP{runner: r, sink: sink, server: srv.Addr()}, stop, nil
}

// verbose prints the fetch's counts, the server's and the client's.
func (r *testbedTFTP) verbose(w io.Writer, res Result) {
	p, rec := res.Point, res.Record
	fmt.Fprintf(w, "%s (rep %d): %.1f Mbit/s, %d bytes in %v; server sent %d datagrams, %d again, %d timeouts, window %d/%d/%d, %d loss events, RTT %v; client: %d duplicates, %d out of order, %d early ACKs, %d timeouts\n",
		p.Key(), p.Rep, rec.Mbps, rec.Bytes, rec.Duration.Round(time.Millisecond), rec.Datagrams, rec.Retransmits, rec.Timeouts,
		rec.EffWndMin, rec.EffWndMedian, rec.EffWndMax, rec.LossEvents, rec.RTT,
		rec.ClientDuplicates, rec.ClientOutOfOrder, rec.ClientEarlyACKs, rec.ClientTimeouts)
}

// point sets the testbed up for p and runs one TFTP fetch.
func (r *testbedTFTP) point(ctx context.Context, p Point) (*record.Record, []record.Interval, int, error) {
	server := r.server
	st, err := r.setup(p)
	if err != nil {
		return nil, nil, 0, err
	}
	var conn *net.UDPConn
	err = r.tb.Run(netlab.Client, func() error {
		var err error
		conn, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(r.tb.ClientIP, 0)))
		return err
	})
	if err != nil {
		return nil, nil, 0, fmt.Errorf("client socket: %w", err)
	}
	defer conn.Close()
	_ = conn.SetReadBuffer(tftpRcvbuf)
	rcvbuf := readRcvbuf(conn)
	local := conn.LocalAddr().(*net.UDPAddr).AddrPort()
	wait := r.sink.expect(local)
	defer r.sink.forget(local)

	fctx, cancel := context.WithTimeout(ctx, fetchTimeout(p))
	defer cancel()
	cpu0 := processCPU()
	cs, ferr := tftp.Get(fctx, conn, server, imageName, io.Discard, tftp.ClientOptions{
		BlkSize: p.BlkSize, WindowSize: p.WindowSize, Logger: r.log})
	// The server emits its event when the last ACK arrives: at once, or
	// after its retries when that ACK was lost.
	fetch := r.sink.await(ctx, wait, local, 10*time.Second, r.log)
	cpu := processCPU() - cpu0
	// A fetch the sweep's own cancel broke is not a measurement, whether
	// or not the server's event for the aborted transfer raced in.
	if ferr != nil && ctx.Err() != nil {
		return nil, nil, 0, ferr
	}

	// The server's event (what it sent, resent and timed out on, its
	// effective window, loss events and RTT) through the one event ->
	// record conversion; the client's view and counts and the testbed on
	// top.
	rec, _ := fetchRecord(fetch, clientFetch{proto: ProtoTFTP, file: imageName, start: cs.Start, bytes: cs.Bytes,
		size: p.Size, dur: cs.Duration, err: ferr})
	rec.BlkSize, rec.WindowSize, rec.TSize = cs.BlkSize, cs.WindowSize, cs.TSize >= 0
	rec.ClientDuplicates, rec.ClientOutOfOrder, rec.ClientEarlyACKs, rec.ClientTimeouts = cs.Duplicates, cs.OutOfOrder, cs.EarlyACKs, cs.Timeouts
	rec.Rcvbuf, rec.CPU = rcvbuf, cpu
	if rec.Labels == nil {
		rec.Labels = map[string]string{}
	}
	rec.Labels["rate"], rec.Labels[LabelBlkSize], rec.Labels[LabelWindowSize] = FormatRate(p.Rate), strconv.Itoa(p.BlkSize), strconv.Itoa(p.WindowSize)
	stampTestbed(&rec, r.runner, st, p)
	return &rec, nil, rcvbuf, nil
}

// readRcvbuf reads SO_RCVBUF back (0 when it cannot be read).
func readRcvbuf(c *net.UDPConn) int {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0
	}
	var n int
	var serr error
	if err := rc.Control(func(fd uintptr) { n, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF) }); err != nil || serr != nil {
		return 0
	}
	return n
}

// processCPU is the user and system CPU the process used so far.
func processCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
