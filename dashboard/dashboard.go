// Package dashboard is the lab's live view, served by the admin listener:
// a plain HTML page at / (embedded, no build step, no CDN) showing boots and
// transfers in progress as they run (server-sent events), the latest
// fetches, per-client history, leases, the TFTP server's transfer threads
// and dropped datagrams, and the report tables with their charts; and the
// JSON it reads:
//
//	GET /api/active                 transfers in progress, with the bytes the board acknowledged and its live Mbit/s, and the TFTP counters
//	GET /api/active/stream          the same, pushed every Interval (text/event-stream, "event: active"),
//	                                and each milestone as it happens ("event: milestone", notify.Message)
//	GET /api/recent                 the latest finished fetches, held in memory
//	GET /api/leases                 leases in use (full mode) or boot clients seen (proxy)
//	GET /api/chart/window-offload.svg   the window x offload chart (report.WindowChart)
//
// History and tables come from the record API (/api/fetches, /api/report),
// mounted next to it. The dashboard is an event.Sink for the latest fetches
// and leases: a copy into a ring under a mutex, once per fetch.
package dashboard

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pxeperf/pxeperf/api"
	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/notify"
	"github.com/pxeperf/pxeperf/report"
	"github.com/pxeperf/pxeperf/tftp"
)

//go:embed ui
var ui embed.FS

// Lease is one entry of /api/leases; JSON names follow record.Lease.
type Lease struct {
	MAC      string    `json:"client_mac"`
	Addr     string    `json:"addr,omitempty"`
	Arch     uint16    `json:"arch"`
	Host     string    `json:"host,omitempty"`
	BootFile string    `json:"boot_file,omitempty"`
	Time     time.Time `json:"time,omitzero"`
	Expiry   time.Time `json:"expiry,omitzero"`
	Proxy    bool      `json:"proxy,omitempty"`
}

// Options are what a Dashboard is built from.
type Options struct {
	// Active lists the transfers in progress; nil: none shown.
	Active *event.Active
	// Records backs the chart (the record store); nil: no chart.
	Records api.Source
	// Leases lists the leases in use (dhcp.Server.Leases with host
	// names); nil: the leases seen as events are listed instead (proxy).
	Leases func() []Lease
	// TFTP is the TFTP server whose counters /api/active carries; nil: none.
	TFTP TFTPSource
	// Recent is how many finished fetches and leases are kept. Default 200.
	Recent int
	// Interval is how often the stream pushes. Default 500ms.
	Interval time.Duration
	Logger   *slog.Logger
}

// Dashboard serves the page and its JSON. Build it with New.
type Dashboard struct {
	opt Options

	mu      sync.Mutex
	fetches []Fetch // ring, oldest first after order()
	fnext   int
	seq     uint64 // fetches seen
	leases  map[string]Lease

	// streams are the event stream readers' milestone buffers.
	smu     sync.Mutex
	streams map[chan []byte]struct{}
	lost    atomic.Int64 // milestones a reader's full buffer did not take
}

// streamBuffer is how many milestones one stream reader may be behind
// before it loses the newest (counted by LostMilestones).
const streamBuffer = 256

// Fetch is a finished fetch as /api/recent lists it; JSON names follow
// record.Record.
type Fetch struct {
	Seq       uint64            `json:"seq"`
	Time      time.Time         `json:"time"`
	Proto     string            `json:"proto"`
	ClientIP  string            `json:"client_ip"`
	ClientMAC string            `json:"client_mac,omitempty"`
	Host      string            `json:"host,omitempty"`
	File      string            `json:"file"`
	Kind      string            `json:"kind,omitempty"`
	Bytes     int64             `json:"bytes"`
	Size      int64             `json:"size"`
	Duration  time.Duration     `json:"duration_ns"`
	Mbps      float64           `json:"mbps"`
	Outcome   string            `json:"outcome"`
	Err       string            `json:"err,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
}

// TFTPSource is what the dashboard reads of the TFTP server.
type TFTPSource interface{ Stats() tftp.Stats }

// TFTPCounters is the TFTP server's line on the page and in `pxeperf
// status`: its requests, how many transfer threads are held of how many
// and how transfers waited for their ACKs, and what it dropped, replaced or
// turned away so far. Every counter of tftp.Stats is here once, as in
// /metrics: Stats.Busy is RefusedBy's two "too many transfers" reasons.
type TFTPCounters struct {
	Requests    int64             `json:"requests"`
	ThreadsBusy int64             `json:"threads_busy"`
	ThreadsCap  int64             `json:"threads_cap"`
	Threaded    int64             `json:"threaded"`     // transfers that waited on a thread of their own
	Polled      int64             `json:"polled"`       // ... and in Go's poller (no thread free)
	ThreadRecvs int64             `json:"thread_recvs"` // datagrams read on those threads
	Pinned      int64             `json:"pinned"`       // threaded transfers that rode their client's CPU
	Malformed   int64             `json:"malformed"`
	Repeated    int64             `json:"repeated_requests"`
	Stray       int64             `json:"stray"`
	Replaced    int64             `json:"replaced"`      // transfers ended by a new request from the same address and port
	PassedOn    int64             `json:"passed_on"`     // single-port: datagrams a transfer socket took in before its connect, handed on
	Unsent      int64             `json:"unsent_errors"` // refusals' ERROR packets the kernel would not take, dropped
	Refused     uint64            `json:"refused"`       // RefusedBy summed
	RefusedBy   map[string]uint64 `json:"refused_by,omitempty"`
}

// tftpCounters is what the dashboard shows of st.
func tftpCounters(st tftp.Stats) *TFTPCounters {
	c := &TFTPCounters{Requests: st.Requests, ThreadsBusy: st.ThreadsBusy, ThreadsCap: st.ThreadsCap,
		Threaded: st.Threaded, Polled: st.Polled, ThreadRecvs: st.ThreadRecvs,
		Pinned:    st.Pinned,
		Malformed: st.Malformed, Repeated: st.Duplicates, Stray: st.Stray, Replaced: st.Replaced,
		PassedOn: st.PassedOn, Unsent: st.Unsent}
	for reason, n := range st.Refused {
		c.Refused += n
		if c.RefusedBy == nil {
			c.RefusedBy = map[string]uint64{}
		}
		c.RefusedBy[reason] = n
	}
	return c
}

// Transfer is a transfer in progress with its rates: Mbps (in
// event.TransferInfo) the live rate the board acknowledges, over at least
// the last event.RateWindow; AvgMbps since the start.
type Transfer struct {
	event.TransferInfo
	AvgMbps float64 `json:"avg_mbps"`
}

var (
	_ event.Sink          = (*Dashboard)(nil)
	_ event.MilestoneSink = (*Dashboard)(nil)
)

// New builds a dashboard.
func New(opt Options) *Dashboard {
	if opt.Recent <= 0 {
		opt.Recent = 200
	}
	if opt.Interval <= 0 {
		opt.Interval = 500 * time.Millisecond
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	return &Dashboard{opt: opt, leases: map[string]Lease{}, streams: map[chan []byte]struct{}{}}
}

// SetSources sets the chart's records, the lease list and the TFTP server
// (see Options) once they exist; call it before serving.
func (d *Dashboard) SetSources(records api.Source, leases func() []Lease, tftp TFTPSource) {
	d.opt.Records, d.opt.Leases, d.opt.TFTP = records, leases, tftp
}

// Fetch keeps a finished fetch for /api/recent.
func (d *Dashboard) Fetch(f *event.Fetch) {
	r := Fetch{Time: f.Start.UTC(), Proto: f.Proto, ClientIP: f.Client.Addr().String(), Host: f.Host,
		File: f.File, Kind: f.Kind, Bytes: f.Bytes, Size: f.Size, Duration: f.Duration, Mbps: f.Mbps(),
		Outcome: f.Outcome, Err: f.Err, Labels: f.Labels}
	if f.MAC != nil {
		r.ClientMAC = f.MAC.String()
	}
	d.mu.Lock()
	d.seq++
	r.Seq = d.seq
	if len(d.fetches) < d.opt.Recent {
		d.fetches = append(d.fetches, r)
	} else {
		d.fetches[d.fnext] = r
		d.fnext = (d.fnext + 1) % d.opt.Recent
	}
	d.mu.Unlock()
}

// Lease keeps the latest lease per MAC, for proxy mode's /api/leases.
func (d *Dashboard) Lease(l *event.Lease) {
	e := Lease{MAC: l.MAC.String(), Arch: l.Arch, Host: l.Host, BootFile: l.BootFile, Time: l.Time.UTC(),
		Expiry: l.Expiry.UTC(), Proxy: l.Proxy}
	if l.Addr.IsValid() {
		e.Addr = l.Addr.String()
	}
	d.mu.Lock()
	if _, ok := d.leases[e.MAC]; !ok && len(d.leases) >= 4*d.opt.Recent {
		// Bounded: forget the oldest sighting.
		var oldest string
		for k, v := range d.leases {
			if oldest == "" || v.Time.Before(d.leases[oldest].Time) {
				oldest = k
			}
		}
		delete(d.leases, oldest)
	}
	d.leases[e.MAC] = e
	d.mu.Unlock()
}

// Register adds the page and its JSON to mux (the admin listener's).
func (d *Dashboard) Register(mux interface {
	Handle(pattern string, h http.Handler)
}) {
	static, _ := fs.Sub(ui, "ui")
	mux.Handle("GET /{$}", http.HandlerFunc(d.index))
	mux.Handle("GET /ui/", http.StripPrefix("/ui/", http.FileServerFS(static)))
	mux.Handle("GET /api/active", http.HandlerFunc(d.active))
	mux.Handle("GET /api/active/stream", http.HandlerFunc(d.stream))
	mux.Handle("GET /api/recent", http.HandlerFunc(d.recent))
	mux.Handle("GET /api/leases", http.HandlerFunc(d.leaseList))
	mux.Handle("GET /api/chart/window-offload.svg", http.HandlerFunc(d.chart))
}

func (d *Dashboard) index(w http.ResponseWriter, r *http.Request) {
	b, err := ui.ReadFile("ui/index.html")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(b)
}

// Active lists the transfers in progress with their rates. The live rate
// is the registry's (event.Active measures it from the acknowledged bytes
// as they grow), so it is the same for every reader, however often each
// asks.
func (d *Dashboard) Active() []Transfer {
	snap := d.opt.Active.Snapshot()
	now := time.Now()
	out := make([]Transfer, 0, len(snap))
	for _, t := range snap {
		tr := Transfer{TransferInfo: t}
		if el := now.Sub(t.Start).Seconds(); el > 0 {
			tr.AvgMbps = float64(t.Bytes) * 8 / el / 1e6
		}
		out = append(out, tr)
	}
	return out
}

// Recent returns the latest finished fetches, newest first.
func (d *Dashboard) Recent() (seq uint64, out []Fetch) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out = make([]Fetch, 0, len(d.fetches))
	out = append(out, d.fetches[d.fnext:]...)
	out = append(out, d.fetches[:d.fnext]...)
	slices.Reverse(out)
	return d.seq, out
}

type activeAnswer struct {
	Time      time.Time  `json:"time"`
	Transfers []Transfer `json:"transfers"`
	// RecentSeq counts finished fetches: when it changes, /api/recent has
	// news.
	RecentSeq uint64 `json:"recent_seq"`
	// TFTP is left out when there is no TFTP server.
	TFTP *TFTPCounters `json:"tftp,omitempty"`
}

func (d *Dashboard) activeAnswer() activeAnswer {
	a := activeAnswer{Time: time.Now().UTC(), Transfers: d.Active()}
	if d.opt.TFTP != nil {
		a.TFTP = tftpCounters(d.opt.TFTP.Stats())
	}
	d.mu.Lock()
	a.RecentSeq = d.seq
	d.mu.Unlock()
	return a
}

func (d *Dashboard) active(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, d.activeAnswer())
}

