package tftp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	pin "github.com/pin/tftp/v3"
	"github.com/pxeperf/pxeperf/bootcfg"
	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/hosts"
	"github.com/pxeperf/pxeperf/images"
	"github.com/pxeperf/pxeperf/internal/testkit/servetest"
	"github.com/pxeperf/pxeperf/internal/testkit/testenv"
)

// testServer is a Server on loopback port 0 serving a temporary root.
type testServer struct {
	*Server
	root string
	rec  *event.Recorder
}

// startServer serves dir (a fresh root when "") with cfg's tunables until
// the test ends.
func startServer(t testing.TB, cfg Config) *testServer {
	t.Helper()
	root := t.TempDir()
	store, err := images.Open(root, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	rec := &event.Recorder{}
	cfg.Listen = "127.0.0.1:0"
	if cfg.MTU == 0 {
		cfg.MTU = 1500
	}
	cfg.Files, cfg.Sink = bootcfg.RootOnly(store), rec
	if cfg.Timeout == 0 {
		cfg.Timeout = time.Second
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	servetest.Run(t, "tftp", 40*time.Second, s.Serve)
	return &testServer{Server: s, root: root, rec: rec}
}

// file writes a pseudo-random file of n bytes into the root.
func (ts *testServer) file(t testing.TB, name string, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	x := uint64(n) | 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
	p := filepath.Join(ts.root, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return b
}

// fetches waits (10 s at most) until n fetch events arrived and returns them.
func (ts *testServer) fetches(t *testing.T, n int) []event.Fetch {
	t.Helper()
	f, ok := ts.rec.WaitFetches(n, 10*time.Second)
	if !ok {
		t.Fatalf("got %d fetch events, want %d: %+v", len(f), n, f)
	}
	return f
}

// rawClient is a UDP socket speaking TFTP by hand.
type rawClient struct {
	t    *testing.T
	conn *net.UDPConn
	srv  netip.AddrPort
}

func newRawClient(t *testing.T, srv netip.AddrPort) *rawClient {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawClient{t: t, conn: c, srv: srv}
}

func (c *rawClient) send(to netip.AddrPort, b []byte) {
	c.t.Helper()
	if _, err := c.conn.WriteToUDPAddrPort(b, to); err != nil {
		c.t.Fatal(err)
	}
}

// recv returns the next packet and its source, failing after 5 s.
func (c *rawClient) recv() ([]byte, netip.AddrPort) {
	c.t.Helper()
	b := make([]byte, 70000)
	_ = c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, from, err := c.conn.ReadFromUDPAddrPort(b)
	if err != nil {
		c.t.Fatalf("no reply from the server: %v", err)
	}
	return b[:n], from
}

// quiet reports whether nothing arrives for d.
func (c *rawClient) quiet(d time.Duration) bool {
	b := make([]byte, 70000)
	_ = c.conn.SetReadDeadline(time.Now().Add(d))
	_, _, err := c.conn.ReadFromUDPAddrPort(b)
	return errors.Is(err, os.ErrDeadlineExceeded)
}

// oneBlock reads past other packets (a transfer still sending) until the
// one-block file body arrives as DATA 1, and acknowledges it; the file is
// named for the failure.
func (c *rawClient) oneBlock(name string, body []byte) {
	c.t.Helper()
	for i := 0; ; i++ {
		b, from := c.recv()
		if len(b) == 4+len(body) && bytes.Equal(b[4:], body) {
			c.send(from, ack(1))
			return
		}
		if i > 5 {
			c.t.Fatalf("file %s never came", name)
		}
	}
}

func ack(block uint16) []byte { return binary.BigEndian.AppendUint16([]byte{0, opACK}, block) }

// oackOpts parses an OACK packet into a map.
func oackOpts(t *testing.T, b []byte) map[string]string {
	t.Helper()
	if len(b) < 2 || binary.BigEndian.Uint16(b) != opOACK {
		t.Fatalf("want an OACK, got % x", b[:min(len(b), 16)])
	}
	m := map[string]string{}
	f := bytes.Split(bytes.TrimSuffix(b[2:], []byte{0}), []byte{0})
	for i := 0; i+1 < len(f); i += 2 {
		m[string(f[i])] = string(f[i+1])
	}
	return m
}

// errCode returns the code of an ERROR packet, failing on anything else.
func errCode(t *testing.T, b []byte) uint16 {
	t.Helper()
	if len(b) < 4 || binary.BigEndian.Uint16(b) != opERROR {
		t.Fatalf("want an ERROR, got % x", b[:min(len(b), 16)])
	}
	return binary.BigEndian.Uint16(b[2:])
}

// ignoreTimes drops fields that vary run to run.
var ignoreTimes = cmpopts.IgnoreFields(event.Fetch{}, "Start", "Duration", "Client", "Local", "Err")

func TestFetchWithPinClient(t *testing.T) {
	ts := startServer(t, Config{})
	sizes := map[string]int{"empty": 0, "small": 700, "exact512": 512 * 4, "exact1468": 1468 * 3, "big": 3<<20 + 17}
	files := map[string][]byte{}
	for name, n := range sizes {
		files[name] = ts.file(t, name, n)
	}
	tests := map[string]struct {
		blksize   int // 0: no blksize option
		tsize     bool
		wantBlock int
	}{
		"plain RFC 1350":          {wantBlock: 512},
		"tsize only":              {tsize: true, wantBlock: 512},
		"blksize 1468":            {blksize: 1468, tsize: true, wantBlock: 1468},
		"blksize over MTU capped": {blksize: 9000, tsize: true, wantBlock: 1468},
		"blksize 1024":            {blksize: 1024, wantBlock: 1024},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			for file, want := range files {
				before, _ := ts.rec.Snapshot()
				c, err := pin.NewClient(ts.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				c.SetTimeout(2 * time.Second)
				if tc.blksize != 0 {
					c.SetBlockSize(tc.blksize)
				}
				c.RequestTSize(tc.tsize)
				wt, err := c.Receive(file, "octet")
				if err != nil {
					t.Fatalf("%s: %v", file, err)
				}
				if tc.tsize {
					n, ok := wt.(pin.IncomingTransfer).Size()
					if !ok || n != int64(len(want)) {
						t.Errorf("%s: tsize = %d, %v; want %d", file, n, ok, len(want))
					}
				}
				var got bytes.Buffer
				if _, err := wt.WriteTo(&got); err != nil {
					t.Fatalf("%s: %v", file, err)
				}
				if !bytes.Equal(got.Bytes(), want) {
					t.Fatalf("%s: got %d bytes, want %d (content differs)", file, got.Len(), len(want))
				}
				ev := ts.fetches(t, len(before)+1)[len(before)]
				blocks := int64(len(want)/tc.wantBlock + 1)
				wantEv := event.Fetch{
					Proto: event.ProtoTFTP, File: file, Bytes: int64(len(want)), Size: int64(len(want)),
					Outcome: event.OutcomeOK,
					TFTP: &event.TFTPInfo{BlockSize: tc.wantBlock, WindowSize: 1, TSize: tc.tsize,
						Timeout: time.Second, Datagrams: blocks + ev.TFTP.Retransmits,
						Retransmits: ev.TFTP.Retransmits, Timeouts: ev.TFTP.Timeouts},
				}
				if diff := cmp.Diff(wantEv, ev, ignoreTimes); diff != "" {
					t.Errorf("%s: event (-want +got):\n%s", file, diff)
				}
				if ev.Client.Addr() != netip.MustParseAddr("127.0.0.1") {
					t.Errorf("event client %v, want 127.0.0.1", ev.Client)
				}
			}
		})
	}
}

func TestOptionsOnTheWire(t *testing.T) {
	tests := map[string]struct {
		cfg      Config
		opts     []string
		wantOACK map[string]string // nil: expect DATA block 1 at once
	}{
		"no options: no OACK":          {wantOACK: nil},
		"unsupported options: no OACK": {opts: []string{"multicast", "", "rollover", "0", "windowsize", "0"}},
		"blksize capped at MTU 1500": {
			opts:     []string{"blksize", "65464", "tsize", "0"},
			wantOACK: map[string]string{"blksize": "1468", "tsize": "5000"},
		},
		"blksize capped at jumbo MTU": {
			cfg:      Config{MTU: 9000},
			opts:     []string{"blksize", "65464"},
			wantOACK: map[string]string{"blksize": "8968"},
		},
		"blksize capped by config": {
			cfg:      Config{MaxBlockSize: 1024},
			opts:     []string{"blksize", "1468", "timeout", "1"},
			wantOACK: map[string]string{"blksize": "1024", "timeout": "1"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ts := startServer(t, tc.cfg)
			want := ts.file(t, "f", 5000)
			c := newRawClient(t, ts.Addr())
			c.send(ts.Addr(), rq(opRRQ, append([]string{"f", "octet"}, tc.opts...)...))
			b, from := c.recv()
			if from == ts.Addr() {
				t.Errorf("transfer answered from the listening port %v; want a new TID", from)
			}
			blk := 512
			if tc.wantOACK != nil {
				if diff := cmp.Diff(tc.wantOACK, oackOpts(t, b)); diff != "" {
					t.Fatalf("OACK (-want +got):\n%s", diff)
				}
				blk, _ = strconv.Atoi(tc.wantOACK["blksize"])
				if blk == 0 {
					blk = 512
				}
				c.send(from, ack(0))
				b, _ = c.recv()
			}
			var got []byte
			for block := uint16(1); ; block++ {
				if binary.BigEndian.Uint16(b) != opDATA || binary.BigEndian.Uint16(b[2:]) != block {
					t.Fatalf("want DATA %d, got % x", block, b[:min(len(b), 8)])
				}
				got = append(got, b[4:]...)
				c.send(from, ack(block))
				if len(b)-4 < blk {
					break
				}
				if len(b)-4 != blk {
					t.Fatalf("DATA %d carries %d bytes, want %d", block, len(b)-4, blk)
				}
				b, _ = c.recv()
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("got %d bytes, want %d", len(got), len(want))
			}
			ev := ts.fetches(t, 1)[0]
			if ev.Outcome != event.OutcomeOK || ev.Bytes != 5000 || ev.TFTP.BlockSize != blk {
				t.Errorf("event %+v %+v; want ok, 5000 bytes, blksize %d", ev, ev.TFTP, blk)
			}
		})
	}
}

func TestWriteRefused(t *testing.T) {
	ts := startServer(t, Config{})
	c := newRawClient(t, ts.Addr())
	c.send(ts.Addr(), rq(opWRQ, "upload.bin", "octet", "blksize", "1468"))
	b, _ := c.recv()
	if code := errCode(t, b); code != errAccess {
		t.Errorf("WRQ answered with error %d, want %d (access violation)", code, errAccess)
	}
	ev := ts.fetches(t, 1)[0]
	if ev.Outcome != event.OutcomeDenied || ev.File != "upload.bin" {
		t.Errorf("event %+v; want outcome denied for upload.bin", ev)
	}
	if _, err := os.Stat(filepath.Join(ts.root, "upload.bin")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("upload.bin exists after a refused write: %v", err)
	}
	// pin/tftp's client sees the refusal too.
	pc, _ := pin.NewClient(ts.Addr().String())
	pc.SetTimeout(2 * time.Second)
	if _, err := pc.Send("upload.bin", "octet"); err == nil || !strings.Contains(err.Error(), "code=2") {
		t.Errorf("pin client Send: %v; want error code 2", err)
	}
}

// TestMissingFilesInARow mimics U-Boot's `pxe get`, which asks for about 11
// config names in a row: each must be answered with "file not found" at once
// (never left to time out), from one client socket.
func TestMissingFilesInARow(t *testing.T) {
	ts := startServer(t, Config{})
	c := newRawClient(t, ts.Addr())
	var names []string
	for i := range 11 {
		name := fmt.Sprintf("pxelinux.cfg/01-52-54-00-12-34-%02x", i)
		names = append(names, name)
		c.send(ts.Addr(), rq(opRRQ, name, "octet", "tsize", "0", "blksize", "1468"))
		b, _ := c.recv()
		if code := errCode(t, b); code != errNotFound {
			t.Fatalf("%s: error %d, want %d (file not found)", name, code, errNotFound)
		}
	}
	// An event is sent after the error packet, so they may come out of order.
	got := map[string]bool{}
	for _, ev := range ts.fetches(t, len(names)) {
		if ev.Outcome != event.OutcomeNotFound || ev.Bytes != 0 || !ev.TFTP.TSize {
			t.Errorf("event %+v; want not-found with tsize asked", ev)
		}
		got[ev.File] = true
	}
	for _, n := range names {
		if !got[n] {
			t.Errorf("no event for %s", n)
		}
	}
}

func TestPathEscapesRefused(t *testing.T) {
	ts := startServer(t, Config{})
	ts.file(t, "ok.bin", 100)
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("SECRET-DATA"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(ts.root, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ts.root, "escapedir")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("ok.bin", filepath.Join(ts.root, "inside")); err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(ts.root, secret)
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		file     string
		wantCode uint16
		outcome  string
	}{
		"dot-dot to the secret":       {rel, errAccess, event.OutcomeDenied},
		"dot-dot with backslashes":    {strings.ReplaceAll(rel, "/", "\\"), errAccess, event.OutcomeDenied},
		"dot-dot after a folder":      {"sub/../../" + rel, errAccess, event.OutcomeDenied},
		"absolute path stays in root": {secret, errNotFound, event.OutcomeNotFound},
		"etc passwd":                  {"/etc/passwd", errNotFound, event.OutcomeNotFound},
		"symlink out of root":         {"escape", errAccess, event.OutcomeDenied},
		"through a symlinked folder":  {"escapedir/secret", errAccess, event.OutcomeDenied},
		"a folder is not a file":      {".", errNotFound, event.OutcomeNotFound},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before, _ := ts.rec.Snapshot()
			c := newRawClient(t, ts.Addr())
			c.send(ts.Addr(), rq(opRRQ, tc.file, "octet", "tsize", "0"))
			b, _ := c.recv()
			if bytes.Contains(b, []byte("SECRET")) {
				t.Fatalf("secret leaked: %q", b)
			}
			if code := errCode(t, b); code != tc.wantCode {
				t.Errorf("%q: error %d, want %d", tc.file, code, tc.wantCode)
			}
			ev := ts.fetches(t, len(before)+1)[len(before)]
			if ev.Outcome != tc.outcome || ev.Bytes != 0 {
				t.Errorf("%q: event outcome %q bytes %d; want %q, 0", tc.file, ev.Outcome, ev.Bytes, tc.outcome)
			}
			if !c.quiet(200 * time.Millisecond) {
				t.Errorf("%q: more packets after the error", tc.file)
			}
		})
	}
	// A symlink that stays inside the root is served.
	pc, _ := pin.NewClient(ts.Addr().String())
	wt, err := pc.Receive("inside", "octet")
	if err != nil {
		t.Fatalf("symlink inside the root: %v", err)
	}
	var got bytes.Buffer
	if _, err := wt.WriteTo(&got); err != nil || got.Len() != 100 {
		t.Errorf("symlink inside the root: %d bytes, %v", got.Len(), err)
	}
}

