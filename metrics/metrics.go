// Package metrics is pxeperf's live instrumentation: Prometheus metrics
// (New, served at /metrics on the admin listener) and one structured log
// line per fetch and per lease with the record store's field names (Log).
//
// Metrics come from two places. Fetches and leases arrive as events: Metrics
// is an event.Sink that counts them (a few atomic adds per fetch, nothing
// per block). Everything the servers already count (DHCP packets, refusals,
// malformed, repeated and stray datagrams, transfer threads, connections,
// the record queue, transfers in progress) is read from their Stats when
// Prometheus scrapes, so serving pays nothing for it.
//
// The registry is passed in (no global registry). Labels are bounded sets:
// protocol, outcome, DHCP message type, refusal reason; never a MAC, an
// address or a file name.
package metrics

import (
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pxeperf/pxeperf/dhcp"
	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/internal/refuse"
	"github.com/pxeperf/pxeperf/record"
	"github.com/pxeperf/pxeperf/tftp"
)

// Namespace prefixes every pxeperf metric name.
const Namespace = "pxeperf"

// Sources are the servers whose counters are read at scrape time; a nil
// field is a service that is off, and its metrics are left out.
type Sources struct {
	DHCP interface {
		Stats() dhcp.Stats
		Leases() []dhcp.Lease
	}
	// PoolSize is the number of addresses in dhcp.pool (0: proxy mode).
	PoolSize int
	TFTP     interface{ Stats() tftp.Stats }
	HTTP     interface {
		Refused() *refuse.Log
		BadRequests() int64
		Conns() int
	}
	// Admin counts the admin listener's refusals (bad token).
	Admin   *refuse.Log
	Records interface{ Stats() record.SinkStats }
	Active  *event.Active

	// Iperf3 counts the iperf3 server's refusals (caps, handshake budget).
	Iperf3 interface{ Refusals() map[string]uint64 }
	// Iperf2 counts the iperf 2 server's refusals and dropped replies.
	Iperf2 interface{ Refusals() map[string]uint64 }
}

// Metrics counts fetches and leases (as an event.Sink) and exports the
// servers' counters. Build it with New.
type Metrics struct {
	fetches  *prometheus.CounterVec
	bytes    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	mbps     *prometheus.HistogramVec
	leases   *prometheus.CounterVec
}

var _ event.Sink = (*Metrics)(nil)

// New registers the fetch and lease metrics, the Go runtime's and the
// process's on reg. The servers' counters follow with Watch, once the
// servers are built (the Metrics sink must exist before them).
func New(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		fetches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "fetches_total",
			Help: "Files served and throughput tests run, by protocol (tftp, http, tcp, udp, other) and outcome (ok, aborted, not-found, denied, error).",
		}, []string{"proto", "outcome"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "fetch_bytes_total",
			Help: "Payload bytes delivered by finished fetches, by protocol and outcome.",
		}, []string{"proto", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "fetch_duration_seconds",
			Help:    "Duration of finished fetches, by protocol.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10), // 1 ms .. 262 s
		}, []string{"proto"}),
		mbps: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "fetch_throughput_mbps",
			Help:    "Throughput of fetches that delivered the whole file, in Mbit/s (10^6 bit/s), by protocol.",
			Buckets: []float64{0.1, 0.5, 1, 5, 10, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000},
		}, []string{"proto"}),
		leases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "dhcp_leases_total",
			Help: "DHCP bindings handed out or renewed (mode full) and boot clients answered (mode proxy).",
		}, []string{"mode"}),
	}
	cs := []prometheus.Collector{m.fetches, m.bytes, m.duration, m.mbps, m.leases,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	// Every protocol and outcome starts at zero, so rate() and absent()
	// work before the first fetch.
	for _, p := range []string{event.ProtoTFTP, event.ProtoHTTP} {
		for _, o := range []string{event.OutcomeOK, event.OutcomeAborted, event.OutcomeNotFound, event.OutcomeDenied, event.OutcomeError} {
			m.fetches.WithLabelValues(p, o)
			m.bytes.WithLabelValues(p, o)
		}
	}
	m.leases.WithLabelValues("full")
	m.leases.WithLabelValues("proxy")
	return m, nil
}

// Watch registers on reg the metrics read from src's counters at scrape
// time.
func Watch(reg prometheus.Registerer, src Sources) error {
	return reg.Register(newStatsCollector(src))
}

// Handler serves reg's metrics in the Prometheus exposition formats.
func Handler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg, MaxRequestsInFlight: 4})
}

