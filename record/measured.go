package record

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// measuredLabels are the labels older pxeperfs wrote measured figures as,
// by the sources that wrote them, each with the field it now has
// (LiftLabels moves them); nothing else is a measured label.
var measuredLabels = map[string][]liftRule{
	"iperf3": perfsrvLabels,
	"iperf2": iperf2Labels,
	"bench":  benchLabels,
}

// liftRule sets a record's field from a label's value; false: the value
// does not parse, and the label stays.
type liftRule struct {
	key string
	set func(r *Record, v string) bool
}

var perfsrvLabels = []liftRule{
	{"jitter_ms", float(func(r *Record) *float64 { return &r.JitterMs })},
	{"udp_lost", integer(func(r *Record) *int64 { return &r.UDPLost })},
	{"udp_packets", integer(func(r *Record) *int64 { return &r.UDPPackets })},
	{"udp_lost_pct", float(func(r *Record) *float64 { return &r.UDPLostPct })},
	{"server_secs", seconds(func(r *Record) *time.Duration { return &r.ServerDuration }, time.Second)},
	{"duration_from", func(r *Record, v string) bool { r.ClientClock = v == "client"; return true }},
	{"client_bytes", integer(func(r *Record) *int64 { return &r.ClientBytes })},
	{"client_mbps", float(func(r *Record) *float64 { return &r.ClientMbps })},
	{"client_retransmits", integer(func(r *Record) *int64 { return &r.ClientRetransmits })},
	{"server_written", integer(func(r *Record) *int64 { return &r.ServerWritten })},
	{"server_sent", integer(func(r *Record) *int64 { return &r.ServerBytes })},
	{"server_acked", integer(func(r *Record) *int64 { return &r.ServerBytes })},
}

// iperf2Labels are those the iperf 2 server wrote (UDP only).
var iperf2Labels = []liftRule{perfsrvLabels[0], perfsrvLabels[1], perfsrvLabels[2], perfsrvLabels[3], perfsrvLabels[10]}

var benchLabels = []liftRule{
	{"jitter_ms", float(func(r *Record) *float64 { return &r.JitterMs })},
	{"udp_lost_pct", float(func(r *Record) *float64 { return &r.UDPLostPct })},
	{"sender_mbps", float(func(r *Record) *float64 { return &r.SenderMbps })},
	{"rcvbuf", func(r *Record, v string) bool {
		n, err := strconv.Atoi(v)
		if err != nil {
			return false
		}
		r.Rcvbuf = n
		return true
	}},
	{"cpu_ms", seconds(func(r *Record) *time.Duration { return &r.CPU }, time.Millisecond)},
	{"client_duplicates", integer(func(r *Record) *int64 { return &r.ClientDuplicates })},
	{"client_out_of_order", integer(func(r *Record) *int64 { return &r.ClientOutOfOrder })},
	{"client_early_acks", integer(func(r *Record) *int64 { return &r.ClientEarlyACKs })},
	{"client_timeouts", integer(func(r *Record) *int64 { return &r.ClientTimeouts })},
	{"iperf3_mbps", float(func(r *Record) *float64 { return &r.Iperf3Mbps })},
	{"iperf3_dev_pct", float(func(r *Record) *float64 { return &r.Iperf3DevPct })},
	{"iperf3_udp_lost_pct", float(func(r *Record) *float64 { return &r.Iperf3LostPct })},
	{"iperf3_err", func(r *Record, v string) bool { r.Iperf3Err = v; return true }},
}

func integer(field func(*Record) *int64) func(*Record, string) bool {
	return func(r *Record, v string) bool {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return false
		}
		*field(r) = n
		return true
	}
}

func float(field func(*Record) *float64) func(*Record, string) bool {
	return func(r *Record, v string) bool {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return false
		}
		*field(r) = f
		return true
	}
}

// seconds reads a decimal count of unit into a duration field.
func seconds(field func(*Record) *time.Duration, unit time.Duration) func(*Record, string) bool {
	return func(r *Record, v string) bool {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > float64(math.MaxInt64/unit) {
			return false
		}
		*field(r) = time.Duration(f * float64(unit))
		return true
	}
}

// LiftLabels moves the measured figures an older pxeperf wrote as labels
// (jitter_ms, client_mbps, server_secs, the bench's cpu_ms, ...) on an
// iperf3, iperf2 or bench record into their fields, and returns the keys
// it moved; a value that does not parse stays a label. Only a record with
// no measured field set is one of those: on any other (and on a served
// fetch) such a key is a label the user or host entry gave.
func LiftLabels(r *Record) []string {
	rules := measuredLabels[r.Source]
	if len(r.Labels) == 0 || rules == nil || measuredArgs(r) != (measuredArgs(&Record{})) {
		return nil
	}
	var moved []string
	for _, rule := range rules {
		if v, ok := r.Labels[rule.key]; ok && rule.set(r, v) {
			delete(r.Labels, rule.key)
			moved = append(moved, rule.key)
		}
	}
	if len(r.Labels) == 0 {
		r.Labels = nil
	}
	return moved
}