// TestAbortAfterOACK mimics EDK2's size probe: RRQ with tsize, then an
// ERROR instead of ACK 0 once the OACK gives the size.
func TestAbortAfterOACK(t *testing.T) {
	ts := startServer(t, Config{})
	ts.file(t, "BOOTX64.EFI", 1<<20)
	c := newRawClient(t, ts.Addr())
	c.send(ts.Addr(), rq(opRRQ, "BOOTX64.EFI", "octet", "tsize", "0", "blksize", "1468"))
	b, from := c.recv()
	if got := oackOpts(t, b)["tsize"]; got != "1048576" {
		t.Fatalf("OACK tsize %q, want 1048576", got)
	}
	c.send(from, appendError(nil, errOptionRefused, "User aborted the transfer"))
	ev := ts.fetches(t, 1)[0]
	want := event.Fetch{
		Proto: event.ProtoTFTP, File: "BOOTX64.EFI", Size: 1 << 20, Outcome: event.OutcomeAborted,
		TFTP: &event.TFTPInfo{BlockSize: 1468, WindowSize: 1, TSize: true, Timeout: time.Second},
	}
	if diff := cmp.Diff(want, ev, ignoreTimes); diff != "" {
		t.Errorf("event (-want +got):\n%s", diff)
	}
	if !strings.Contains(ev.Err, "error 8") {
		t.Errorf("event Err %q does not name the client's error", ev.Err)
	}
	if !c.quiet(300 * time.Millisecond) {
		t.Error("server sent more after the client's ERROR")
	}
	// The same client fetches the file right after, as EDK2 does.
	c.send(ts.Addr(), rq(opRRQ, "BOOTX64.EFI", "octet"))
	if b, _ := c.recv(); binary.BigEndian.Uint16(b) != opDATA {
		t.Errorf("second request: got % x, want DATA", b[:4])
	}
}

