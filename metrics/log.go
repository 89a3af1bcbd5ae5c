package metrics

import (
	"context"
	"encoding"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"sort"
	"strings"

	"github.com/pxeperf/pxeperf/event"
)

// NewLogger returns serve's logger: format "json" writes one JSON object
// per line (slog.JSONHandler), anything else logfmt-style text with maps,
// lists and structs written as PlainAttr writes them.
func NewLogger(w io.Writer, format string, level slog.Level) *slog.Logger {
	opt := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opt))
	}
	opt.ReplaceAttr = PlainAttr
	return slog.New(slog.NewTextHandler(w, opt))
}

// PlainAttr is a text handler's ReplaceAttr that writes no Go syntax: a
// map as its pairs sorted by key (refused="dup=2,rate=1", not
// refused=map[dup:2 rate:1]), a list as its items joined by commas, a
// struct as field=value pairs; an empty map or list is left out (no
// refused=map[]). Values that format themselves (errors, Stringers,
// TextMarshalers) pass as they are.
func PlainAttr(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() != slog.KindAny {
		return a
	}
	v := a.Value.Any()
	switch v.(type) {
	case error, fmt.Stringer, encoding.TextMarshaler, []byte:
		return a
	}
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface {
		if rv.IsNil() {
			return a
		}
		rv = rv.Elem()
	}
	switch rv.Kind() {
	case reflect.Map, reflect.Slice, reflect.Array:
		if rv.Len() == 0 {
			return slog.Attr{}
		}
	case reflect.Struct:
	default:
		return a
	}
	return slog.String(a.Key, plainText(rv))
}

// plainText writes v as PlainAttr does, nested values too.
func plainText(v reflect.Value) string {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return ""
		}
		v = v.Elem()
	}
	if v.CanInterface() {
		switch x := v.Interface().(type) {
		case error:
			return x.Error()
		case fmt.Stringer:
			return x.String()
		case encoding.TextMarshaler:
			if b, err := x.MarshalText(); err == nil {
				return string(b)
			}
		}
	}
	var parts []string
	switch v.Kind() {
	case reflect.Map:
		for _, k := range v.MapKeys() {
			parts = append(parts, plainText(k)+"="+plainText(v.MapIndex(k)))
		}
		sort.Strings(parts)
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			parts = append(parts, plainText(v.Index(i)))
		}
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			if f := t.Field(i); f.IsExported() {
				parts = append(parts, strings.ToLower(f.Name)+"="+plainText(v.Field(i)))
			}
		}
	default:
		return fmt.Sprint(v.Interface())
	}
	return strings.Join(parts, ",")
}

// Log is an event.Sink writing one line per fetch (msg "fetch") and per
// lease (msg "lease"), keyed by the record store's JSON field names
// (record.Record and record.Lease), so a log line and an /api/fetches
// record read alike. The line's own time is when the fetch ended (a
// record's time is its start: time minus duration_ns).
type Log struct{ Logger *slog.Logger }

var _ event.Sink = Log{}

// Fetch logs a finished fetch.
func (l Log) Fetch(f *event.Fetch) {
	a := make([]slog.Attr, 0, 24)
	a = append(a, slog.String("proto", f.Proto),
		slog.String("direction", "rx"), slog.String("client_ip", f.Client.Addr().String()))
	if f.MAC != nil {
		a = append(a, slog.String("client_mac", f.MAC.String()))
	}
	if f.Host != "" {
		a = append(a, slog.String("host", f.Host))
	}
	a = append(a, slog.String("file", f.File))
	if f.Kind != "" {
		a = append(a, slog.String("kind", f.Kind))
	}
	a = append(a, slog.Int64("bytes", f.Bytes), slog.Int64("size", f.Size),
		slog.Int64("duration_ns", int64(f.Duration)), slog.Float64("mbps", round2(f.Mbps())),
		slog.String("outcome", f.Outcome))
	if f.Err != "" {
		a = append(a, slog.String("err", f.Err))
	}
	if len(f.Labels) > 0 {
		a = append(a, slog.Any("labels", f.Labels))
	}
	if t := f.TFTP; t != nil {
		a = append(a, slog.Int("blksize", t.BlockSize), slog.Int("windowsize", t.WindowSize),
			slog.Bool("tsize", t.TSize), slog.Int64("datagrams", t.Datagrams),
			slog.Int64("retransmits", t.Retransmits), slog.Int64("timeouts", t.Timeouts))
	}
	if t := f.TCP; t != nil && !t.Measured() {
		a = append(a, slog.Int64("retransmits", int64(t.Retransmits))) // the board's relayed count alone
	} else if t != nil {
		a = append(a, slog.Int64("wnd_max", int64(t.MaxSndWnd)), slog.Int64("wnd_median", int64(t.MedSndWnd)),
			slog.Int64("rtt_ns", int64(t.RTT)), slog.Int64("min_rtt_ns", int64(t.MinRTT)),
			slog.Int64("retransmits", int64(t.Retransmits)), slog.Uint64("delivery_rate", t.DeliveryRate),
			slog.Int64("rwnd_limited_ns", int64(t.RWndLimited)), slog.Int64("sndbuf_limited_ns", int64(t.SndBufLimited)),
			slog.Int64("mss", int64(t.MSS)), slog.Int64("pmtu", int64(t.PMTU)))
	}
	if f.Interface != "" {
		a = append(a, slog.String("iface", f.Interface))
	}
	l.Logger.LogAttrs(context.Background(), slog.LevelInfo, "fetch", a...)
}

// Lease logs a binding; a proxy answer has no address, so no addr.
func (l Log) Lease(e *event.Lease) {
	a := []slog.Attr{slog.String("client_mac", e.MAC.String())}
	if e.Addr.IsValid() {
		a = append(a, slog.String("addr", e.Addr.String()))
	}
	a = append(a, slog.Int("arch", int(e.Arch)))
	if e.Host != "" {
		a = append(a, slog.String("host", e.Host))
	}
	if e.BootFile != "" {
		a = append(a, slog.String("boot_file", e.BootFile))
	}
	if !e.Expiry.IsZero() {
		a = append(a, slog.Time("expiry", e.Expiry.UTC()))
	}
	a = append(a, slog.Bool("proxy", e.Proxy))
	l.Logger.LogAttrs(context.Background(), slog.LevelInfo, "lease", a...)
}

func round2(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }
