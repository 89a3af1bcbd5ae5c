package metrics

import (
	"bytes"
	"io"
	"net"
	"net/http/httptest"
	"net/netip"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pxeperf/pxeperf/dhcp"
	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/internal/refuse"
	"github.com/pxeperf/pxeperf/record"
	"github.com/pxeperf/pxeperf/tftp"
)

// gather reads reg as Prometheus would and returns every pxeperf series
// as `name{k="v",...}` (labels sorted) -> value; a histogram gives
// name_count, name_sum and name_bucket{le=...}.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gathering: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		name := mf.GetName()
		if !strings.HasPrefix(name, Namespace+"_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+strconv.Quote(l.GetValue()))
			}
			sort.Strings(ls)
			key := func(suffix string, extra ...string) string {
				all := append(append([]string(nil), ls...), extra...)
				sort.Strings(all)
				return name + suffix + "{" + strings.Join(all, ",") + "}"
			}
			switch {
			case m.GetCounter() != nil:
				out[key("")] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[key("")] = m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				h := m.GetHistogram()
				out[key("_count")] = float64(h.GetSampleCount())
				out[key("_sum")] = h.GetSampleSum()
				for _, b := range h.GetBucket() {
					le := strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)
					out[key("_bucket", "le="+strconv.Quote(le))] = float64(b.GetCumulativeCount())
				}
			}
		}
	}
	return out
}

// pick keeps the non-zero series whose name starts with one of prefixes,
// leaving out histogram buckets.
func pick(all map[string]float64, prefixes ...string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range all {
		if v == 0 || strings.Contains(k, "_bucket{") {
			continue
		}
		for _, p := range prefixes {
			if strings.HasPrefix(k, p+"{") || strings.HasPrefix(k, p+"_count{") || strings.HasPrefix(k, p+"_sum{") {
				out[k] = v
			}
		}
	}
	return out
}

func newMetrics(t *testing.T) (*Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	return m, reg
}

var client = netip.MustParseAddrPort("192.168.50.101:2070")

func fetch(proto, outcome string, bytes int64, d time.Duration) *event.Fetch {
	return &event.Fetch{Start: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC), Proto: proto, Client: client,
		File: "kernel.img", Bytes: bytes, Size: bytes, Duration: d, Outcome: outcome}
}

const (
	fetches  = "pxeperf_fetches_total"
	fbytes   = "pxeperf_fetch_bytes_total"
	duration = "pxeperf_fetch_duration_seconds"
	mbps     = "pxeperf_fetch_throughput_mbps"
	leases   = "pxeperf_dhcp_leases_total"
)