// TestRetransmitCounting leaves DATA 2 unacknowledged: the server resends
// it Retries times, then gives up, and the event counts every send. DATA 1,
// before the client acknowledged anything, is resent firstResends times
// only (a forged request must not draw Retries resends to its victim).
func TestRetransmitCounting(t *testing.T) {
	ts := startServer(t, Config{Timeout: 50 * time.Millisecond, Retries: 2})
	ts.file(t, "f", 3000)
	c := newRawClient(t, ts.Addr())
	c.send(ts.Addr(), rq(opRRQ, "f", "octet"))
	var from netip.AddrPort
	for range 1 + firstResends {
		var b []byte
		b, from = c.recv()
		if binary.BigEndian.Uint16(b) != opDATA || binary.BigEndian.Uint16(b[2:]) != 1 {
			t.Fatalf("want DATA 1, got % x", b[:4])
		}
	}
	c.send(from, ack(1))
	for range 3 {
		b, _ := c.recv()
		if binary.BigEndian.Uint16(b) != opDATA || binary.BigEndian.Uint16(b[2:]) != 2 {
			t.Fatalf("want DATA 2, got % x", b[:4])
		}
	}
	ev := ts.fetches(t, 1)[0]
	want := &event.TFTPInfo{BlockSize: 512, WindowSize: 1, Timeout: 50 * time.Millisecond,
		Datagrams: 5, Retransmits: 3, Timeouts: 4}
	if diff := cmp.Diff(want, ev.TFTP); diff != "" {
		t.Errorf("TFTP info (-want +got):\n%s", diff)
	}
	if ev.Outcome != event.OutcomeError || ev.Bytes != 512 {
		t.Errorf("outcome %q bytes %d; want error, 512", ev.Outcome, ev.Bytes)
	}
	// Nothing acknowledged: DATA 1 goes 1+firstResends times, then the
	// transfer ends.
	c2 := newRawClient(t, ts.Addr())
	c2.send(ts.Addr(), rq(opRRQ, "f", "octet"))
	for range 1 + firstResends {
		c2.recv()
	}
	if !c2.quiet(300 * time.Millisecond) {
		t.Error("DATA 1 was resent more than firstResends times")
	}
}