// Fetch counts a finished fetch.
func (m *Metrics) Fetch(f *event.Fetch) {
	proto, outcome := boundedProto(f.Proto), boundedOutcome(f.Outcome)
	m.fetches.WithLabelValues(proto, outcome).Inc()
	m.bytes.WithLabelValues(proto, outcome).Add(float64(f.Bytes))
	m.duration.WithLabelValues(proto).Observe(f.Duration.Seconds())
	if f.Outcome == event.OutcomeOK && f.Bytes > 0 && f.Duration > 0 {
		m.mbps.WithLabelValues(proto).Observe(f.Mbps())
	}
}

// Lease counts a binding or a proxy answer.
func (m *Metrics) Lease(l *event.Lease) {
	if l.Proxy {
		m.leases.WithLabelValues("proxy").Inc()
	} else {
		m.leases.WithLabelValues("full").Inc()
	}
}

// boundedProto keeps a proto label to event's protocols: anything else
// (a bug, or a value from outside) is "other".
func boundedProto(v string) string {
	switch v {
	case event.ProtoTFTP, event.ProtoHTTP, event.ProtoTCP, event.ProtoUDP:
		return v
	}
	return "other"
}

// boundedOutcome keeps an outcome label to event's outcomes: anything else
// is "error".
func boundedOutcome(v string) string {
	switch v {
	case event.OutcomeOK, event.OutcomeAborted, event.OutcomeNotFound, event.OutcomeDenied, event.OutcomeError:
		return v
	}
	return event.OutcomeError
}

// dhcpKind keeps a DHCP packet label to RFC 2132's message types (and
// "other", "none"): anything else is "other".
func dhcpKind(v string) string {
	switch v {
	case "discover", "offer", "request", "decline", "ack", "nak", "release", "inform", "other", "none":
		return v
	}
	return "other"
}

// statsCollector reads the servers' counters at scrape time. A counter
// another series already shows is not sent twice: tftp.Stats.Busy is
// refusals_total's two "too many transfers" reasons, dhcp.Stats' Offers,
// Acks, Naks and Informs are dhcp_packets_total by outcome, and httpboot's
// Active is active_transfers{proto="http"}.
type statsCollector struct {
	src                                                        Sources
	active, dhcpPackets, leasesInUse, poolSize, malformed, ref *prometheus.Desc
	queue, queueBytes, backlog, storeErrs, written, dropped    *prometheus.Desc
	commits                                                    *prometheus.Desc
	journalBytes, journalCap, storeFailing, journalErrs        *prometheus.Desc
	threaded, threadRecvs, threadsBusy, threadsCap             *prometheus.Desc
	threadPinned                                               *prometheus.Desc
	tftpRequests, tftpDropped, tftpReplaced, tftpPassedOn      *prometheus.Desc
	dhcpReceived, dhcpIgnored, dhcpErrors, reclaimed, ended    *prometheus.Desc
	dhcpFlushes                                                *prometheus.Desc
	httpConns                                                  *prometheus.Desc
}

