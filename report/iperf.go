package report

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/pxeperf/pxeperf/record"
)

// unit writes n the way iperf3 3.12's unit_snprintf does: bytes ('A') in
// 1024 steps with KByte/MByte/GByte, rates ('a') in 1000 steps with
// Kbit/Mbit/Gbit, always four places wide.
func unit(n float64, bytes bool) string {
	labels := []string{"bit", "Kbit", "Mbit", "Gbit", "Tbit"}
	step := 1000.0
	if bytes {
		labels = []string{"Byte", "KByte", "MByte", "GByte", "TByte"}
		step = 1024
	}
	i := 0
	for n >= step && i < len(labels)-1 {
		n /= step
		i++
	}
	var s string
	switch {
	case n < 9.995:
		s = fmt.Sprintf("%4.2f", n)
	case n < 99.95:
		s = fmt.Sprintf("%4.1f", n)
	default:
		s = fmt.Sprintf("%4.0f", n)
	}
	return s + " " + labels[i]
}

func secs(d time.Duration) float64 { return d.Seconds() }

func rate(bytes int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(bytes) * 8 / d.Seconds()
}

// iperf3 3.12's formats (iperf_locale.c): the interval line with Retr and
// Cwnd, the sender summary with Retr, and the receiver summary.
const (
	iperfHeader    = "[ ID] Interval           Transfer     Bitrate         Retr  Cwnd\n"
	iperfSumHeader = "[ ID] Interval           Transfer     Bitrate         Retr\n"
	iperfSeparator = "- - - - - - - - - - - - - - - - - - - - - - - - -\n"
	iperfLine      = "[%3d] %6.2f-%-6.2f sec  %ss  %ss/sec  %s   %s       \n"
	iperfSender    = "[%3d] %6.2f-%-6.2f sec  %ss  %ss/sec  %s             sender\n"
	iperfReceiver  = "[%3d] %6.2f-%-6.2f sec  %ss  %ss/sec                  receiver\n"
)

// IntervalRow is one interval line, typed for JSON and CSV.
type IntervalRow struct {
	Start       float64 `json:"start_s"`
	End         float64 `json:"end_s"`
	Bytes       int64   `json:"bytes"`
	Mbps        float64 `json:"mbps"`
	Retransmits *uint32 `json:"retransmits"` // null: the sender's count was not seen
	Cwnd        *uint32 `json:"cwnd"`        // null: the sender's window was not seen
}

// serverReceived says the record's server was the receiving end: a
// perfsrv test the board sent in (iperf3 without -R, iperf 2 without
// -R). A receiver's TCP_INFO holds neither the sender's retransmits nor
// its congestion window: iperf3's own receiving side prints no Retr or
// Cwnd column.
func serverReceived(r record.Record) bool {
	return boardSent(r) && (r.Source == "iperf3" || r.Source == "iperf2")
}

// boardSent says the board was the sending end (Direction "tx").
func boardSent(r record.Record) bool { return strings.EqualFold(r.Direction, "tx") }

// senderSeen says an interval carries the sender's TCP_INFO: not when the
// server received, nor when no TCP_INFO was read (a sender's congestion
// window is never 0; UDP has none).
func senderSeen(r record.Record, iv record.Interval) bool {
	return !serverReceived(r) && (iv.Cwnd > 0 || iv.Retransmits > 0)
}

func describe(r record.Record) string {
	who := r.ClientIP
	var extra []string
	if r.ClientMAC != "" {
		extra = append(extra, r.ClientMAC)
	}
	if r.Host != "" {
		extra = append(extra, r.Host)
	}
	if len(extra) > 0 {
		who += " (" + strings.Join(extra, ", ") + ")"
	}
	way := "to" // the board received
	if boardSent(r) {
		way = "from"
	}
	return fmt.Sprintf("fetch %d: %s over %s %s %s, %s, %s", r.ID, r.File, r.Proto, way, who,
		r.Time.UTC().Format("2006-01-02 15:04:05 UTC"), r.Outcome)
}

