package perfsrv

import (
	"encoding/binary"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/testenv"
)

const testCookie = "abcdefghijklmnopqrstuvwxyz234567abcd"

func dialCtl(t *testing.T, s *Iperf3) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", s.Addr().String(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

func sendCookie(t *testing.T, c net.Conn, ck string) {
	t.Helper()
	if _, err := c.Write(append([]byte(ck), 0)); err != nil {
		t.Fatal(err)
	}
}

func readState(t *testing.T, c net.Conn) int {
	t.Helper()
	var b [1]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		t.Fatalf("reading a state: %v", err)
	}
	return int(int8(b[0]))
}

func sendJSON(t *testing.T, c net.Conn, b []byte) {
	t.Helper()
	msg := binary.BigEndian.AppendUint32(nil, uint32(len(b)))
	if _, err := c.Write(append(msg, b...)); err != nil {
		t.Fatal(err)
	}
}

// wantServerError reads SERVER_ERROR and its i_errno.
func wantServerError(t *testing.T, c net.Conn, ie int) {
	t.Helper()
	if st := readState(t, c); st != stateServerError {
		t.Fatalf("state %d, want SERVER_ERROR", st)
	}
	var b [8]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		t.Fatal(err)
	}
	if got := int(binary.BigEndian.Uint32(b[:])); got != ie {
		t.Errorf("i_errno %d, want %d", got, ie)
	}
}

func wantLog(t *testing.T, s *Iperf3, lg *syncLog, text string) {
	t.Helper()
	if !testenv.WaitFor(5*time.Second, func() bool { return strings.Contains(lg.String(), text) && s.Running() == 0 }) {
		t.Errorf("log lacks %q or tests still running (%d):\n%s", text, s.Running(), lg.String())
	}
}