func newStatsCollector(src Sources) *statsCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(Namespace+"_"+name, help, labels, nil)
	}
	return &statsCollector{src: src,
		active:      d("active_transfers", "Transfers in progress, by protocol.", "proto"),
		dhcpPackets: d("dhcp_packets_total", "DHCP requests that parsed, by message type (discover, request, release, decline, inform, other) and outcome: the reply's type (offer, ack, nak) or none.", "type", "outcome"),
		leasesInUse: d("dhcp_leases_in_use", "Bound, unexpired leases (mode full)."),
		poolSize:    d("dhcp_pool_size", "Addresses in dhcp.pool (mode full)."),
		malformed:   d("malformed_packets_total", "Packets or requests dropped because they did not parse, by protocol.", "proto"),
		ref:         d("refusals_total", "Requests or entries turned away by a budget, by the service and the budget's reason.", "proto", "reason"),
		queue:       d("record_queue_depth", "Records waiting in memory for the record store."),
		queueBytes:  d("record_queue_bytes", "Size of the records waiting in memory, as counted against records.queue_mib."),
		backlog:     d("record_journal_backlog", "Records kept only in the journal (memory queue full, or no store), not yet read back into the store."),
		storeErrs:   d("record_store_errors_total", "Failed record store writes (each is retried)."),
		written:     d("records_written_total", "Records committed to the record store."),
		commits:     d("record_commits_total", "Transactions that committed them (records_written_total over this: records per commit, see record.MaxLinger)."),
		dropped:     d("records_dropped_total", "Records lost: neither journaled nor kept in memory."),
		threaded: d("tftp_transfers_by_wait_total", "TFTP transfers (lock-step and windowed) by where they waited for their ACKs: "+
			"thread (a blocking read on an OS thread of their own) or poller (Go's; every thread under tftp.transfer_threads was taken, or its socket failed).", "wait"),
		threadRecvs:  d("tftp_thread_datagrams_total", "Datagrams read by TFTP transfers on threads of their own, added as each transfer ends."),
		threadPinned: d("tftp_thread_pinned_total", "TFTP transfers whose thread moved onto the CPU taking in their client's packets (one per CPU)."),
		threadsBusy:  d("tftp_threads_busy", "OS threads held by TFTP transfers now (at most tftp.transfer_threads)."),
		threadsCap:   d("tftp_threads_limit", "OS threads TFTP transfers may hold: tftp.transfer_threads (0 when negative, and off Linux)."),
		tftpRequests: d("tftp_requests_total", "TFTP read and write requests accepted for handling: each starts a transfer or is answered with an error. "+
			"Requests turned away are in pxeperf_refusals_total, unparsable ones in pxeperf_malformed_packets_total."),
		tftpDropped: d("tftp_dropped_total", "TFTP datagrams dropped unanswered, by reason: repeated-request (a client's request again while its transfer runs) "+
			"stray (neither an ACK nor an ERROR on a transfer's socket, added as the transfer ends), "+
			"or unsent-error (a refusal's ERROR the kernel would not take; never waited for).", "reason"),
		tftpReplaced: d("tftp_replaced_transfers_total", "TFTP transfers ended by a new, different request from the same client address and port (the client moved on)."),
		tftpPassedOn: d("tftp_passed_on_total", "Single-port mode: datagrams a TFTP transfer socket took in between its bind and its connect "+
			"(another client's request), handed on as the listening socket would have handled them."),
		dhcpReceived: d("dhcp_datagrams_received_total", "Datagrams read on the DHCP ports, parsed or not."),
		dhcpIgnored: d("dhcp_ignored_total", "Valid DHCP requests left unanswered because they are not for pxeperf: "+
			"another server chosen, not a boot client (proxy), a RELEASE or DECLINE of no lease of ours, ..."),
		dhcpErrors: d("dhcp_errors_total", "DHCP requests pxeperf failed to answer: pool exhausted, lease journal or send failures."),
		reclaimed:  d("dhcp_offers_reclaimed_total", "Offered addresses nobody REQUESTed, taken back early for a new client because the pool had none free."),
		dhcpFlushes: d("dhcp_journal_flushes_total", "Lease journal writes, each fsynced before the ACKs it carries leave; "+
			"ACKs over flushes is how many shared one (group commit)."),
		ended:     d("dhcp_leases_ended_total", "Leases the client ended, by how: release (address back in the pool) or decline (client found it in use).", "by"),
		httpConns: d("http_connections", "Open HTTP boot connections, as counted against http.max_conns."),
		// The record journal against its cap, and the store's state.
		journalBytes: d("record_journal_bytes", "Size of <data>/records.journal now."),
		journalCap:   d("record_journal_limit_bytes", "records.journal_max_mib in bytes: past 3/4 records of failed fetches are dropped, at it every new record (pxeperf_records_dropped_total)."),
		storeFailing: d("record_store_failing", "1 while record store writes fail (retried), else 0."),
		journalErrs:  d("record_journal_write_errors_total", "Failed record journal writes (disk full, read-only, ...)."),
	}
}

func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.active, c.dhcpPackets, c.leasesInUse, c.poolSize, c.malformed, c.ref,
		c.queue, c.queueBytes, c.backlog, c.storeErrs, c.written, c.commits, c.dropped, c.threaded, c.threadRecvs, c.threadPinned, c.threadsBusy,
		c.threadsCap, c.tftpRequests, c.tftpDropped, c.tftpReplaced, c.tftpPassedOn, c.dhcpReceived, c.dhcpIgnored, c.dhcpErrors,
		c.reclaimed, c.dhcpFlushes, c.ended, c.httpConns} {
		ch <- d
	}
	for _, d := range []*prometheus.Desc{c.journalBytes, c.journalCap, c.storeFailing, c.journalErrs} {
		ch <- d
	}
}