// measuredArgs are r's measured fields in the order of measuredColumns,
// as stored (durations in microseconds, booleans 0/1).
func measuredArgs(r *Record) [measuredCount]any {
	return [measuredCount]any{
		r.JitterMs, r.UDPLost, r.UDPPackets, r.UDPLostPct,
		r.ServerBytes, r.ServerWritten, us(r.ServerDuration), b2i(r.ClientClock),
		r.ClientBytes, r.ClientMbps, r.ClientRetransmits,
		r.SenderMbps, int64(r.Rcvbuf), us(r.CPU),
		r.ClientDuplicates, r.ClientOutOfOrder, r.ClientEarlyACKs, r.ClientTimeouts,
		r.Iperf3Mbps, r.Iperf3DevPct, r.Iperf3LostPct, r.Iperf3Err,
	}
}

// measuredColumns are the columns of the measured fields (schema 7).
const measuredColumns = `jitter_ms, udp_lost, udp_packets, udp_lost_pct, server_bytes, server_written,
	server_duration_us, client_clock, client_bytes, client_mbps, client_retransmits, sender_mbps, rcvbuf, cpu_us,
	client_duplicates, client_out_of_order, client_early_acks, client_timeouts,
	iperf3_mbps, iperf3_dev_pct, iperf3_udp_lost_pct, iperf3_err`

const measuredCount = 22

// scanMeasured are the destinations of measuredColumns on r; finish
// converts what needs it once scanned.
func scanMeasured(r *Record) (dest []any, finish func()) {
	var serverDur, cpu, clock, rcvbuf int64
	dest = []any{&r.JitterMs, &r.UDPLost, &r.UDPPackets, &r.UDPLostPct,
		&r.ServerBytes, &r.ServerWritten, &serverDur, &clock,
		&r.ClientBytes, &r.ClientMbps, &r.ClientRetransmits,
		&r.SenderMbps, &rcvbuf, &cpu,
		&r.ClientDuplicates, &r.ClientOutOfOrder, &r.ClientEarlyACKs, &r.ClientTimeouts,
		&r.Iperf3Mbps, &r.Iperf3DevPct, &r.Iperf3LostPct, &r.Iperf3Err}
	return dest, func() {
		r.ServerDuration, r.CPU = time.Duration(serverDur)*time.Microsecond, time.Duration(cpu)*time.Microsecond
		r.ClientClock, r.Rcvbuf = clock != 0, int(rcvbuf)
	}
}

// migrateMeasured is schema 7's data step, in the migration's
// transaction on either backend: the measured labels of older records
// (LiftLabels) become their columns, and leave the labels table, so
// --label filters and the labels read back are only what was said.
func migrateMeasured(ctx context.Context, tx *sql.Tx, rebind func(string) string) error {
	var sources []string
	for s := range measuredLabels {
		sources = append(sources, "'"+s+"'")
	}
	rows, err := tx.QueryContext(ctx, `SELECT id, source, labels FROM records WHERE source IN (`+
		strings.Join(sources, ",")+`) AND labels <> '{}' AND labels <> ''`)
	if err != nil {
		return err
	}
	type lifted struct {
		r     Record
		moved []string
	}
	var todo []lifted
	for rows.Next() {
		var r Record
		var labels string
		if err := rows.Scan(&r.ID, &r.Source, &labels); err != nil {
			rows.Close()
			return err
		}
		if err := json.Unmarshal([]byte(labels), &r.Labels); err != nil {
			continue // read as it is (scanRecord reports it)
		}
		if moved := LiftLabels(&r); len(moved) > 0 {
			todo = append(todo, lifted{r, moved})
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	set := strings.ReplaceAll(strings.Join(strings.Fields(measuredColumns), " "), ",", " = ?,") + " = ?, labels = ?"
	upd, err := tx.PrepareContext(ctx, rebind(`UPDATE records SET `+set+` WHERE id = ?`))
	if err != nil {
		return err
	}
	defer upd.Close()
	del, err := tx.PrepareContext(ctx, rebind(`DELETE FROM labels WHERE record_id = ? AND key = ?`))
	if err != nil {
		return err
	}
	defer del.Close()
	for _, l := range todo {
		labels := "{}"
		if len(l.r.Labels) > 0 {
			b, err := json.Marshal(l.r.Labels)
			if err != nil {
				return err
			}
			labels = string(b)
		}
		m := measuredArgs(&l.r)
		if _, err := upd.ExecContext(ctx, append(m[:], labels, l.r.ID)...); err != nil {
			return fmt.Errorf("record %d: %w", l.r.ID, err)
		}
		for _, k := range l.moved {
			if _, err := del.ExecContext(ctx, l.r.ID, k); err != nil {
				return fmt.Errorf("record %d: label %s: %w", l.r.ID, k, err)
			}
		}
	}
	return nil
}
