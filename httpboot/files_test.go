package httpboot

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/internal/testkit/imagetest"
	"github.com/pxeperf/pxeperf/internal/testkit/servetest"
)

type fileResp struct {
	Status   int
	Type     string
	Length   string
	Range    string
	Encoding string
	Body     []byte
}

func TestFiles(t *testing.T) {
	efi := pattern(300_000, 1)
	kernel := pattern(70_000, 2)
	e := newTestEnv(t, envOpts{files: map[string][]byte{
		"ipxe.efi":            efi,
		"undionly.kpxe":       []byte("kpxe"),
		"boards/a/vmlinuz":    kernel,
		"boards/a/rootfs.img": []byte("img"),
		"live.iso":            []byte("iso"),
		"menu.ipxe":           []byte("#!ipxe\nshell\n"),
	}})
	tests := map[string]struct {
		method, path string
		header       map[string]string
		want         fileResp
	}{
		"get efi": {path: "/ipxe.efi", want: fileResp{Status: 200, Type: "application/efi", Length: "300000", Body: efi}},
		"head efi": {method: http.MethodHead, path: "/ipxe.efi",
			want: fileResp{Status: 200, Type: "application/efi", Length: "300000", Body: []byte{}}},
		"range": {path: "/ipxe.efi", header: map[string]string{"Range": "bytes=1000-1999"},
			want: fileResp{Status: 206, Type: "application/efi", Length: "1000", Range: "bytes 1000-1999/300000", Body: efi[1000:2000]}},
		"suffix range": {path: "/ipxe.efi", header: map[string]string{"Range": "bytes=-10"},
			want: fileResp{Status: 206, Type: "application/efi", Length: "10", Range: "bytes 299990-299999/300000", Body: efi[299990:]}},
		"kernel without extension": {path: "/boards/a/vmlinuz",
			want: fileResp{Status: 200, Type: "application/octet-stream", Length: "70000", Body: kernel}},
		"kpxe": {path: "/undionly.kpxe", want: fileResp{Status: 200, Type: "application/octet-stream", Length: "4", Body: []byte("kpxe")}},
		"img":  {path: "/boards/a/rootfs.img", want: fileResp{Status: 200, Type: "application/octet-stream", Length: "3", Body: []byte("img")}},
		"iso":  {path: "/live.iso", want: fileResp{Status: 200, Type: "application/x-iso9660-image", Length: "3", Body: []byte("iso")}},
		"ipxe file": {path: "/menu.ipxe",
			want: fileResp{Status: 200, Type: "text/plain; charset=utf-8", Length: "13", Body: []byte("#!ipxe\nshell\n")}},
		"image is never compressed": {path: "/ipxe.efi", header: map[string]string{"Accept-Encoding": "zstd, gzip"},
			want: fileResp{Status: 200, Type: "application/efi", Length: "300000", Body: efi}},
		"missing":   {path: "/nope.efi", want: fileResp{Status: 404, Type: "text/plain; charset=utf-8", Length: "14", Body: []byte("404 not found\n")}},
		"directory": {path: "/boards", want: fileResp{Status: 404, Type: "text/plain; charset=utf-8", Length: "14", Body: []byte("404 not found\n")}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := tc.method
			if m == "" {
				m = http.MethodGet
			}
			req, err := http.NewRequest(m, e.url+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			resp, err := rawClient().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			got := fileResp{
				Status: resp.StatusCode, Type: resp.Header.Get("Content-Type"),
				Length: resp.Header.Get("Content-Length"), Range: resp.Header.Get("Content-Range"),
				Encoding: resp.Header.Get("Content-Encoding"), Body: body,
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("%s %s (-want +got):\n%s", m, tc.path, d)
			}
		})
	}
}

// TestEscapesRefused sends paths that climb out of the root without any
// client-side cleaning; none may return the secret outside the root.
func TestEscapesRefused(t *testing.T) {
	outside := t.TempDir()
	secret := []byte("pxeperf-secret-outside-root")
	if err := os.WriteFile(filepath.Join(outside, "secret"), secret, 0o644); err != nil {
		t.Fatal(err)
	}
	e := newTestEnv(t, envOpts{files: map[string][]byte{"sub/ok.txt": []byte("ok")}})
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(e.root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(e.root, "dirlink")); err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(e.root, outside)
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		target string
		want   []int // acceptable statuses
	}{
		"dotdot":            {"/../" + rel + "/secret", []int{403}},
		"dotdot in middle":  {"/sub/../../" + rel + "/secret", []int{403}},
		"encoded dotdot":    {"/%2e%2e/" + rel + "/secret", []int{403}},
		"encoded slash":     {"/sub%2f..%2f..%2f" + rel + "%2fsecret", []int{403}},
		"backslash":         {"/sub\\..\\..\\" + rel + "\\secret", []int{403}},
		"symlink out":       {"/link", []int{403, 404}},
		"dir symlink out":   {"/dirlink/secret", []int{403, 404}},
		"absolute in query": {"/?file=/etc/passwd", []int{404}},
		"ok control":        {"/sub/ok.txt", []int{200}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			resp, body := rawGet(t, e.srv.Addr().String(), tc.target)
			if bytes.Contains(body, secret) {
				t.Fatalf("GET %s served the file outside the root", tc.target)
			}
			for _, s := range tc.want {
				if resp.StatusCode == s {
					return
				}
			}
			t.Errorf("GET %s: status %d, want one of %v", tc.target, resp.StatusCode, tc.want)
		})
	}
	fetches := e.waitFetches(t, len(tests))
	denied := 0
	for _, f := range fetches {
		if f.Outcome == event.OutcomeDenied {
			denied++
			if f.Bytes != 0 {
				t.Errorf("denied fetch %s counts %d bytes, want 0", f.File, f.Bytes)
			}
		}
	}
	if denied < 5 {
		t.Errorf("%d fetches recorded as denied, want at least 5: %+v", denied, fetches)
	}
}

