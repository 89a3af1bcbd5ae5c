package httpboot

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// getHealthz is a keep-alive request for /healthz, as sent raw.
const getHealthz = "GET /healthz HTTP/1.1\r\nHost: pxeperf\r\n\r\n"

// dialFrom opens a connection to addr from the loopback address
// 127.0.0.src; it is closed at the end of the test.
func dialFrom(t *testing.T, addr string, src byte) net.Conn {
	t.Helper()
	c, err := dialFromErr(addr, src)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func dialFromErr(addr string, src byte) (net.Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, src)}}
	return d.Dial("tcp", addr)
}

// answer sends req on c (nothing when empty) and reads one response,
// body and all, waiting at most 10 s.
func answer(c net.Conn, req string) (*http.Response, string, error) {
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if req != "" {
		if _, err := io.WriteString(c, req); err != nil {
			return nil, "", err
		}
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, "", err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b), err
}

// TestConnsReconnectAtOnce: a client at its cap (32) that closes its
// keep-alive connections and at once opens as many new ones is served on
// all of them, round after round. Deciding at accept lost some (the old
// ones' close had not run yet); see connLimiter.
func TestConnsReconnectAtOnce(t *testing.T) {
	e := newTestEnv(t, envOpts{})
	addr := strings.TrimPrefix(e.url, "http://")
	const n, rounds = DefaultMaxConnsPerClient, 10
	batch := make([]net.Conn, n)
	for i := range batch {
		batch[i] = dialFrom(t, addr, 5)
		if resp, _, err := answer(batch[i], getHealthz); err != nil || resp.StatusCode != 200 {
			t.Fatalf("connection %d: %v %v", i, resp, err)
		}
	}
	failed := 0
	for round := range rounds {
		for _, c := range batch {
			c.Close()
		}
		var mu sync.Mutex
		var why []string
		var wg sync.WaitGroup
		for i := range batch {
			wg.Go(func() {
				c, err := dialFromErr(addr, 5)
				if err == nil {
					var resp *http.Response
					if resp, _, err = answer(c, getHealthz); err == nil && resp.StatusCode != 200 {
						err = &statusError{resp.StatusCode}
					}
				}
				mu.Lock()
				defer mu.Unlock()
				batch[i] = c
				if err != nil {
					why = append(why, err.Error())
				}
			})
		}
		wg.Wait()
		for _, c := range batch {
			if c != nil {
				t.Cleanup(func() { c.Close() })
			}
		}
		if len(why) > 0 {
			t.Logf("round %d: %d of %d new connections not served: %s", round, len(why), n, why[0])
		}
		failed += len(why)
		for i, c := range batch {
			if c == nil { // not even dialed: the round cannot go on
				t.Fatalf("round %d: connection %d not dialed", round, i)
			}
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d reconnections not served (%d rounds of %d)", failed, rounds*n, rounds, n)
	}
}

type statusError struct{ code int }

func (e *statusError) Error() string { return "status " + http.StatusText(e.code) }
