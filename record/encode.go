package record

import (
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// marshalEntry is json.Marshal(e), byte for byte, without reflection for a
// record entry, because it runs on every served fetch's path (see
// DESIGN.md#the-journal-line-without-reflection). Lease entries, and values
// json.Marshal refuses (a NaN rate, a year past 9999), go through
// json.Marshal; TestMarshalEntry and FuzzMarshalEntry hold the two to the
// same bytes.
func marshalEntry(e *entry) ([]byte, error) {
	if e.Lease != nil || e.Record == nil || !plain(e.Record) {
		return json.Marshal(e)
	}
	r := e.Record
	b := make([]byte, 0, 1024+len(r.File)+len(r.Err)+160*len(e.Intervals))
	b = append(b, `{"uid":`...)
	b = appendString(b, e.UID)
	b = append(b, `,"record":`...)
	b = appendRecord(b, r)
	if len(e.Intervals) > 0 {
		b = appendIntervals(append(b, `,"intervals":`...), e.Intervals)
	}
	return append(b, '}'), nil
}

// appendRecord writes r as json.Marshal does: every field in Record's
// order, an omitempty one only when set. Each step is one of Record's
// groups of fields.
func appendRecord(b []byte, r *Record) []byte {
	b = appendFetch(b, r)
	b = appendTCP(b, r)
	b = appendTFTP(b, r)
	b = appendInterface(b, r)
	b = appendDelay(b, r)
	b = optString(b, `,"link_driver":`, r.LinkDriver)
	b = appendUDP(b, r)
	b = appendPerfsrv(b, r)
	b = appendBenchClient(b, r)
	b = appendCrossCheck(b, r)
	return append(b, '}')
}

// appendFetch opens the record with what every record has: who fetched
// what, when, how much and how it ended, its labels and its server.
func appendFetch(b []byte, r *Record) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, r.ID, 10)
	b = append(b, `,"time":"`...)
	b = r.Time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","source":`...)
	b = appendString(b, r.Source)
	b = append(b, `,"proto":`...)
	b = appendString(b, r.Proto)
	b = append(b, `,"direction":`...)
	b = appendString(b, r.Direction)
	b = optString(b, `,"client_mac":`, r.ClientMAC)
	b = append(b, `,"client_ip":`...)
	b = appendString(b, r.ClientIP)
	b = optString(b, `,"host":`, r.Host)
	b = optString(b, `,"arch":`, r.Arch)
	b = append(b, `,"file":`...)
	b = appendString(b, r.File)
	b = optString(b, `,"kind":`, r.Kind)
	b = append(b, `,"bytes":`...)
	b = strconv.AppendInt(b, r.Bytes, 10)
	b = append(b, `,"size":`...)
	b = strconv.AppendInt(b, r.Size, 10)
	b = append(b, `,"duration_ns":`...)
	b = strconv.AppendInt(b, int64(r.Duration), 10)
	b = append(b, `,"mbps":`...)
	b = appendFloat(b, r.Mbps)
	b = append(b, `,"outcome":`...)
	b = appendString(b, r.Outcome)
	b = optString(b, `,"err":`, r.Err)
	b = appendLabels(b, r.Labels)
	b = optString(b, `,"server":`, r.Server)
	return optString(b, `,"site":`, r.Site)
}

// appendLabels writes the labels sorted by key, as json.Marshal writes a
// map; nothing when there are none.
func appendLabels(b []byte, labels map[string]string) []byte {
	if len(labels) == 0 {
		return b
	}
	b = append(b, `,"labels":{`...)
	for i, k := range slices.Sorted(maps.Keys(labels)) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		b = appendString(b, labels[k])
	}
	return append(b, '}')
}