// Intervals lays out a fetch's interval samples as iperf3 3.12 prints a
// client run: the ID column is the record ID; each line is one sample
// (Transfer in 1024-based bytes, Bitrate in 1000-based bits, Retr the
// segments sent again in it, Cwnd the sender's congestion window at its
// end; both "-" where the sender's TCP_INFO was not seen, see senderSeen).
// The sender summary is the sending side's: its bytes and all its
// retransmits over the fetch (the server's when it sent; the board's own
// count from iperf3's result exchange when the board sent, "-" for iperf 2,
// which has none); the receiver line, printed only for a completed fetch,
// says every byte arrived.
func Intervals(r record.Record, ivs []record.Interval) Table {
	t := Table{
		Name:  "intervals",
		Title: "Intervals of " + describe(r),
		Columns: []Column{{Name: "Start (s)", Key: "start_s"}, {Name: "End (s)", Key: "end_s"}, {Name: "Bytes", Key: "bytes"},
			{Name: "Mbit/s", Key: "mbps"}, {Name: "Retr", Key: "retransmits"}, {Name: "Cwnd (bytes)", Key: "cwnd_bytes"}},
		Empty: fmt.Sprintf("Fetch %d has no interval samples (TFTP fetches and fetches shorter than one interval have none).", r.ID),
	}
	rows := []IntervalRow{}
	var b strings.Builder
	b.WriteString("pxeperf " + describe(r) + "\n")
	if len(ivs) == 0 {
		b.WriteString(t.Empty + "\n")
	} else {
		b.WriteString(iperfHeader)
	}
	unseen := false
	for _, iv := range ivs {
		row := IntervalRow{Start: secs(iv.Start), End: secs(iv.End), Bytes: iv.Bytes, Mbps: iv.Mbps()}
		retr, cwnd := "", ""
		retrText, cwndText := "  -", "   -"
		if senderSeen(r, iv) {
			row.Retransmits, row.Cwnd = ptr(iv.Retransmits), ptr(iv.Cwnd)
			retr, cwnd = strconv.FormatUint(uint64(iv.Retransmits), 10), strconv.FormatUint(uint64(iv.Cwnd), 10)
			retrText, cwndText = fmt.Sprintf("%3d", iv.Retransmits), unit(float64(iv.Cwnd), true)+"s"
		} else {
			unseen = true
		}
		rows = append(rows, row)
		t.Rows = append(t.Rows, []string{
			strconv.FormatFloat(row.Start, 'f', 2, 64), strconv.FormatFloat(row.End, 'f', 2, 64),
			strconv.FormatInt(iv.Bytes, 10), mbps(row.Mbps), retr, cwnd})
		fmt.Fprintf(&b, iperfLine, r.ID, row.Start, row.End, unit(float64(iv.Bytes), true),
			unit(rate(iv.Bytes, iv.End-iv.Start), false), retrText, cwndText)
	}
	t.Data = rows
	if unseen {
		why := "no sender's TCP_INFO was read"
		if serverReceived(r) {
			why = "the board sent and the server received: a receiver sees neither (iperf3's receiving side prints no such columns)"
		}
		t.Notes = append(t.Notes, "Retr and Cwnd are - (unknown, not 0) where "+why+".")
	}
	b.WriteString(iperfSeparator)
	b.WriteString(iperfSumHeader)
	end := secs(r.Duration)
	sent, bitrate := unit(float64(r.Bytes), true), unit(rate(r.Bytes, r.Duration), false)
	retr := fmt.Sprintf("%3d", r.Retransmits)
	if r.Retransmits < 0 || serverReceived(r) && r.Source == "iperf2" {
		// iperf3: the board's results never came (record.RetransmitsUnknown).
		retr = "  -" // iperf 2 has no result exchange: the board's count never reaches the server
	}
	fmt.Fprintf(&b, iperfSender, r.ID, 0.0, end, sent, bitrate, retr)
	if r.Outcome == "ok" {
		fmt.Fprintf(&b, iperfReceiver, r.ID, 0.0, end, sent, bitrate)
	}
	t.Layout = b.String()
	return t
}

// NetperfRow is the netperf summary, typed for JSON and CSV.
type NetperfRow struct {
	RecvSocket *int64  `json:"recv_socket_bytes,omitempty"`  // nil: not known
	SendSocket *int64  `json:"send_socket_bytes,omitempty"`  // nil: not recorded
	Message    *int64  `json:"send_message_bytes,omitempty"` // nil: no MSS recorded
	Elapsed    float64 `json:"elapsed_s"`
	Throughput float64 `json:"throughput_mbps"` // 10^6 bits/s
}