func TestIperf3BadInput(t *testing.T) {
	params := func(m map[string]any) []byte { b, _ := json.Marshal(m); return b }
	t.Run("not a cookie", func(t *testing.T) {
		s, _, lg := startIperf3(t, Limits{})
		c := dialCtl(t, s)
		_, _ = c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\nxxxxxxxxxx"))
		if _, err := io.ReadFull(c, make([]byte, 1)); err == nil {
			t.Error("server answered a non-iperf3 client")
		}
		wantLog(t, s, lg, "not an iperf3 cookie")
	})
	t.Run("garbage JSON", func(t *testing.T) {
		s, rec, lg := startIperf3(t, Limits{})
		c := dialCtl(t, s)
		sendCookie(t, c, testCookie)
		if st := readState(t, c); st != stateParamExchange {
			t.Fatalf("state %d", st)
		}
		sendJSON(t, c, []byte("{{{{ not json"))
		wantServerError(t, c, ieRecvParams)
		wantLog(t, s, lg, "bad parameters")
		if fs, _ := rec.Snapshot(); len(fs) != 0 {
			t.Errorf("records for a refused test: %d", len(fs))
		}
	})
	t.Run("over-cap rate", func(t *testing.T) {
		s, _, lg := startIperf3(t, Limits{MaxRate: 1e9})
		c := dialCtl(t, s)
		sendCookie(t, c, testCookie)
		readState(t, c)
		sendJSON(t, c, params(map[string]any{"udp": true, "time": 2, "parallel": 2, "bandwidth": 800e6, "len": 1448}))
		wantServerError(t, c, ieTotalRate)
		wantLog(t, s, lg, "over cap")
	})
	t.Run("over-cap duration", func(t *testing.T) {
		s, _, lg := startIperf3(t, Limits{MaxDuration: 5 * time.Second})
		c := dialCtl(t, s)
		sendCookie(t, c, testCookie)
		readState(t, c)
		sendJSON(t, c, params(map[string]any{"tcp": true, "time": 10}))
		wantServerError(t, c, ieInitTest)
		wantLog(t, s, lg, "at most 5s per test")
	})
	t.Run("busy per client", func(t *testing.T) {
		s, _, lg := startIperf3(t, Limits{MaxPerClient: 1})
		c := dialCtl(t, s)
		sendCookie(t, c, testCookie)
		readState(t, c)
		sendJSON(t, c, params(map[string]any{"tcp": true, "time": 30, "reverse": true}))
		readState(t, c)
		d := dialCtl(t, s)
		sendCookie(t, d, testCookie)
		if a, b := readState(t, c), readState(t, c); a != stateTestStart || b != stateTestRunning {
			t.Fatalf("states %d %d", a, b)
		}
		// A started test does not give way, however long its wait.
		time.Sleep(setupIdle + 100*time.Millisecond)
		c2 := dialCtl(t, s)
		sendCookie(t, c2, "bbcdefghijklmnopqrstuvwxyz234567abcd")
		if st := readState(t, c2); st != stateAccessDenied {
			t.Errorf("second test: state %d, want ACCESS_DENIED", st)
		}
		c.Close()
		d.Close()
		wantLog(t, s, lg, "refused: iperf3: busy")
	})
	t.Run("idle set-up gives way", func(t *testing.T) {
		s, _, lg := startIperf3(t, Limits{MaxPerClient: 1})
		c := dialCtl(t, s)
		sendCookie(t, c, testCookie)
		readState(t, c) // the first test never sends its parameters
		c2 := dialCtl(t, s)
		sendCookie(t, c2, "bbcdefghijklmnopqrstuvwxyz234567abcd")
		if st := readState(t, c2); st != stateParamExchange {
			t.Errorf("second test: state %d, want PARAM_EXCHANGE once the first went %s idle", st, setupIdle)
		}
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Errorf("the idle first test's connection is still open")
		}
		wantLog(t, s, lg, "test idle in set-up gave its slot to a new test")
	})
	t.Run("set-ups per client", func(t *testing.T) {
		// Streams wait 10 s, past the third test's 3 s wait for its turn.
		lg := &syncLog{}
		s, err := NewIperf3(Config{Addr: "127.0.0.1:0", SetupTimeout: 10 * time.Second, Log: slog.New(slog.NewTextHandler(lg, nil))})
		if err != nil {
			t.Fatal(err)
		}
		serveUntilCleanup(t, s.Serve, lg)
		for i := range maxSetupPerAddr {
			c := dialCtl(t, s)
			sendCookie(t, c, strings.Repeat(string(rune('a'+i)), 36))
			readState(t, c)
			// Its streams never come: it waits SetupTimeout.
			sendJSON(t, c, params(map[string]any{"tcp": true, "time": 2}))
			readState(t, c)
		}
		c := dialCtl(t, s)
		sendCookie(t, c, "zzzdefghijklmnopqrstuvwxyz234567abcd")
		if st := readState(t, c); st != stateAccessDenied {
			t.Errorf("test over %d in set-up from one client: state %d, want ACCESS_DENIED after its wait", maxSetupPerAddr, st)
		}
		if text := "refused: iperf3: busy (tests in set-up from this client)"; !strings.Contains(lg.String(), text) {
			t.Errorf("log lacks %q:\n%s", text, lg.String())
		}
	})
	t.Run("vanishes mid-test", func(t *testing.T) {
		s, rec, lg := startIperf3(t, Limits{})
		c := dialCtl(t, s)
		sendCookie(t, c, testCookie)
		readState(t, c)
		sendJSON(t, c, params(map[string]any{"tcp": true, "time": 30, "reverse": true}))
		if st := readState(t, c); st != stateCreateStreams {
			t.Fatalf("state %d, want CREATE_STREAMS", st)
		}
		d := dialCtl(t, s)
		sendCookie(t, d, testCookie)
		if a, b := readState(t, c), readState(t, c); a != stateTestStart || b != stateTestRunning {
			t.Fatalf("states %d %d", a, b)
		}
		_, _ = io.ReadFull(d, make([]byte, 1<<20)) // the server sends
		c.Close()
		d.Close()
		wantLog(t, s, lg, "client vanished mid-test")
		fs, _ := rec.Snapshot()
		if len(fs) != 1 || fs[0].Outcome != "aborted" {
			t.Errorf("events %+v", fs)
		}
	})
	t.Run("streams never come", func(t *testing.T) {
		s, _, lg := startIperf3(t, Limits{})
		c := dialCtl(t, s)
		sendCookie(t, c, testCookie)
		readState(t, c)
		sendJSON(t, c, params(map[string]any{"tcp": true, "time": 2, "parallel": 2}))
		readState(t, c)
		d := dialCtl(t, s)
		sendCookie(t, d, "zzzdefghijklmnopqrstuvwxyz234567abcd") // a stream with a wrong cookie
		wantServerError(t, c, ieStreamAccept)
		wantLog(t, s, lg, "streams did not arrive")
	})
}

func FuzzParseParams(f *testing.F) {
	f.Add([]byte(`{"tcp":true,"omit":0,"time":10,"num":0,"blockcount":0,"parallel":1,"len":131072,"pacing_timer":1000,"client_version":"3.12"}`))
	f.Add([]byte(`{"udp":true,"time":3,"parallel":4,"reverse":true,"bandwidth":100000000,"len":1448,"udp_counters_64bit":1}`))
	f.Add([]byte(`{"tcp":true,"num":1e30,"window":-5}`))
	f.Add([]byte(`[1,2,3]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParseParams(b)
		if err != nil {
			return
		}
		if p.Parallel < 1 || p.TCP == p.UDP || p.Bytes < 0 || p.Bandwidth < 0 || p.Window < 0 {
			t.Errorf("accepted out-of-range parameters %+v from %q", p, b)
		}
		_, _ = parseResults(b)
	})
}
