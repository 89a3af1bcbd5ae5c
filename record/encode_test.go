package record

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"testing"
	"time"
)

// marshalEntry writes what json.Marshal writes, byte for byte, so journal
// lines read back (json.Unmarshal) as before and older pxeperfs read them.
func TestMarshalEntry(t *testing.T) {
	full := fullRecord()
	bare := Record{Time: time.Unix(1, 0).UTC(), Source: "serve", Proto: "tftp", Direction: "rx", ClientIP: "10.0.0.8", File: "x", Outcome: "ok"}
	odd := full
	odd.File = "a\"b\\c<d>e&f\x00\x01\x1f\x7f\b\f\n\r\t\u2028\u2029 é \xff\xfe end"
	odd.Labels = map[string]string{"z": "1", "a<": "\u2029", "": "", "m": "x\ty"}
	odd.Time = time.Date(2026, 1, 2, 3, 4, 5, 120000000, time.FixedZone("x", -(5*3600+30*60)))
	zero := Record{}
	ivs := []Interval{{RecordID: 3, Start: 0, End: time.Second, Bytes: 5, Retransmits: math.MaxUint32, Cwnd: 1, SndWnd: 2, RTT: -1},
		{Start: time.Second, End: 2 * time.Second}}
	records := map[string]*Record{"full": &full, "bare": &bare, "odd": &odd, "zero": &zero}
	for _, mbps := range []float64{0, 1, -1, 0.1, 1e-6, 9.99e-7, 1e-9, 1e20, 1e21, 123456789.125, math.MaxFloat64,
		math.SmallestNonzeroFloat64, math.NaN(), math.Inf(1)} {
		r := full
		r.Mbps = mbps
		records["mbps "+strconv.FormatFloat(mbps, 'g', -1, 64)] = &r
	}
	for _, y := range []int{0, 9999, 10000, -1} {
		r := bare
		r.Time = time.Date(y, 5, 6, 7, 8, 9, 1, time.UTC)
		records["year "+strconv.Itoa(y)] = &r
	}
	late := bare
	late.Time = time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("far", 24*3600))
	records["offset 24h"] = &late
	for name, r := range records {
		for _, withIvs := range []bool{false, true} {
			e := &entry{UID: "uid-" + name, Record: r}
			if withIvs {
				e.Intervals = ivs
			}
			checkMarshal(t, name, e)
		}
	}
	checkMarshal(t, "lease", &entry{UID: "l", Lease: &Lease{Time: time.Unix(5, 0).UTC(), MAC: "52:54:00:12:34:56"}})
}

func checkMarshal(t *testing.T, name string, e *entry) {
	t.Helper()
	want, werr := json.Marshal(e)
	got, gerr := marshalEntry(e)
	if (werr != nil) != (gerr != nil) || !bytes.Equal(got, want) {
		t.Errorf("%s:\n got %s (%v)\nwant %s (%v)", name, got, gerr, want, werr)
	}
}

func FuzzMarshalEntry(f *testing.F) {
	f.Add("f", "k", "v", 1.5, int64(1), int64(7), uint32(3), 2)
	f.Add("a\"<\xff\u2028", "", "\x00", -1e-9, int64(-1), int64(1)<<62, uint32(0), 0)
	f.Fuzz(func(t *testing.T, s, k, v string, mbps float64, n, ns int64, u uint32, ivs int) {
		r := fullRecord()
		r.File, r.Err, r.Host, r.Kernel, r.Mbps = s, v, k, s, mbps
		r.Labels = map[string]string{k: v, s: k}
		r.Bytes, r.Retransmits, r.Datagrams, r.RTT = n, n, ns, time.Duration(ns)
		r.WndMax, r.MSS = u, u
		r.Time = time.Unix(0, ns)
		e := &entry{UID: s, Record: &r}
		for i := range min(max(ivs, 0), 20) {
			e.Intervals = append(e.Intervals, Interval{RecordID: n, Start: time.Duration(i), End: time.Duration(ns), Bytes: n, Cwnd: u})
		}
		checkMarshal(t, "fuzz", e)
	})
}

// TestMarshalEntryEveryField sets each field of Record and Interval, one at
// a time, to a non-zero value found by reflection: a field added to either
// type that marshalEntry does not write fails here (its journal line would
// lose it), whether or not fullRecord sets it.
func TestMarshalEntryEveryField(t *testing.T) {
	nonZero := func(v reflect.Value) bool {
		switch v.Kind() {
		case reflect.String:
			v.SetString("x<y")
		case reflect.Bool:
			v.SetBool(true)
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			v.SetInt(7)
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			v.SetUint(7)
		case reflect.Float32, reflect.Float64:
			v.SetFloat(7.5)
		case reflect.Map:
			if v.Type().Key().Kind() != reflect.String || v.Type().Elem().Kind() != reflect.String {
				return false
			}
			v.Set(reflect.ValueOf(map[string]string{"k": "v"}).Convert(v.Type()))
		case reflect.Struct:
			if v.Type() != reflect.TypeOf(time.Time{}) {
				return false
			}
			v.Set(reflect.ValueOf(time.Date(2026, 11, 30, 1, 2, 3, 4, time.UTC)))
		default:
			return false
		}
		return true
	}
	base := Record{Time: time.Unix(1, 0).UTC(), Source: "serve", Proto: "tftp", Direction: "rx", ClientIP: "10.0.0.8", File: "x", Outcome: "ok"}
	rt := reflect.TypeOf(base)
	for i := range rt.NumField() {
		if !rt.Field(i).IsExported() {
			continue
		}
		r := base
		if !nonZero(reflect.ValueOf(&r).Elem().Field(i)) {
			t.Errorf("Record.%s: a %s this test cannot fill; teach it, and marshalEntry", rt.Field(i).Name, rt.Field(i).Type)
			continue
		}
		checkMarshal(t, "Record."+rt.Field(i).Name, &entry{UID: "u", Record: &r})
	}
	it := reflect.TypeOf(Interval{})
	for i := range it.NumField() {
		var iv Interval
		if !nonZero(reflect.ValueOf(&iv).Elem().Field(i)) {
			t.Errorf("Interval.%s: a %s this test cannot fill", it.Field(i).Name, it.Field(i).Type)
			continue
		}
		r := base
		checkMarshal(t, "Interval."+it.Field(i).Name, &entry{UID: "u", Record: &r, Intervals: []Interval{iv}})
	}
}

// BenchmarkMarshalEntry is the journal line of a served HTTP fetch
// (httpFetch: TCP_INFO, a label, nine intervals), the encoding every
// recorded fetch pays on its handler's path. cpu-ns/op is the process's
// CPU per line, steadier than ns/op on a busy machine.
func BenchmarkMarshalEntry(b *testing.B) {
	s := &Sink{opt: SinkOptions{Interface: "lo", Server: "bench", Site: "lab"}}
	r, ivs := s.convert(httpFetch(1))
	e := &entry{UID: newUID(), Record: r, Intervals: ivs}
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	for b.Loop() {
		if _, err := marshalEntry(e); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}