// netperf 2.7's TCP_STREAM title and result line (nettest_bsd.c tput_title,
// tput_fmt_1).
const (
	netperfTitle = "Recv   Send    Send                          \n" +
		"Socket Socket  Message  Elapsed              \n" +
		"Size   Size    Size     Time     Throughput  \n" +
		"bytes  bytes   bytes    secs.    10^6bits/sec  \n\n"
	netperfLine = "%6s %6s %6s    %-6.2f   %7.2f   \n"
)

// Netperf lays out a fetch as netperf's TCP_STREAM summary. The columns are
// filled from:
//   - Recv socket size: the receive buffer the bench asked for
//     (WndRequested); else the largest window the client advertised
//     (WndMax) when the client received; "-" when neither is known (TFTP has no socket buffer to
//     report: its blksize and windowsize are in the title line);
//   - Send socket size: not recorded (pxeperf does not set SO_SNDBUF; the
//     kernel autotunes it): "-", never a made-up 0;
//   - Send message size: TFTP blksize; for TCP the MSS (a served file goes
//     out with sendfile, so there is no application message); "-" when
//     no MSS was recorded (perfsrv's tests);
//   - Elapsed time: the fetch's duration;
//   - Throughput: the fetch's Mbit/s (10^6 bits/s).
func Netperf(r record.Record) Table {
	row := NetperfRow{Elapsed: r.Duration.Seconds(), Throughput: r.Mbps}
	switch {
	case r.WndRequested > 0:
		row.RecvSocket = ptr(int64(r.WndRequested))
	case r.WndMax > 0 && !boardSent(r):
		// The board's advertised window is the receiver's only when it received.
		row.RecvSocket = ptr(int64(r.WndMax))
	}
	if r.BlkSize > 0 {
		row.Message = ptr(int64(r.BlkSize))
	} else if r.MSS > 0 {
		row.Message = ptr(int64(r.MSS))
	}
	kind := "TCP"
	if protoClass(r.Proto) == "UDP" {
		kind = "UDP"
	}
	t := Table{
		Name:  "netperf",
		Title: "netperf-style summary of " + describe(r),
		Columns: []Column{{Name: "Recv socket bytes", Key: "recv_socket_bytes"}, {Name: "Send socket bytes", Key: "send_socket_bytes"},
			{Name: "Send message bytes", Key: "send_message_bytes"}, {Name: "Elapsed s", Key: "elapsed_s"},
			{Name: "Throughput 10^6bits/s", Key: "throughput_mbps"}},
		Rows: [][]string{{optInt(row.RecvSocket), optInt(row.SendSocket),
			optInt(row.Message), strconv.FormatFloat(row.Elapsed, 'f', 2, 64),
			strconv.FormatFloat(row.Throughput, 'f', 2, 64)}},
		Data: []NetperfRow{row},
		Notes: []string{"Recv socket: requested receive buffer, else the largest client window when the board received (TFTP: none, -); " +
			"send socket: not recorded (-); message: TFTP blksize, else the MSS."},
	}
	who := r.ClientIP
	if r.Host != "" {
		who = r.Host + " (" + r.ClientIP + ")"
	}
	// netperf names the sender first: the record's Direction says which
	// end that was (tx: the board sent).
	from, to := "pxeperf", who
	if boardSent(r) {
		from, to = who, "pxeperf"
	}
	title := fmt.Sprintf("%s STREAM TEST from %s to %s : fetch %d %s over %s, %s", kind, from, to, r.ID, r.File, r.Proto, r.Outcome)
	if r.BlkSize > 0 {
		title += fmt.Sprintf(" (blksize %d, windowsize %d)", r.BlkSize, max(r.WindowSize, 1))
	}
	t.Layout = title + "\n" + netperfTitle + fmt.Sprintf(netperfLine, dashOr(row.RecvSocket), dashOr(row.SendSocket), dashOr(row.Message),
		row.Elapsed, row.Throughput)
	return t
}

func ptr[T any](v T) *T { return &v }

// optInt is a cell: the number, or "" (shown as -) when unknown.
func optInt(v *int64) string {
	if v == nil {
		return ""
	}
	return strconv.FormatInt(*v, 10)
}

// dashOr is optInt for the netperf layout.
func dashOr(v *int64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatInt(*v, 10)
}
