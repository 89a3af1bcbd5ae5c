package httpboot

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/hosts"
)

// fetch is one request for a file or the script, from its start to its
// record: the writer that counts the body, the monitor that samples the
// connection, and whether the record went out already (before the last
// byte, see countingWriter.ReadFrom).
type fetch struct {
	s     *Server
	r     *http.Request
	rec   *event.Fetch
	cw    *countingWriter
	mon   *monitor
	start time.Time
	// expect is the body length the response promised (see outcome); set
	// once the answer is written.
	expect  int64
	emitted bool
}

// serveFetch answers a request for a file, a generated config or the
// script (or its refusal), and puts one record on the sink.
func (s *Server) serveFetch(w http.ResponseWriter, r *http.Request) {
	s.active.Add(1)
	defer s.active.Add(-1)
	start := time.Now()
	rec, client, refusal := s.newFetch(r, start)
	cw := &countingWriter{ResponseWriter: w, live: s.opt.Active.Begin(rec)}
	defer cw.live.End()
	mon := s.watch(r, cw)
	if k, ok := mon.conn.(corker); ok {
		cw.cork = k
	}
	f := &fetch{s: s, r: r, rec: rec, cw: cw, mon: mon, start: start}
	// A file's record goes out before its last byte (see
	// countingWriter.ReadFrom), once the client has acknowledged the rest
	// (monitor.settle); that byte still honours the stall timeout.
	cw.beforeLast = f.beforeLast
	f.expect = f.answer(client, refusal)
	f.end()
}

// answer writes the response: the refusal, the script, or a file. It
// returns the promised body length (see outcome).
func (f *fetch) answer(client hosts.Client, refusal *refusal) int64 {
	s, r, rec := f.s, f.r, f.rec
	switch {
	case refusal != nil:
		rec.Outcome, rec.Err = refusal.outcome, refusal.msg
		http.Error(f.cw, "pxeperf: "+refusal.msg, refusal.status)
		return 0
	case r.URL.Path == s.opt.ScriptPath && !s.scriptInRoot():
		rec.Kind = event.KindConfig
		return s.serveScript(f.cw, r, rec, client)
	default:
		return s.serveFile(f.cw, r, rec)
	}
}

// beforeLast settles the body and emits the record before the last byte
// is written, unless the client fell under the rate floor meanwhile: the
// last byte then meets the passed deadline, and the record (an error)
// follows in end.
func (f *fetch) beforeLast() {
	f.mon.settle(f.cw.n.Load())
	if f.mon.slow.Load() {
		return
	}
	f.emit(1)
	f.mon.arm()
}

// end emits the record when beforeLast did not, else clears the deadline
// that the last byte honoured.
func (f *fetch) end() {
	if !f.emitted {
		f.emit(0)
		return
	}
	f.mon.disarm()
	if f.cw.err != nil {
		f.s.opt.Logger.Debug("http fetch: client went away before the last byte", "file", f.rec.File,
			"client", f.rec.Client.String(), "err", f.cw.err)
	}
}

// emit finishes the record with pending bytes still to be written and
// hands it to the sink, unless the client's record budget refuses it.
func (f *fetch) emit(pending int64) {
	s, rec, cw := f.s, f.rec, f.cw
	f.emitted = true
	rec.TCP, rec.Intervals, rec.Bytes = f.mon.finish(pending)
	rec.Duration = time.Since(f.start)
	if rec.Bytes < cw.n.Load()+pending && cw.err == nil {
		// settle gave up with the queue unacknowledged: the client
		// stopped taking it in (or went away) before the last byte.
		cw.err = errUnacked
	}
	s.outcome(rec, cw, f.r, f.expect)
	if f.mon.slow.Load() && rec.Outcome != event.OutcomeOK {
		f.tooSlow()
	}
	if cw.status >= 400 {
		rec.Bytes = 0 // an error page is not the file
	}
	if !f.onRecord() {
		return
	}
	s.opt.Sink.Fetch(rec)
}