// Milestone pushes m to every event stream reader now connected; a
// reader whose buffer is full loses it (counted), the others never wait.
func (d *Dashboard) Milestone(m event.Milestone) {
	b := notify.Encode(m)
	d.smu.Lock()
	defer d.smu.Unlock()
	for ch := range d.streams {
		select {
		case ch <- b:
		default:
			d.lost.Add(1)
		}
	}
}

// LostMilestones counts the milestones a slow stream reader lost.
func (d *Dashboard) LostMilestones() int64 { return d.lost.Load() }

// subscribe registers a stream reader's milestone buffer; the func
// returned removes it.
func (d *Dashboard) subscribe() (<-chan []byte, func()) {
	ch := make(chan []byte, streamBuffer)
	d.smu.Lock()
	d.streams[ch] = struct{}{}
	d.smu.Unlock()
	return ch, func() {
		d.smu.Lock()
		delete(d.streams, ch)
		d.smu.Unlock()
	}
}

// stream pushes the transfers in progress every Interval as server-sent
// events ("event: active"), and each milestone as it comes ("event:
// milestone"), each write pushing the connection's write deadline ahead
// so the admin listener's write timeout does not end it.
func (d *Dashboard) stream(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	milestones, unsubscribe := d.subscribe()
	defer unsubscribe()
	t := time.NewTicker(d.opt.Interval)
	defer t.Stop()
	var buf bytes.Buffer
	for {
		active, err := json.Marshal(d.activeAnswer())
		if err != nil || writeEvent(w, rc, sse(&buf, "active", active)) != nil {
			return
		}
		for waiting := true; waiting; {
			select {
			case <-r.Context().Done():
				return
			case <-t.C:
				waiting = false
			case m := <-milestones:
				if writeEvent(w, rc, sse(&buf, "milestone", m)) != nil {
					return
				}
			}
		}
	}
}

