package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/pxeperf/pxeperf/record"
	"github.com/pxeperf/pxeperf/report"
	"github.com/pxeperf/pxeperf/stream"
)

// Remote mode (`pxeperf bench --server HOST[:PORT]`): the client side
// only, against a `pxeperf serve` on another machine, without a testbed.
// HTTP fetches GET http://HOST:HTTPPort/File from its HTTP server (the file
// must be in its root: `pxeperf images generate bench.img --size 64MiB`);
// TCP and UDP streams run against its stream server (config bench.enabled,
// or `pxeperf serve --bench-addr :5211`) at HOST:PORT (default 5211).
// MTU, offloads and rate belong to the real link there: a remote sweep
// takes none of them, and its records carry the label remote=HOST.

// DefaultRemoteFile is the image a remote HTTP sweep fetches by default.
const DefaultRemoteFile = "bench.img"

// RemoteOptions configure RunRemote.
type RemoteOptions struct {
	Spec     Spec
	Server   string // HOST[:PORT]; PORT is the stream server's, default stream.DefaultPort
	HTTPPort int    // the HTTP server's port on HOST; default 80
	File     string // HTTP: the image to fetch; default DefaultRemoteFile
	Store    *record.Store
	RunID    string
	Logger   *slog.Logger
	Progress func(Progress)
	Verbose  io.Writer
	// MeasuredBy is stamped on every record (server.name, server.site).
	MeasuredBy Origin
}

// RemoteSpec checks that s can run remotely and drops the testbed's knobs
// (one MTU, no rate, no offload change) so each setting runs once.
func RemoteSpec(s Spec) (Spec, error) {
	if s.Proto == ProtoTFTP {
		return s, errors.New("remote mode runs http, tcp and udp; --proto tftp needs the testbed")
	}
	if len(s.MTUs) > 1 || len(s.Rates) > 1 || (len(s.Rates) == 1 && s.Rates[0] != 0) {
		return s, errors.New("--server: MTU and rate belong to the real link; drop --mtu and --rate (or run without --server on a testbed)")
	}
	s.Offloads, s.Rates = []bool{true}, []uint64{0}
	if len(s.MTUs) == 0 {
		s.MTUs = []int{1500}
	}
	return s, s.Validate()
}

// RunRemote runs opt.Spec against a pxeperf serve at opt.Server, one
// record per fetch or stream run, as Run does on a testbed.
func RunRemote(ctx context.Context, opt RemoteOptions) ([]Result, error) {
	so := sweepOptions{store: opt.Store, runID: opt.RunID, by: opt.MeasuredBy, log: opt.Logger, progress: opt.Progress, verbose: opt.Verbose}
	if err := so.fill(opt.Spec.Proto); err != nil {
		return nil, err
	}
	spec, err := RemoteSpec(opt.Spec)
	if err != nil {
		return nil, err
	}
	opt.RunID = so.runID
	host, port := opt.Server, strconv.Itoa(stream.DefaultPort)
	if h, p, err := net.SplitHostPort(opt.Server); err == nil {
		host, port = h, p
	}
	if host == "" {
		return nil, fmt.Errorf("--server %q: give a host name or address, e.g. --server 192.168.50.1", opt.Server)
	}
	if opt.HTTPPort == 0 {
		opt.HTTPPort = 80
	}
	if opt.File == "" {
		opt.File = DefaultRemoteFile
	}
	streamAddr := net.JoinHostPort(host, port)
	url := "http://" + net.JoinHostPort(host, strconv.Itoa(opt.HTTPPort)) + "/" + opt.File

	var d driver = &remoteHTTP{host: host, url: url, file: opt.File, runID: opt.RunID}
	if spec.Proto == ProtoStream {
		d = &remoteStreams{host: host, addr: streamAddr, runID: opt.RunID}
	}
	return sweep(ctx, so, spec.Points(), d)
}

// remoteHTTP fetches an image from a remote pxeperf serve's HTTP server.
type remoteHTTP struct {
	host, url, file, runID string
}

func (d *remoteHTTP) point(ctx context.Context, p Point) (*record.Record, []record.Interval, int, error) {
	rec, rcvbuf := remoteFetch(ctx, d.url, d.file, p)
	remoteLabels(rec, d.runID, d.host)
	return rec, nil, rcvbuf, nil
}

func (d *remoteHTTP) verbose(w io.Writer, res Result) { remoteVerbose(w, d.host, res) }

// remoteStreams runs TCP and UDP streams against a remote stream server.
type remoteStreams struct {
	host, addr, runID string
}

func (d *remoteStreams) point(ctx context.Context, p Point) (*record.Record, []record.Interval, int, error) {
	begin := time.Now()
	res, err := runStream(ctx, p, streamConfig(d.addr, p))
	if err != nil && ctx.Err() != nil {
		return nil, nil, 0, err
	}
	rec, ivs := streamRecord(p, res, err, begin)
	remoteLabels(rec, d.runID, d.host)
	return rec, ivs, 0, nil
}

func (d *remoteStreams) verbose(w io.Writer, res Result) { remoteVerbose(w, d.host, res) }

// remoteLabels stamps a remote record: the run and the host; the rate is
// the real link's, not the bench's.
func remoteLabels(rec *record.Record, runID, host string) {
	rec.Labels[LabelRun], rec.Labels[LabelRemote] = runID, host
	delete(rec.Labels, "rate")
}

func remoteVerbose(w io.Writer, host string, res Result) {
	p, rec := res.Point, res.Record
	fmt.Fprintf(w, "\n%s %s (rep %d): %.1f Mbit/s, %d bytes in %v\n", host, p.Key(), p.Rep, rec.Mbps, rec.Bytes, rec.Duration.Round(time.Millisecond))
	if len(res.Intervals) > 0 {
		io.WriteString(w, report.Intervals(rec, res.Intervals).Layout)
	}
}

// remoteFetch GETs url on a fresh connection with SO_RCVBUF set before
// connect (p.Window; auto: not set) and reads the body to the end. The
// server's own record of it is the remote's; this one is the client's
// view, through fetchRecord as a testbed fetch's.
func remoteFetch(ctx context.Context, url, file string, p Point) (*record.Record, int) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	rcvbuf := 0
	d := rcvbufDialer(p.Window, &rcvbuf)
	c := clientFetch{proto: ProtoHTTP, file: file, size: -1, serverless: true}
	res := httpGet{url: url, dial: d.DialContext, doHint: " (is `pxeperf serve` running there with HTTP on?)",
		onResponse: func(resp *http.Response) error {
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("GET %s: %s (put the file in the server's root: pxeperf images generate %s --size 64MiB)", url, resp.Status, DefaultRemoteFile)
			}
			c.size = resp.ContentLength
			return nil
		}}.do(ctx)
	c.start, c.dur, c.bytes, c.err = res.sent, res.dur, res.bytes, res.err
	rec, _ := fetchRecord(nil, c)
	rec.WndRequested, rec.Rcvbuf = uint32(p.Window), rcvbuf
	rec.Labels = map[string]string{"window": FormatWindow(p.Window)}
	return &rec, rcvbuf
}

var (
	_ driver = (*remoteHTTP)(nil)
	_ driver = (*remoteStreams)(nil)
)