// TestEvents: each fetch and lease moves its counters and histograms, and
// nothing else.
func TestEvents(t *testing.T) {
	tests := map[string]struct {
		fetches []*event.Fetch
		leases  []*event.Lease
		want    map[string]float64
	}{
		"tftp ok": {
			fetches: []*event.Fetch{fetch(event.ProtoTFTP, event.OutcomeOK, 1_000_000, time.Second)},
			want: map[string]float64{
				fetches + `{outcome="ok",proto="tftp"}`: 1,
				fbytes + `{outcome="ok",proto="tftp"}`:  1e6,
				duration + `_count{proto="tftp"}`:       1,
				duration + `_sum{proto="tftp"}`:         1,
				mbps + `_count{proto="tftp"}`:           1,
				mbps + `_sum{proto="tftp"}`:             8,
			},
		},
		"http aborted: no throughput": {
			fetches: []*event.Fetch{fetch(event.ProtoHTTP, event.OutcomeAborted, 500, 2*time.Second)},
			want: map[string]float64{
				fetches + `{outcome="aborted",proto="http"}`: 1,
				fbytes + `{outcome="aborted",proto="http"}`:  500,
				duration + `_count{proto="http"}`:            1,
				duration + `_sum{proto="http"}`:              2,
			},
		},
		"ok without bytes: no throughput": {
			fetches: []*event.Fetch{fetch(event.ProtoHTTP, event.OutcomeOK, 0, time.Second)},
			want: map[string]float64{
				fetches + `{outcome="ok",proto="http"}`: 1,
				duration + `_count{proto="http"}`:       1,
				duration + `_sum{proto="http"}`:         1,
			},
		},
		"not found and denied": {
			fetches: []*event.Fetch{
				fetch(event.ProtoTFTP, event.OutcomeNotFound, 0, time.Second/2),
				fetch(event.ProtoTFTP, event.OutcomeDenied, 0, time.Second/2),
				fetch(event.ProtoHTTP, event.OutcomeError, 0, time.Second),
			},
			want: map[string]float64{
				fetches + `{outcome="not-found",proto="tftp"}`: 1,
				fetches + `{outcome="denied",proto="tftp"}`:    1,
				fetches + `{outcome="error",proto="http"}`:     1,
				duration + `_count{proto="tftp"}`:              2,
				duration + `_sum{proto="tftp"}`:                1,
				duration + `_count{proto="http"}`:              1,
				duration + `_sum{proto="http"}`:                1,
			},
		},
		"fetches add up": {
			fetches: []*event.Fetch{
				fetch(event.ProtoHTTP, event.OutcomeOK, 250_000_000, 2*time.Second),
				fetch(event.ProtoHTTP, event.OutcomeOK, 125_000_000, time.Second),
			},
			want: map[string]float64{
				fetches + `{outcome="ok",proto="http"}`: 2,
				fbytes + `{outcome="ok",proto="http"}`:  375e6,
				duration + `_count{proto="http"}`:       2,
				duration + `_sum{proto="http"}`:         3,
				mbps + `_count{proto="http"}`:           2,
				mbps + `_sum{proto="http"}`:             2000,
			},
		},
		"a board's throughput test": {
			fetches: []*event.Fetch{fetch(event.ProtoTCP, event.OutcomeOK, 125_000_000, time.Second)},
			want: map[string]float64{
				fetches + `{outcome="ok",proto="tcp"}`: 1,
				fbytes + `{outcome="ok",proto="tcp"}`:  125e6,
				duration + `_count{proto="tcp"}`:       1,
				duration + `_sum{proto="tcp"}`:         1,
				mbps + `_count{proto="tcp"}`:           1,
				mbps + `_sum{proto="tcp"}`:             1000,
			},
		},
		"leases": {
			leases: []*event.Lease{{Proxy: true}, {Proxy: true}, {Addr: netip.MustParseAddr("192.168.50.20")}},
			want: map[string]float64{
				leases + `{mode="proxy"}`: 2,
				leases + `{mode="full"}`:  1,
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m, reg := newMetrics(t)
			for _, f := range tc.fetches {
				m.Fetch(f)
			}
			for _, l := range tc.leases {
				m.Lease(l)
			}
			got := pick(gather(t, reg), fetches, fbytes, duration, mbps, leases)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("series (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHistogramBuckets: an observation lands in its bucket, not a lower one.
func TestHistogramBuckets(t *testing.T) {
	m, reg := newMetrics(t)
	m.Fetch(fetch(event.ProtoTFTP, event.OutcomeOK, 12_500_000, time.Second)) // 1 s, 100 Mbit/s
	got := gather(t, reg)
	for k, want := range map[string]float64{
		duration + `_bucket{le="0.256",proto="tftp"}`: 0,
		duration + `_bucket{le="1.024",proto="tftp"}`: 1,
		mbps + `_bucket{le="50",proto="tftp"}`:        0,
		mbps + `_bucket{le="100",proto="tftp"}`:       1,
	} {
		if v, ok := got[k]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", k, v, ok, want)
		}
	}
	// Every protocol and outcome of a boot is there from the start.
	_, reg = newMetrics(t)
	got = gather(t, reg)
	for _, k := range []string{fetches + `{outcome="ok",proto="tftp"}`, fetches + `{outcome="error",proto="http"}`,
		fbytes + `{outcome="not-found",proto="http"}`, leases + `{mode="proxy"}`, leases + `{mode="full"}`} {
		if v, ok := got[k]; !ok || v != 0 {
			t.Errorf("%s = %v (present %v) before any event, want 0", k, v, ok)
		}
	}
}

// hostile are values a fetch or lease may carry that must never become a
// label: client identities, file names, and strings dressed as labels.
var hostile = []string{"52:54:00:de:ad:01", "10.66.6.6", "board-evil-01", "../../etc/shadow", "kernel-evil.img",
	`x",proto="tftp`, "ok\n", "TFTP", "evil-reason-52:54:00:de:ad:02"}

// allowed are the label values each label name may take.
var allowed = map[string][]string{
	"proto":   {"tftp", "http", "tcp", "udp", "other", "dhcp", "admin", "record"},
	"outcome": {"ok", "aborted", "not-found", "denied", "error", "offer", "ack", "nak", "none", "other"},
	"type":    {"discover", "request", "release", "decline", "inform", "other"},
	"mode":    {"full", "proxy"},
	"wait":    {"thread", "poller"},
	"by":      {"release", "decline"},
	"reason": {"too many transfers", "queue full", "bad token", "too many labels", "new clients per second", "evil",
		"repeated-request", "stray"},
}

// TestLabelsBounded: hostile values in every field of fetches, leases and
// the servers' counters are counted, folded into the bounded sets, and
// never appear in the exposition.
func TestLabelsBounded(t *testing.T) {
	m, reg := newMetrics(t)
	mac := net.HardwareAddr{0x52, 0x54, 0, 0xde, 0xad, 1}
	n := 0
	for _, p := range hostile {
		for _, o := range hostile {
			f := fetch(p, o, 100, time.Second)
			f.MAC, f.Host, f.File, f.Err = mac, p, o, o
			f.Labels = map[string]string{p: o, "proto": p}
			m.Fetch(f)
			n++
		}
	}
	// An outcome in the proto's place and a protocol in the outcome's.
	m.Fetch(fetch(event.OutcomeOK, event.ProtoTFTP, 100, time.Second))
	n++
	for _, h := range hostile {
		m.Lease(&event.Lease{MAC: mac, Host: h, BootFile: h, Addr: netip.MustParseAddr("10.66.6.6")})
	}
	dh := &fakeDHCP{st: dhcp.Stats{Malformed: 1,
		Packets: map[dhcp.PacketKind]uint64{
			{Type: "discover", Reply: "offer"}:   3,
			{Type: hostile[0], Reply: "offer"}:   1, // folds into other/offer
			{Type: hostile[1], Reply: "offer"}:   1, // and so does this: one series, summed
			{Type: "request", Reply: hostile[2]}: 1,
		},
		Refused: map[string]uint64{"dhcp: evil": 1}}}
	if err := Watch(reg, Sources{DHCP: dh}); err != nil {
		t.Fatal(err)
	}
	got := gather(t, reg)
	var total float64
	for k, v := range got {
		name, labels, _ := strings.Cut(k, "{")
		for _, kv := range strings.Split(strings.TrimSuffix(labels, "}"), ",") {
			if kv == "" {
				continue
			}
			ln, lv, _ := strings.Cut(kv, "=")
			if ln == "le" {
				continue
			}
			v, err := strconv.Unquote(lv)
			if err != nil || !contains(allowed[ln], v) {
				t.Errorf("%s: label %s=%s is outside the bounded set %v", k, ln, lv, allowed[ln])
			}
		}
		if name == fetches {
			total += v
		}
	}
	if total != float64(n) {
		t.Errorf("fetches_total adds up to %v, want %d: hostile fetches are counted, not dropped", total, n)
	}
	if v := got[fetches+`{outcome="error",proto="other"}`]; v != float64(n) {
		t.Errorf(`fetches_total{proto="other",outcome="error"} = %v: unknown protocols and outcomes fold there`, v)
	}
	if v := got[`pxeperf_dhcp_packets_total{outcome="offer",type="other"}`]; v != 2 {
		t.Errorf("dhcp packets of unknown type: %v, want 2 (folded and summed)", v)
	}
	if v := got[leases+`{mode="full"}`]; v != float64(len(hostile)) {
		t.Errorf("leases %v, want %d", v, len(hostile))
	}

	// The exposition itself names none of them.
	srv := httptest.NewServer(Handler(reg))
	t.Cleanup(srv.Close)
	body := scrape(t, srv)
	for _, h := range []string{mac.String(), "52:54:00", "10.66.6.6", "board-evil", "etc/shadow", "kernel-evil.img",
		"evil-reason", "kernel.img", "192.168.50.101", `x\",proto`} {
		if strings.Contains(body, h) {
			t.Errorf("the exposition carries %q", h)
		}
	}
}

func contains(set []string, v string) bool {
	for _, s := range set {
		if s == v {
			return true
		}
	}
	return false
}

func scrape(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	return string(b)
}

type fakeDHCP struct {
	st     dhcp.Stats
	leases []dhcp.Lease
}

func (f *fakeDHCP) Stats() dhcp.Stats    { return f.st }
func (f *fakeDHCP) Leases() []dhcp.Lease { return f.leases }

type fakeTFTP struct{ st tftp.Stats }

func (f *fakeTFTP) Stats() tftp.Stats { return f.st }

type fakeHTTP struct {
	ref   *refuse.Log
	bad   int64
	conns int
}

func (f *fakeHTTP) Refused() *refuse.Log { return f.ref }
func (f *fakeHTTP) BadRequests() int64   { return f.bad }
func (f *fakeHTTP) Conns() int           { return f.conns }

type fakeRecords struct{ st record.SinkStats }

func (f *fakeRecords) Stats() record.SinkStats { return f.st }

// sources returns Sources with every field set to known counts.
func sources() Sources {
	httpRef := refuse.New(nil, 0)
	for range 4 {
		httpRef.Refuse("http: too many labels", "10.0.0.9")
	}
	adminRef := refuse.New(nil, 0)
	adminRef.Refuse("admin: bad token", "10.0.0.8")
	act := event.NewActive()
	for _, p := range []string{event.ProtoTFTP, event.ProtoTFTP, event.ProtoHTTP} {
		act.Begin(fetch(p, "", 0, 0))
	}
	return Sources{
		DHCP: &fakeDHCP{
			st: dhcp.Stats{Received: 50, Malformed: 7, Ignored: 8, Errors: 3, Reclaimed: 2, JournalFlushes: 6, Releases: 2, Declines: 1, Refused: map[string]uint64{"dhcp: new clients per second": 5},
				Packets: map[dhcp.PacketKind]uint64{{Type: "discover", Reply: "offer"}: 11, {Type: "request", Reply: "ack"}: 10,
					{Type: "request", Reply: "nak"}: 1, {Type: "release", Reply: "none"}: 2}},
			leases: make([]dhcp.Lease, 9),
		},
		PoolSize: 100,
		TFTP: &fakeTFTP{st: tftp.Stats{Malformed: 3, Refused: map[string]uint64{"tftp: too many transfers": 6},
			Threaded: 13, Polled: 2, ThreadRecvs: 40000, Pinned: 12, ThreadsBusy: 5, ThreadsCap: 16,
			Requests: 21, Duplicates: 4, Stray: 9, Replaced: 1, Busy: 6, PassedOn: 7, Unsent: 3}},
		HTTP:  &fakeHTTP{ref: httpRef, bad: 2, conns: 3},
		Admin: adminRef,
		Records: &fakeRecords{st: record.SinkStats{Written: 1000, Batches: 40, Pending: 12, PendingBytes: 4096, JournalOnly: 30,
			Recovered: 10, Dropped: 1, StoreErrors: 4, Refused: map[string]uint64{"record: queue full": 20}}},
		Active: act,
	}
}

const (
	active    = "pxeperf_active_transfers"
	packets   = "pxeperf_dhcp_packets_total"
	inUse     = "pxeperf_dhcp_leases_in_use"
	pool      = "pxeperf_dhcp_pool_size"
	malformed = "pxeperf_malformed_packets_total"
	refusals  = "pxeperf_refusals_total"
	queue     = "pxeperf_record_queue_depth"
	qbytes    = "pxeperf_record_queue_bytes"
	backlog   = "pxeperf_record_journal_backlog"
	storeErrs = "pxeperf_record_store_errors_total"
	written   = "pxeperf_records_written_total"
	commits   = "pxeperf_record_commits_total"
	dropped   = "pxeperf_records_dropped_total"
	byWait    = "pxeperf_tftp_transfers_by_wait_total"
	lsRecvs   = "pxeperf_tftp_thread_datagrams_total"
	lsBusy    = "pxeperf_tftp_threads_busy"
	lsPinned  = "pxeperf_tftp_thread_pinned_total"
	lsCap     = "pxeperf_tftp_threads_limit"
	tRequests = "pxeperf_tftp_requests_total"
	tDropped  = "pxeperf_tftp_dropped_total"
	tReplaced = "pxeperf_tftp_replaced_transfers_total"
	tPassedOn = "pxeperf_tftp_passed_on_total"
	dReceived = "pxeperf_dhcp_datagrams_received_total"
	dIgnored  = "pxeperf_dhcp_ignored_total"
	dErrors   = "pxeperf_dhcp_errors_total"
	reclaimed = "pxeperf_dhcp_offers_reclaimed_total"
	dFlushes  = "pxeperf_dhcp_journal_flushes_total"
	ended     = "pxeperf_dhcp_leases_ended_total"
	hConns    = "pxeperf_http_connections"
)

var collected = []string{active, packets, inUse, pool, malformed, refusals, queue, qbytes, backlog, storeErrs, written, commits, dropped,
	byWait, lsRecvs, lsPinned, lsBusy, lsCap, tRequests, tDropped, tReplaced, tPassedOn, dReceived, dIgnored, dErrors, reclaimed, dFlushes, ended, hConns}

// TestCollector: what a scrape shows is each Sources field's counters, as
// read at that moment; a nil service is left out.
func TestCollector(t *testing.T) {
	all := map[string]float64{
		active + `{proto="tftp"}`:                     2,
		active + `{proto="http"}`:                     1,
		packets + `{outcome="offer",type="discover"}`: 11,
		packets + `{outcome="ack",type="request"}`:    10,
		packets + `{outcome="nak",type="request"}`:    1,
		packets + `{outcome="none",type="release"}`:   2,
		inUse + `{}`:                 9,
		pool + `{}`:                  100,
		malformed + `{proto="dhcp"}`: 7,
		malformed + `{proto="tftp"}`: 3,
		malformed + `{proto="http"}`: 2,
		refusals + `{proto="dhcp",reason="new clients per second"}`: 5,
		refusals + `{proto="tftp",reason="too many transfers"}`:     6,
		refusals + `{proto="http",reason="too many labels"}`:        4,
		refusals + `{proto="admin",reason="bad token"}`:             1,
		refusals + `{proto="record",reason="queue full"}`:           20,
		queue + `{}`:                             12,
		qbytes + `{}`:                            4096,
		backlog + `{}`:                           20,
		storeErrs + `{}`:                         4,
		written + `{}`:                           1000,
		commits + `{}`:                           40,
		dropped + `{}`:                           1,
		byWait + `{wait="thread"}`:               13,
		byWait + `{wait="poller"}`:               2,
		lsRecvs + `{}`:                           40000,
		lsPinned + `{}`:                          12,
		lsBusy + `{}`:                            5,
		lsCap + `{}`:                             16,
		tRequests + `{}`:                         21,
		tDropped + `{reason="repeated-request"}`: 4,
		tDropped + `{reason="stray"}`:            9,
		tDropped + `{reason="unsent-error"}`:     3,
		tReplaced + `{}`:                         1,
		tPassedOn + `{}`:                         7,
		dReceived + `{}`:                         50,
		dIgnored + `{}`:                          8,
		dErrors + `{}`:                           3,
		reclaimed + `{}`:                         2,
		dFlushes + `{}`:                          6,
		ended + `{by="release"}`:                 2,
		ended + `{by="decline"}`:                 1,
		hConns + `{}`:                            3,
	}
	without := func(prefixes ...string) map[string]float64 {
		out := map[string]float64{}
		for k, v := range all {
			keep := true
			for _, p := range prefixes {
				keep = keep && !strings.HasPrefix(k, p)
			}
			if keep {
				out[k] = v
			}
		}
		return out
	}
	tests := map[string]struct {
		src  func(s *Sources)
		want map[string]float64
	}{
		"every service":       {func(*Sources) {}, all},
		"proxy mode: no pool": {func(s *Sources) { s.PoolSize = 0 }, without(inUse, pool)},
		"no DHCP": {func(s *Sources) { s.DHCP = nil }, without(packets, inUse, pool, malformed+`{proto="dhcp"`, refusals+`{proto="dhcp"`,
			dReceived, dIgnored, dErrors, reclaimed, dFlushes, ended)},
		"no TFTP": {func(s *Sources) { s.TFTP = nil }, without(malformed+`{proto="tftp"`, refusals+`{proto="tftp"`, byWait, lsRecvs, lsBusy,
			lsCap, lsPinned, tRequests, tDropped, tReplaced, tPassedOn)},
		"no HTTP":           {func(s *Sources) { s.HTTP = nil }, without(malformed+`{proto="http"`, refusals+`{proto="http"`, hConns)},
		"no admin refusals": {func(s *Sources) { s.Admin = nil }, without(refusals + `{proto="admin"`)},
		"no recording": {func(s *Sources) { s.Records = nil },
			without(queue, qbytes, backlog, storeErrs, written, commits, dropped, refusals+`{proto="record"`)},
		"no live view": {func(s *Sources) { s.Active = nil }, without(active)},
		"nothing":      {func(s *Sources) { *s = Sources{} }, map[string]float64{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			src := sources()
			tc.src(&src)
			if err := Watch(reg, src); err != nil {
				t.Fatal(err)
			}
			got := gather(t, reg)
			// Zeros count here: a service that is on reports its zeros.
			for k := range got {
				if !hasPrefix(k, collected) {
					delete(got, k)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("series (-want +got):\n%s", diff)
			}
		})
	}

	// Read at scrape time: a later count shows in the next scrape, and a
	// journal read back past what went to it is no negative backlog.
	reg := prometheus.NewRegistry()
	src := sources()
	if err := Watch(reg, src); err != nil {
		t.Fatal(err)
	}
	rec := src.Records.(*fakeRecords)
	rec.st.Written, rec.st.Recovered = 1500, 40
	src.TFTP.(*fakeTFTP).st.Malformed = 30
	src.TFTP.(*fakeTFTP).st.ThreadsBusy = 0
	got := gather(t, reg)
	if got[written+`{}`] != 1500 || got[backlog+`{}`] != 0 || got[malformed+`{proto="tftp"}`] != 30 || got[lsBusy+`{}`] != 0 {
		t.Errorf("second scrape: written %v, backlog %v, tftp malformed %v, lock-step threads busy %v; want 1500, 0, 30, 0",
			got[written+`{}`], got[backlog+`{}`], got[malformed+`{proto="tftp"}`], got[lsBusy+`{}`])
	}
}

// TestCollectorServers: real servers, made to count garbage, repeats,
// replaced transfers, an exhausted pool, ..., show those counts in a
// scrape.
func TestCollectorServers(t *testing.T) {
	reg := prometheus.NewRegistry()
	want := liveServers(t, reg)
	got := gather(t, reg)
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
}

func hasPrefix(k string, names []string) bool {
	for _, n := range names {
		if strings.HasPrefix(k, n+"{") {
			return true
		}
	}
	return false
}

// TestPromtool: promtool accepts the exposition of every metric, with
// every service on and events counted.
func TestPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (Debian: apt-get install prometheus); CI installs it")
	}
	// The fakes, with every series set, and real servers that made their
	// counters move, in two registries.
	m, reg := newMetrics(t)
	if err := Watch(reg, sources()); err != nil {
		t.Fatal(err)
	}
	live := prometheus.NewRegistry()
	want := liveServers(t, live)
	m.Fetch(fetch(event.ProtoTFTP, event.OutcomeOK, 1<<20, time.Second))
	m.Fetch(fetch(event.ProtoHTTP, event.OutcomeAborted, 1<<10, time.Second))
	m.Lease(&event.Lease{Proxy: true})
	srv := httptest.NewServer(Handler(reg))
	t.Cleanup(srv.Close)
	body := scrape(t, srv)
	for _, name := range append([]string{"pxeperf_fetches_total", "go_goroutines", "process_"}, collected...) {
		if !strings.Contains(body, "\n"+name) {
			t.Errorf("exposition lacks %s", name)
		}
	}
	promcheck(t, promtool, body)

	liveSrv := httptest.NewServer(Handler(live))
	t.Cleanup(liveSrv.Close)
	body = scrape(t, liveSrv)
	lines := map[string]bool{}
	for _, l := range strings.Split(body, "\n") {
		lines[l] = true
	}
	for k, v := range want {
		line := strings.TrimSuffix(k, "{}") + " " + strconv.FormatFloat(v, 'g', -1, 64)
		if !lines[line] {
			t.Errorf("the live servers' exposition lacks %q", line)
		}
	}
	promcheck(t, promtool, body)
}

func promcheck(t *testing.T, promtool, body string) {
	t.Helper()
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out.String())
	}
}