// tooSlow makes the record of a fetch the rate floor ended an error
// naming the settings, and counts the refusal.
func (f *fetch) tooSlow() {
	s, rec, h := f.s, f.rec, f.s.opt.HTTP
	rec.Outcome = event.OutcomeError
	rec.Err = fmt.Sprintf("too slow: under %d KiB/s over %s (http.min_rate_kib, min_rate_window)", h.MinRateKiB, h.MinRateWindow)
	s.refused.Refuse(refuseSlow, rec.Client.Addr().String(), "file", rec.File, "bytes", rec.Bytes,
		"min_rate_kib", h.MinRateKiB, "window", h.MinRateWindow, "fix", "lower http.min_rate_kib")
}

// onRecord says whether the record may go on record: a failed fetch
// takes from the client's errBudget and a probe (see probe) from its
// probeBudget, and one over its budget is counted as refused instead. A
// lab wants to see failed boots, but one client's flood of them, or a
// loop of HEADs or one-byte ranges on a keep-alive connection (they cost
// the client nothing), must not fill the store.
func (f *fetch) onRecord() bool {
	s, rec, status := f.s, f.rec, f.cw.status
	client := rec.Client.Addr()
	if status >= 400 {
		if s.errBudget.take(client) {
			return true
		}
		s.refused.Refuse(refuseErrorRecords, client.String(), "status", status,
			"file", rec.File, "cap_per_minute", s.opt.HTTP.ErrorRecordsPerMinute,
			"fix", "raise http.error_records_per_minute")
		return false
	}
	if !probe(f.r, status, rec.Bytes) || s.probeBudget.take(client) {
		return true
	}
	s.refused.Refuse(refuseProbeRecords, client.String(), "method", f.r.Method,
		"status", status, "file", rec.File, "cap_per_minute", s.opt.HTTP.ProbeRecordsPerMinute,
		"fix", "raise http.probe_records_per_minute")
	return false
}

// probeBelow is the body size under which a range answer counts as a
// probe (see probe): a client resuming or splitting a download asks for
// more at a time.
const probeBelow = 64 << 10

// probe reports whether a successful fetch is one a client can repeat at
// no cost, so that its records take from probeBudget: a HEAD, or a range
// answer (206) of under probeBelow bytes. A firmware's HEAD before its
// download (UEFI HTTP boot sends one) is still recorded, one per boot
// (see httpboot/DESIGN.md#records-of-heads-and-small-ranges).
func probe(r *http.Request, status int, body int64) bool {
	return r.Method == http.MethodHead || (status == http.StatusPartialContent && body < probeBelow)
}

// outcome classifies a finished fetch. expect is the body length the
// response promised (-1 unknown; 0 for HEAD and errors already classified).
func (s *Server) outcome(rec *event.Fetch, cw *countingWriter, r *http.Request, expect int64) {
	if rec.Outcome != "" {
		return
	}
	if r.Method == http.MethodHead {
		expect = 0
	} else if cl := cw.Header().Get("Content-Length"); cl != "" {
		if v, err := strconv.ParseInt(cl, 10, 64); err == nil {
			expect = v
		}
	}
	status := cw.status
	if status == 0 {
		status = http.StatusOK
	}
	switch {
	case status >= 400:
		rec.Outcome = event.OutcomeError
		rec.Err = fmt.Sprintf("HTTP %d %s", status, http.StatusText(status))
	case expect >= 0 && rec.Bytes >= expect:
		// Every byte was handed to the kernel. OVMF resets the connection
		// right after a download; that is not a failure.
		rec.Outcome = event.OutcomeOK
	case errors.Is(cw.err, errDeadline):
		rec.Outcome = event.OutcomeError
		rec.Err = fmt.Sprintf("stalled: no progress for %s (http.stall_timeout)", s.opt.HTTP.StallTimeout)
	case cw.err != nil:
		rec.Outcome = event.OutcomeAborted
		rec.Err = cw.err.Error()
	case expect < 0:
		rec.Outcome = event.OutcomeOK
	default:
		rec.Outcome = event.OutcomeError
		rec.Err = fmt.Sprintf("sent %d of %d bytes: the file shrank while being served", rec.Bytes, expect)
	}
	if rec.Outcome != event.OutcomeOK {
		s.opt.Logger.Debug("http fetch not ok", "file", rec.File, "client", rec.Client.String(),
			"bytes", rec.Bytes, "outcome", rec.Outcome, "err", rec.Err)
	}
}