// appendTCP writes what TCP_INFO said of an HTTP (TCP) fetch.
func appendTCP(b []byte, r *Record) []byte {
	b = optInt(b, `,"wnd_max":`, int64(r.WndMax))
	b = optInt(b, `,"wnd_median":`, int64(r.WndMedian))
	b = optInt(b, `,"wnd_requested":`, int64(r.WndRequested))
	b = optInt(b, `,"rtt_ns":`, int64(r.RTT))
	b = optInt(b, `,"min_rtt_ns":`, int64(r.MinRTT))
	b = append(b, `,"retransmits":`...)
	b = strconv.AppendInt(b, r.Retransmits, 10)
	if r.DeliveryRate != 0 {
		b = append(b, `,"delivery_rate":`...)
		b = strconv.AppendUint(b, r.DeliveryRate, 10)
	}
	b = optInt(b, `,"rwnd_limited_ns":`, int64(r.RwndLimited))
	b = optInt(b, `,"sndbuf_limited_ns":`, int64(r.SndbufLimited))
	b = optInt(b, `,"mss":`, int64(r.MSS))
	return optInt(b, `,"pmtu":`, int64(r.PMTU))
}

// appendTFTP writes a TFTP transfer's options and what its sender did.
func appendTFTP(b []byte, r *Record) []byte {
	b = optInt(b, `,"blksize":`, int64(r.BlkSize))
	b = optInt(b, `,"windowsize":`, int64(r.WindowSize))
	b = optTrue(b, `,"tsize":true`, r.TSize)
	b = optInt(b, `,"datagrams":`, r.Datagrams)
	b = optInt(b, `,"acked":`, r.Acked)
	b = optInt(b, `,"timeouts":`, r.Timeouts)
	b = optInt(b, `,"eff_wnd_min":`, int64(r.EffWndMin))
	b = optInt(b, `,"eff_wnd_median":`, int64(r.EffWndMedian))
	b = optInt(b, `,"eff_wnd_max":`, int64(r.EffWndMax))
	return optInt(b, `,"loss_events":`, r.LossEvents)
}

// appendInterface writes the server's interface: MTU, speed, rate limit,
// offloads and kernel.
func appendInterface(b []byte, r *Record) []byte {
	b = optString(b, `,"iface":`, r.Iface)
	b = optInt(b, `,"mtu":`, int64(r.MTU))
	b = optInt(b, `,"link_mbps":`, int64(r.LinkMbps))
	b = optInt(b, `,"rate_limit_bps":`, r.RateLimit)
	b = optString(b, `,"rx_csum":`, string(r.RxCsum))
	b = optString(b, `,"tx_csum":`, string(r.TxCsum))
	b = optString(b, `,"tso":`, string(r.TSO))
	b = optString(b, `,"gso":`, string(r.GSO))
	b = optString(b, `,"gro":`, string(r.GRO))
	return optString(b, `,"kernel":`, r.Kernel)
}

// appendDelay writes the delay a bench fetch asked for and what the delay
// line delivered.
func appendDelay(b []byte, r *Record) []byte {
	b = optInt(b, `,"delay_asked_ns":`, int64(r.DelayAsked))
	b = optInt(b, `,"delay_p50_ns":`, int64(r.DelayP50))
	b = optInt(b, `,"delay_p99_ns":`, int64(r.DelayP99))
	b = optInt(b, `,"delay_max_ns":`, int64(r.DelayMax))
	b = optInt(b, `,"delay_frames":`, r.DelayFrames)
	b = optInt(b, `,"delay_late":`, r.DelayLate)
	return optTrue(b, `,"delay_behind":true`, r.DelayBehind)
}

// appendUDP writes the receiving end's UDP counts.
func appendUDP(b []byte, r *Record) []byte {
	b = optFloat(b, `,"jitter_ms":`, r.JitterMs)
	b = optInt(b, `,"udp_lost":`, r.UDPLost)
	b = optInt(b, `,"udp_packets":`, r.UDPPackets)
	return optFloat(b, `,"udp_lost_pct":`, r.UDPLostPct)
}

// appendPerfsrv writes perfsrv's own figures beside the board's.
func appendPerfsrv(b []byte, r *Record) []byte {
	b = optInt(b, `,"server_bytes":`, r.ServerBytes)
	b = optInt(b, `,"server_written":`, r.ServerWritten)
	b = optInt(b, `,"server_duration_ns":`, int64(r.ServerDuration))
	b = optTrue(b, `,"client_clock":true`, r.ClientClock)
	b = optInt(b, `,"client_bytes":`, r.ClientBytes)
	b = optFloat(b, `,"client_mbps":`, r.ClientMbps)
	return optInt(b, `,"client_retransmits":`, r.ClientRetransmits)
}

