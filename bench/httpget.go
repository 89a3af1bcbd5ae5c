package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"syscall"
	"time"

	"github.com/pxeperf/pxeperf/internal/sockopt"
)

// httpGet is one GET of the bench's HTTP client, on a testbed (goFetch)
// or against a remote serve (remoteFetch): the same request and body loop
// for both, only the dialer differs.
type httpGet struct {
	url string
	// dial opens the connection: in the client namespace, or plain.
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// doHint is added to the error of a request that got no response.
	doHint string
	// onResponse, when set, sees the response before the body is read;
	// an error from it ends the GET there, the body unread.
	onResponse func(*http.Response) error
}

// getResult is the client's view of one GET.
type getResult struct {
	sent   time.Time     // just before the request went out
	start  time.Time     // the request written, once the body was read (else sent)
	dur    time.Duration // start to the last byte; 0 when the body was not read
	bytes  int64
	code   int    // the response's status code; 0 without a response
	status string // the response's status line ("404 Not Found")
	err    error
}

// do sends the GET on a fresh connection (no keep-alive, no compression)
// and reads the body to the end.
func (g httpGet) do(ctx context.Context) (res getResult) {
	tr := &http.Transport{DisableKeepAlives: true, DisableCompression: true, DialContext: g.dial}
	defer tr.CloseIdleConnections()
	var wrote time.Time
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { wrote = time.Now() },
	}), http.MethodGet, g.url, nil)
	if err != nil {
		res.err = err
		return res
	}
	res.sent = time.Now()
	res.start = res.sent
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		res.err = fmt.Errorf("GET %s: %w%s", g.url, err, g.doHint)
		return res
	}
	defer resp.Body.Close()
	res.code, res.status = resp.StatusCode, resp.Status
	if g.onResponse != nil {
		if res.err = g.onResponse(resp); res.err != nil {
			return res
		}
	}
	res.bytes, res.err = readBody(resp.Body)
	end := time.Now()
	if !wrote.IsZero() {
		res.start = wrote
	}
	res.dur = end.Sub(res.start)
	return res
}

// readBody reads body to the end in 256 KiB reads and counts the bytes.
func readBody(body io.Reader) (int64, error) {
	var n int64
	buf := make([]byte, 256<<10)
	for {
		m, err := body.Read(buf)
		n += int64(m)
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("reading the body: %w", err)
		}
	}
}

// rcvbufDialer sets SO_RCVBUF to window before connect (WindowAuto leaves
// the kernel's autotuning alone) and reads back what the kernel made of it
// into got (it doubles the value asked for): setRcvbuf, the one setter.
func rcvbufDialer(window int, got *int) net.Dialer {
	return net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return sockopt.Control(c, func(fd uintptr) (err error) {
			*got, err = setRcvbuf(fd, window)
			return err
		})
	}}
}