// TestDuplicateACKNotAnswered: a repeated ACK of the previous block must
// not trigger a resend (Sorcerer's Apprentice).
func TestDuplicateACKNotAnswered(t *testing.T) {
	ts := startServer(t, Config{})
	ts.file(t, "f", 1500)
	c := newRawClient(t, ts.Addr())
	c.send(ts.Addr(), rq(opRRQ, "f", "octet"))
	_, from := c.recv() // DATA 1
	c.send(from, ack(1))
	b, _ := c.recv() // DATA 2
	if binary.BigEndian.Uint16(b[2:]) != 2 {
		t.Fatalf("want DATA 2, got % x", b[:4])
	}
	c.send(from, ack(1)) // duplicate
	if !c.quiet(300 * time.Millisecond) {
		t.Fatal("server answered a duplicate ACK")
	}
	c.send(from, ack(2))
	b, _ = c.recv() // DATA 3, last
	c.send(from, ack(3))
	if binary.BigEndian.Uint16(b[2:]) != 3 || len(b) != 4+1500-1024 {
		t.Fatalf("want DATA 3 with 476 bytes, got % x (%d)", b[:4], len(b))
	}
	ev := ts.fetches(t, 1)[0]
	if ev.Outcome != event.OutcomeOK || ev.TFTP.Datagrams != 3 || ev.TFTP.Retransmits != 0 {
		t.Errorf("event %+v %+v; want ok, 3 datagrams, 0 retransmits", ev, ev.TFTP)
	}
}