// Collect reads every source present and sends its series.
func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	s, out := c.src, collection{c: c, ch: ch}
	if s.Active != nil {
		n := s.Active.Count()
		for _, p := range []string{event.ProtoTFTP, event.ProtoHTTP} {
			out.gauge(c.active, float64(n[p]), p)
		}
	}
	if s.DHCP != nil {
		out.dhcp(s.DHCP.Stats())
		if s.PoolSize > 0 {
			out.gauge(c.leasesInUse, float64(len(s.DHCP.Leases())))
			out.gauge(c.poolSize, float64(s.PoolSize))
		}
	}
	if s.TFTP != nil {
		out.tftp(s.TFTP.Stats())
	}
	if s.HTTP != nil {
		out.counter(c.malformed, float64(s.HTTP.BadRequests()), "http")
		out.gauge(c.httpConns, float64(s.HTTP.Conns()))
		out.refusals("http", s.HTTP.Refused().Counts())
	}
	if s.Admin != nil {
		out.refusals("admin", s.Admin.Counts())
	}
	if s.Iperf3 != nil {
		out.refusals("iperf3", s.Iperf3.Refusals())
	}
	if s.Iperf2 != nil {
		out.refusals("iperf2", s.Iperf2.Refusals())
	}
	if s.Records != nil {
		out.records(s.Records.Stats())
	}
}

// collection is one Collect: the collector's descriptions and the channel the
// series go to.
type collection struct {
	c  *statsCollector
	ch chan<- prometheus.Metric
}

func (s collection) gauge(d *prometheus.Desc, v float64, lv ...string) {
	s.ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
}

func (s collection) counter(d *prometheus.Desc, v float64, lv ...string) {
	s.ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, lv...)
}

// refusals sends refusals_total for proto. Label values that fold together
// are summed: a series is sent once.
func (s collection) refusals(proto string, counts map[string]uint64) {
	sum := map[string]uint64{}
	for reason, n := range counts {
		sum[strings.TrimPrefix(reason, proto+": ")] += n
	}
	for reason, n := range sum {
		s.counter(s.c.ref, float64(n), proto, reason)
	}
}

// dhcp sends the DHCP server's counters, packet kinds folded to the
// bounded label values.
func (s collection) dhcp(st dhcp.Stats) {
	c := s.c
	sum := map[dhcp.PacketKind]uint64{}
	for k, n := range st.Packets {
		sum[dhcp.PacketKind{Type: dhcpKind(k.Type), Reply: dhcpKind(k.Reply)}] += n
	}
	for k, n := range sum {
		s.counter(c.dhcpPackets, float64(n), k.Type, k.Reply)
	}
	s.counter(c.malformed, float64(st.Malformed), "dhcp")
	s.counter(c.dhcpReceived, float64(st.Received))
	s.counter(c.dhcpIgnored, float64(st.Ignored))
	s.counter(c.dhcpErrors, float64(st.Errors))
	s.counter(c.reclaimed, float64(st.Reclaimed))
	s.counter(c.dhcpFlushes, float64(st.JournalFlushes))
	s.counter(c.ended, float64(st.Releases), "release")
	s.counter(c.ended, float64(st.Declines), "decline")
	s.refusals("dhcp", st.Refused)
}

// tftp sends the TFTP server's counters and its thread gauges.
func (s collection) tftp(st tftp.Stats) {
	c := s.c
	s.counter(c.malformed, float64(st.Malformed), "tftp")
	s.refusals("tftp", st.Refused)
	s.counter(c.threaded, float64(st.Threaded), "thread")
	s.counter(c.threaded, float64(st.Polled), "poller")
	s.counter(c.threadRecvs, float64(st.ThreadRecvs))
	s.counter(c.threadPinned, float64(st.Pinned))
	s.gauge(c.threadsBusy, float64(st.ThreadsBusy))
	s.gauge(c.threadsCap, float64(st.ThreadsCap))
	s.counter(c.tftpRequests, float64(st.Requests))
	s.counter(c.tftpDropped, float64(st.Duplicates), "repeated-request")
	s.counter(c.tftpDropped, float64(st.Stray), "stray")
	s.counter(c.tftpDropped, float64(st.Unsent), "unsent-error")
	s.counter(c.tftpReplaced, float64(st.Replaced))
	s.counter(c.tftpPassedOn, float64(st.PassedOn))
}

// records sends the record sink's queue, store and journal state.
func (s collection) records(st record.SinkStats) {
	c := s.c
	s.gauge(c.queue, float64(st.Pending))
	s.gauge(c.queueBytes, float64(st.PendingBytes))
	s.gauge(c.backlog, float64(max(st.JournalOnly-st.Recovered, 0)))
	s.counter(c.storeErrs, float64(st.StoreErrors))
	s.counter(c.written, float64(st.Written))
	s.counter(c.commits, float64(st.Batches))
	s.counter(c.dropped, float64(st.Dropped))
	s.gauge(c.journalBytes, float64(st.JournalBytes))
	s.gauge(c.journalCap, float64(st.JournalMaxBytes))
	s.gauge(c.storeFailing, b2f(st.Failing))
	s.counter(c.journalErrs, float64(st.JournalErrors))
	s.refusals("record", st.Refused)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