// appendBenchClient writes the bench client's side of the fetch.
func appendBenchClient(b []byte, r *Record) []byte {
	b = optFloat(b, `,"sender_mbps":`, r.SenderMbps)
	b = optInt(b, `,"rcvbuf":`, int64(r.Rcvbuf))
	b = optInt(b, `,"cpu_ns":`, int64(r.CPU))
	b = optInt(b, `,"client_duplicates":`, r.ClientDuplicates)
	b = optInt(b, `,"client_out_of_order":`, r.ClientOutOfOrder)
	b = optInt(b, `,"client_early_acks":`, r.ClientEarlyACKs)
	return optInt(b, `,"client_timeouts":`, r.ClientTimeouts)
}

// appendCrossCheck writes iperf3's figures of bench --cross-check.
func appendCrossCheck(b []byte, r *Record) []byte {
	b = optFloat(b, `,"iperf3_mbps":`, r.Iperf3Mbps)
	b = optFloat(b, `,"iperf3_dev_pct":`, r.Iperf3DevPct)
	b = optFloat(b, `,"iperf3_udp_lost_pct":`, r.Iperf3LostPct)
	return optString(b, `,"iperf3_err":`, r.Iperf3Err)
}

// appendIntervals writes ivs as a JSON array (every field, none omitempty).
func appendIntervals(b []byte, ivs []Interval) []byte {
	b = append(b, '[')
	for i := range ivs {
		iv := &ivs[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"record_id":`...)
		b = strconv.AppendInt(b, iv.RecordID, 10)
		b = append(b, `,"start_ns":`...)
		b = strconv.AppendInt(b, int64(iv.Start), 10)
		b = append(b, `,"end_ns":`...)
		b = strconv.AppendInt(b, int64(iv.End), 10)
		b = append(b, `,"bytes":`...)
		b = strconv.AppendInt(b, iv.Bytes, 10)
		b = append(b, `,"retransmits":`...)
		b = strconv.AppendUint(b, uint64(iv.Retransmits), 10)
		b = append(b, `,"cwnd":`...)
		b = strconv.AppendUint(b, uint64(iv.Cwnd), 10)
		b = append(b, `,"snd_wnd":`...)
		b = strconv.AppendUint(b, uint64(iv.SndWnd), 10)
		b = append(b, `,"rtt_ns":`...)
		b = strconv.AppendInt(b, int64(iv.RTT), 10)
		b = append(b, '}')
	}
	return append(b, ']')
}

// plain reports whether json.Marshal takes r as it is: a finite rate and a
// time it can write (time.Time.MarshalJSON refuses years outside 0-9999
// and zone offsets of a day or more).
func plain(r *Record) bool {
	for _, f := range [...]float64{r.Mbps, r.JitterMs, r.UDPLostPct, r.ClientMbps, r.SenderMbps,
		r.Iperf3Mbps, r.Iperf3DevPct, r.Iperf3LostPct} {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return false
		}
	}
	_, off := r.Time.Zone()
	y := r.Time.Year()
	return y >= 0 && y <= 9999 && off > -24*3600 && off < 24*3600
}

func optString(b []byte, key, v string) []byte {
	if v == "" {
		return b
	}
	return appendString(append(b, key...), v)
}

func optFloat(b []byte, key string, v float64) []byte {
	if v == 0 {
		return b
	}
	return appendFloat(append(b, key...), v)
}

func optInt(b []byte, key string, v int64) []byte {
	if v == 0 {
		return b
	}
	return strconv.AppendInt(append(b, key...), v, 10)
}

// optTrue writes field, its key and the value true, when v is set.
func optTrue(b []byte, field string, v bool) []byte {
	if !v {
		return b
	}
	return append(b, field...)
}

// appendFloat writes f as encoding/json does (ES6 number formatting).
func appendFloat(b []byte, f float64) []byte {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 -> e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendString writes s quoted as encoding/json does: HTML-safe, invalid
// UTF-8 as U+FFFD, U+2028 and U+2029 escaped.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case c == '\u2028' || c == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[c&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