func TestDuplicateRequestIgnored(t *testing.T) {
	ts := startServer(t, Config{})
	ts.file(t, "f", 5000)
	c := newRawClient(t, ts.Addr())
	c.send(ts.Addr(), rq(opRRQ, "f", "octet"))
	_, from := c.recv()
	c.send(ts.Addr(), rq(opRRQ, "f", "octet")) // the client's RRQ resend
	// The listener reads the resend on its own; the transfer must still
	// run when it does, so wait for it before acknowledging anything (CI
	// once read Duplicates = 0 right after the last ACK, under load).
	for i := 0; i < 200 && ts.Stats().Duplicates == 0; i++ {
		time.Sleep(5 * time.Millisecond)
	}
	for block := uint16(1); ; block++ {
		c.send(from, ack(block))
		b, src := c.recv()
		if src != from {
			t.Fatalf("packet from a second transfer %v (first %v)", src, from)
		}
		if len(b)-4 < 512 {
			c.send(from, ack(block+1))
			break
		}
	}
	if got := ts.Stats().Duplicates; got != 1 {
		t.Errorf("Duplicates = %d, want 1", got)
	}
}

func TestSinglePort(t *testing.T) {
	ts := startServer(t, Config{SinglePort: true})
	files := map[string][]byte{"a": ts.file(t, "a", 200_000), "b": ts.file(t, "b", 300_001)}
	// Two clients at once through the one port.
	errc := make(chan error, len(files))
	for name, want := range files {
		go func() {
			c, _ := pin.NewClient(ts.Addr().String())
			c.SetTimeout(2 * time.Second)
			c.SetBlockSize(1468)
			c.RequestTSize(true)
			wt, err := c.Receive(name, "octet")
			if err != nil {
				errc <- err
				return
			}
			var got bytes.Buffer
			if _, err := wt.WriteTo(&got); err != nil {
				errc <- err
				return
			}
			if !bytes.Equal(got.Bytes(), want) {
				errc <- fmt.Errorf("%s: content differs (%d bytes)", name, got.Len())
				return
			}
			errc <- nil
		}()
	}
	for range files {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	// Every packet comes from the listening port.
	c := newRawClient(t, ts.Addr())
	c.send(ts.Addr(), rq(opRRQ, "a", "octet", "blksize", "1468"))
	b, from := c.recv()
	if from != ts.Addr() {
		t.Errorf("OACK from %v, want the listening port %v", from, ts.Addr())
	}
	oackOpts(t, b)
	c.send(from, ack(0))
	if _, from = c.recv(); from != ts.Addr() {
		t.Errorf("DATA from %v, want %v", from, ts.Addr())
	}
	c.send(from, appendError(nil, 0, "enough"))
	evs := ts.fetches(t, 3)
	outcomes := map[string]int{}
	for _, ev := range evs {
		outcomes[ev.Outcome]++
	}
	if diff := cmp.Diff(map[string]int{"ok": 2, "aborted": 1}, outcomes); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}
}