func TestContentType(t *testing.T) {
	tests := map[string]string{
		"ipxe.efi": "application/efi", "undionly.kpxe": "application/octet-stream",
		"boot.ipxe": "text/plain; charset=utf-8", "disk.IMG": "application/octet-stream",
		"x.iso": "application/x-iso9660-image", "vmlinuz": "application/octet-stream",
		"initrd.cpio.gz": "application/gzip", "rootfs.zst": "application/zstd",
		"a.unknownext": "application/octet-stream",
	}
	for name, want := range tests {
		if got := contentType(name); got != want {
			t.Errorf("contentType(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestMethodNotAllowed(t *testing.T) {
	e := newTestEnv(t, envOpts{files: map[string][]byte{"a": []byte("a")}})
	resp, err := rawClient().Post(e.url+"/a", "text/plain", bytes.NewReader([]byte("x")))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST: %d Allow=%q, want 405 Allow=\"GET, HEAD\"", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

func TestBusyPort(t *testing.T) {
	e := newTestEnv(t, envOpts{})
	h := defaultHTTP()
	h.Listen = e.srv.Addr().String()
	_, err := New(Options{HTTP: h, Images: e.srv.opt.Images})
	if err == nil {
		t.Fatalf("New on busy %s succeeded", h.Listen)
	}
	if want := "--http-addr"; !bytes.Contains([]byte(err.Error()), []byte(want)) {
		t.Errorf("error %q does not say how to fix it (%s)", err, want)
	}
}

func TestLengthHeaderMatches(t *testing.T) {
	// Content-Length must always be there for files: firmware is slow without it.
	body := pattern(1<<20, 3)
	e := newTestEnv(t, envOpts{files: map[string][]byte{"big.bin": body}})
	resp, err := rawClient().Get(e.url + "/big.bin")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.ContentLength != int64(len(body)) || resp.Header.Get("Content-Length") != strconv.Itoa(len(body)) {
		t.Errorf("Content-Length %q, want %d", resp.Header.Get("Content-Length"), len(body))
	}
	if len(resp.TransferEncoding) != 0 {
		t.Errorf("Transfer-Encoding %v, want none", resp.TransferEncoding)
	}
}

// orderLog is a ResponseWriter with ReadFrom and a corker that write what
// happens to one log.
type orderLog struct {
	http.ResponseWriter
	log []string
}

func (o *orderLog) ReadFrom(r io.Reader) (int64, error) {
	n, err := io.Copy(io.Discard, r)
	o.log = append(o.log, "copy "+strconv.FormatInt(n, 10))
	return n, err
}

func (o *orderLog) setCork(on bool) {
	if on {
		o.log = append(o.log, "cork")
	} else {
		o.log = append(o.log, "uncork")
	}
}

// TestCorkOrder: a body over one splice batch goes out corked up to its
// held-back last byte, and the cork is off before the record is made (the
// client takes in the body meanwhile, and a body the record waits for
// has its tail on the wire to be acknowledged); a small body is not
// corked (corked, a 4 KiB file took ~50 us longer); any other copy is
// corked whole.
func TestCorkOrder(t *testing.T) {
	tests := map[string]struct {
		src  func() io.Reader
		want []string
	}{
		"big file": {func() io.Reader { return io.LimitReader(bytes.NewReader(make([]byte, 1<<20)), 1<<20) },
			[]string{"cork", "copy 1048575", "uncork", "record", "copy 1"}},
		"small file": {func() io.Reader { return io.LimitReader(bytes.NewReader(make([]byte, 4096)), 4096) },
			[]string{"copy 4095", "record", "copy 1"}},
		"other reader": {func() io.Reader { return bytes.NewReader(make([]byte, 4096)) },
			[]string{"cork", "copy 4096", "uncork"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			o := &orderLog{}
			cw := &countingWriter{ResponseWriter: o, cork: o}
			cw.beforeLast = func() { o.log = append(o.log, "record") }
			if _, err := cw.ReadFrom(tt.src()); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, o.log); diff != "" {
				t.Errorf("order (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCacheFullIs503: an image that exists but does not fit in the unpack
// cache gets 503 with Retry-After, not a 500 and a warning per request.
func TestCacheFullIs503(t *testing.T) {
	store := imagetest.FullCache(t)
	rec := &event.Recorder{}
	s, err := New(Options{HTTP: defaultHTTP(), Images: store, Sink: rec})
	if err != nil {
		t.Fatal(err)
	}
	servetest.Run(t, "http", 15*time.Second, s.Serve)

	resp, err := rawClient().Get("http://" + s.Addr().String() + "/initrd.img")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("status %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	fs, _ := rec.WaitFetches(1, 5*time.Second)
	if len(fs) != 1 || fs[0].Outcome != event.OutcomeError {
		t.Errorf("fetch events %+v, want one with outcome error", fs)
	}
}