// sse is one server-sent event of the given name and one line of data, in
// buf.
func sse(buf *bytes.Buffer, name string, data []byte) []byte {
	buf.Reset()
	buf.WriteString("event: " + name + "\ndata: ")
	buf.Write(data)
	buf.WriteString("\n\n")
	return buf.Bytes()
}

// writeEvent writes and flushes one server-sent event, bounded by a
// write deadline.
func writeEvent(w http.ResponseWriter, rc *http.ResponseController, b []byte) error {
	_ = rc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := w.Write(b); err != nil {
		return err
	}
	return rc.Flush()
}

func (d *Dashboard) recent(w http.ResponseWriter, _ *http.Request) {
	seq, fs := d.Recent()
	writeJSON(w, map[string]any{"seq": seq, "fetches": fs})
}

// Leases lists the leases in use, or in proxy mode the boot clients seen.
func (d *Dashboard) Leases() []Lease {
	if d.opt.Leases != nil {
		return d.opt.Leases()
	}
	d.mu.Lock()
	out := make([]Lease, 0, len(d.leases))
	for _, l := range d.leases {
		out = append(out, l)
	}
	d.mu.Unlock()
	slices.SortFunc(out, func(a, b Lease) int { return b.Time.Compare(a.Time) })
	return out
}

func (d *Dashboard) leaseList(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, map[string]any{"leases": d.Leases()})
}

// chart draws the window x offload chart of the records the filters
// (client, file, since, label, as /api/report takes them) select.
func (d *Dashboard) chart(w http.ResponseWriter, r *http.Request) {
	if d.opt.Records == nil {
		http.Error(w, "no record store", http.StatusServiceUnavailable)
		return
	}
	q := r.URL.Query()
	f, err := report.ParseFilter(report.FilterArgs{Client: q.Get("client"), File: q.Get("file"),
		Since: q.Get("since"), Labels: q["label"]}, time.Now())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.Limit = 50000
	ctx, cancel := context.WithTimeout(r.Context(), 20*time.Second)
	defer cancel()
	recs, err := d.opt.Records.Query(ctx, f)
	if err != nil {
		http.Error(w, fmt.Sprintf("reading records: %v", err), http.StatusServiceUnavailable)
		return
	}
	slices.Reverse(recs)
	c, err := report.WindowChart(recs)
	if err != nil {
		// No measured fetch yet: an empty chart says so.
		w.Header().Set("Content-Type", "image/svg+xml")
		fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="640" height="80"><text x="10" y="40" font-family="sans-serif" font-size="14">%s</text></svg>`,
			svgEscape(err.Error()))
		return
	}
	var buf bytes.Buffer
	if err := c.SVG(&buf); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "image/svg+xml")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(buf.Bytes())
}

func svgEscape(s string) string {
	var b bytes.Buffer
	for _, r := range s {
		switch r {
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