func TestEventLabelsFromHosts(t *testing.T) {
	mac, _ := net.ParseMAC("52:54:00:12:34:56")
	table := hosts.New([]configs.Host{{
		MAC: configs.MAC{HardwareAddr: mac}, Name: "board7",
		Labels: map[string]string{"rack": "r2", "soc": "rk3588"},
	}})
	table.Observe(hosts.Client{MAC: mac, Addr: netip.MustParseAddr("127.0.0.1"), Arch: configs.ArchUnknown})
	ts := startServer(t, Config{Hosts: table, Interface: "lo"})
	ts.file(t, "f", 10)
	pc, _ := pin.NewClient(ts.Addr().String())
	wt, err := pc.Receive("f", "octet")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wt.WriteTo(&bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	ev := ts.fetches(t, 1)[0]
	if ev.MAC.String() != mac.String() || ev.Host != "board7" || ev.Interface != "lo" {
		t.Errorf("event MAC %v host %q iface %q; want %v board7 lo", ev.MAC, ev.Host, ev.Interface, mac)
	}
	if diff := cmp.Diff(map[string]string{"rack": "r2", "soc": "rk3588"}, ev.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
}

// TestGeneratedConfigOverTFTP: the pxelinux.cfg chain U-Boot's `pxe get`
// walks is answered from the host entry (01-MAC first, missing names
// refused at once with "File not found"), the U-Boot script by the
// client's lease, a root file wins; generated fetches are recorded as
// configs with the host.
func TestGeneratedConfigOverTFTP(t *testing.T) {
	mac, _ := net.ParseMAC("52:54:00:0d:0e:0f")
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "pxelinux.cfg"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "pxelinux.cfg", "default"), []byte("# lab default\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	store, err := images.Open(root, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	hostList := []configs.Host{{MAC: configs.MAC{HardwareAddr: mac}, Name: "imx8", Kernel: "Image", FDT: "imx8mp-evk.dtb", Cmdline: "console=ttymxc1"}}
	table := hosts.New(hostList)
	table.Observe(hosts.Client{MAC: mac, Addr: netip.MustParseAddr("127.0.0.1"), Arch: 22})
	src, err := bootcfg.New(bootcfg.Options{Config: &configs.Config{Hosts: hostList}, Images: store, Hosts: table})
	if err != nil {
		t.Fatal(err)
	}
	rec := &event.Recorder{}
	s, err := New(Config{Listen: "127.0.0.1:0", MTU: 1500, Files: src, Hosts: table, Sink: rec, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	servetest.Run(t, "tftp", 15*time.Second, s.Serve)

	fetch := func(name string) (string, error) {
		c, err := pin.NewClient(s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.SetTimeout(2 * time.Second)
		wt, err := c.Receive(name, "octet")
		if err != nil {
			return "", err
		}
		var b bytes.Buffer
		_, err = wt.WriteTo(&b)
		return b.String(), err
	}
	body, err := fetch("pxelinux.cfg/01-52-54-00-0d-0e-0f")
	if err != nil || !strings.Contains(body, "kernel Image") || !strings.Contains(body, "fdt imx8mp-evk.dtb") {
		t.Fatalf("pxelinux.cfg/01-MAC: %v\n%s", err, body)
	}
	if _, err := fetch("pxelinux.cfg/01-52-54-00-0d-0e-10"); err == nil || !strings.Contains(err.Error(), "File not found") {
		t.Errorf("another MAC's config: %v, want File not found", err)
	}
	if body, err = fetch("pxelinux.cfg/default"); err != nil || body != "# lab default\n" {
		t.Errorf("root pxelinux.cfg/default: %v %q", err, body)
	}
	body, err = fetch("boot.scr.uimg")
	if err != nil {
		t.Fatal(err)
	}
	if _, script, err := bootcfg.ParseScriptImage([]byte(body)); err != nil || !strings.Contains(string(script), "imx8") {
		t.Errorf("boot.scr.uimg: %v\n%s", err, script)
	}
	fs, _ := rec.WaitFetches(4, 10*time.Second)
	if len(fs) != 4 {
		t.Fatalf("%d fetch events, want 4", len(fs))
	}
	// Events come in the order transfers end, not start.
	byFile := map[string]event.Fetch{}
	for _, f := range fs {
		byFile[f.File] = f
	}
	for file, want := range map[string]struct{ kind, outcome string }{
		"pxelinux.cfg/01-52-54-00-0d-0e-0f": {event.KindConfig, event.OutcomeOK},
		"pxelinux.cfg/01-52-54-00-0d-0e-10": {"", event.OutcomeNotFound},
		"pxelinux.cfg/default":              {"", event.OutcomeOK},
		"boot.scr.uimg":                     {event.KindConfig, event.OutcomeOK},
	} {
		f := byFile[file]
		if f.Kind != want.kind || f.Outcome != want.outcome || f.Host != "imx8" {
			t.Errorf("%s: kind %q outcome %q host %q, want %+v", file, f.Kind, f.Outcome, f.Host, want)
		}
	}
}

func TestNetascii(t *testing.T) {
	ts := startServer(t, Config{})
	if err := os.WriteFile(filepath.Join(ts.root, "t.txt"), []byte("a\nb\rc"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := newRawClient(t, ts.Addr())
	c.send(ts.Addr(), rq(opRRQ, "t.txt", "NetASCII"))
	b, from := c.recv()
	c.send(from, ack(1))
	if got, want := string(b[4:]), "a\r\nb\r\x00c"; got != want {
		t.Errorf("netascii payload %q, want %q", got, want)
	}
}

func TestBadPacketsDroppedAndCounted(t *testing.T) {
	ts := startServer(t, Config{})
	ts.file(t, "f", 10)
	c := newRawClient(t, ts.Addr())
	bad := [][]byte{{0}, {0, 3, 0, 1, 'x'}, {0, 4, 0, 0}, rq(opRRQ, "f"), {0, 9, 'a', 0, 'b', 0}, append(rq(opRRQ, "f"), 'o')}
	for _, b := range bad {
		c.send(ts.Addr(), b)
	}
	c.send(ts.Addr(), rq(opRRQ, "f", "mail"))
	b, _ := c.recv()
	if code := errCode(t, b); code != errIllegalOp {
		t.Errorf("mail mode: error %d, want %d", code, errIllegalOp)
	}
	c.send(ts.Addr(), rq(opRRQ, "f", "octet"))
	b, _ = c.recv()
	if binary.BigEndian.Uint16(b) != opDATA || string(b[4:]) != string(ts.file(t, "f", 10)) {
		t.Errorf("valid request after garbage: got % x", b)
	}
	if got := ts.Stats().Malformed; got != int64(len(bad)) {
		t.Errorf("Malformed = %d, want %d", got, len(bad))
	}
}

func TestBusyPortFailsInNew(t *testing.T) {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	store, err := images.Open(t.TempDir(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	_, err = New(Config{Listen: c.LocalAddr().String(), Files: bootcfg.RootOnly(store)})
	if err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("New on a busy port: %v; want address already in use", err)
	}
}

func TestServeReturnsWhenContextEnds(t *testing.T) {
	for _, single := range []bool{false, true} {
		t.Run(fmt.Sprintf("single-port=%v", single), func(t *testing.T) {
			store, err := images.Open(t.TempDir(), t.TempDir(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			s, err := New(Config{Listen: "127.0.0.1:0", Files: bootcfg.RootOnly(store), SinglePort: single})
			if err != nil {
				t.Fatal(err)
			}
			serving := servetest.Run(t, "tftp", 10*time.Second, s.Serve)
			serving.Stop()
			if err := serving.Wait(); err != nil {
				t.Errorf("Serve = %v, want nil", err)
			}
		})
	}
}

// TestSinglePortNewRequestMidTransfer: in single-port mode the client's
// next request reaches the running transfer's socket; the old transfer ends
// as aborted and the new request is served at once.
func TestSinglePortNewRequestMidTransfer(t *testing.T) {
	ts := startServer(t, Config{SinglePort: true})
	ts.file(t, "a", 100_000)
	want := ts.file(t, "b", 300)
	c := newRawClient(t, ts.Addr())
	c.send(ts.Addr(), rq(opRRQ, "a", "octet"))
	if b, from := c.recv(); binary.BigEndian.Uint16(b) != opDATA || from != ts.Addr() {
		t.Fatalf("want DATA 1 of a from %v, got % x from %v", ts.Addr(), b[:4], from)
	}
	c.send(ts.Addr(), rq(opRRQ, "b", "octet"))
	c.oneBlock("b", want)
	evs := ts.fetches(t, 2)
	got := map[string]string{evs[0].File: evs[0].Outcome, evs[1].File: evs[1].Outcome}
	if diff := cmp.Diff(map[string]string{"a": event.OutcomeAborted, "b": event.OutcomeOK}, got); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}
}

// TestShutdownLetsTransfersFinish: once Serve's context ends, new requests
// go unanswered, a running transfer completes within the grace, and one
// that stalls is stopped when the grace runs out.
func TestShutdownLetsTransfersFinish(t *testing.T) {
	store, err := images.Open(t.TempDir(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := os.WriteFile(filepath.Join(store.Dir(), "f"), bytes.Repeat([]byte("x"), 1300), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, stall := range []bool{false, true} {
		t.Run(fmt.Sprintf("stall=%v", stall), func(t *testing.T) {
			rec := &event.Recorder{}
			s, err := New(Config{Listen: "127.0.0.1:0", Files: bootcfg.RootOnly(store), Sink: rec, ShutdownGrace: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			serving := servetest.Run(t, "tftp", 20*time.Second, s.Serve)
			c := newRawClient(t, s.Addr())
			c.send(s.Addr(), rq(opRRQ, "f", "octet"))
			_, from := c.recv() // DATA 1
			serving.Stop()
			waitFor(t, func() bool { return isDraining(s) })
			late := newRawClient(t, s.Addr())
			late.send(s.Addr(), rq(opRRQ, "f", "octet"))
			if !late.quiet(200 * time.Millisecond) {
				t.Error("a request after shutdown was answered")
			}
			if !stall {
				for block := uint16(1); block <= 3; block++ {
					c.send(from, ack(block))
					if block < 3 {
						c.recv()
					}
				}
			}
			if err := serving.Wait(); err != nil {
				t.Fatalf("Serve = %v", err)
			}
			evs, _ := rec.Snapshot()
			want := event.OutcomeOK
			if stall {
				want = event.OutcomeError
			}
			if len(evs) != 1 || evs[0].Outcome != want {
				t.Fatalf("events %+v; want one with outcome %s", evs, want)
			}
		})
	}
}

// isDraining reports whether Serve has begun its shutdown.
func isDraining(s *Server) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draining
}

// waitFor ends the test unless cond comes true within 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	if !testenv.WaitFor(10*time.Second, cond) {
		t.Fatal("condition not met in 10s")
	}
}
