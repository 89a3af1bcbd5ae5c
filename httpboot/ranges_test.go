package httpboot

import (
	"strings"
	"testing"
)

func TestFitRanges(t *testing.T) {
	many := func(n int, spec string) string {
		return "bytes=" + strings.TrimSuffix(strings.Repeat(spec+",", n), ",")
	}
	for name, tc := range map[string]struct {
		h    string
		size int64
		want string
		drop bool
	}{
		"one":                 {"bytes=0-99", 1000, "bytes=0-99", false},
		"apart, kept as sent": {"bytes=500-599,0-99", 1000, "bytes=500-599,0-99", false},
		"overlapping merged":  {"bytes=0-99,50-149", 1000, "bytes=0-149", false},
		"adjacent merged":     {"bytes=100-199,0-99", 1000, "bytes=0-199", false},
		"suffix and open":     {"bytes=-100,950-", 1000, "bytes=900-999", false},
		"same byte 15500x":    {many(15500, "0-0"), 65536, "bytes=0-0", false},
		"16 apart":            {"bytes=0-0,2-2,4-4,6-6,8-8,10-10,12-12,14-14,16-16,18-18,20-20,22-22,24-24,26-26,28-28,30-30", 100, "bytes=0-0,2-2,4-4,6-6,8-8,10-10,12-12,14-14,16-16,18-18,20-20,22-22,24-24,26-26,28-28,30-30", false},
		"17 apart: whole":     {"bytes=0-0,2-2,4-4,6-6,8-8,10-10,12-12,14-14,16-16,18-18,20-20,22-22,24-24,26-26,28-28,30-30,32-32", 100, "", true},
		"unparsable: as sent": {"bytes=a-b", 100, "bytes=a-b", false},
		"not bytes":           {"items=0-1", 100, "items=0-1", false},
		"past the end kept":   {"bytes=200-300", 100, "bytes=200-300", false},
		"end past the size":   {"bytes=0-50,40-500", 100, "bytes=0-99", false},
	} {
		t.Run(name, func(t *testing.T) {
			got, drop := fitRanges(tc.h, tc.size, 16)
			if got != tc.want || drop != tc.drop {
				t.Errorf("fitRanges(%.60q, %d, 16) = %q, %v; want %q, %v", tc.h, tc.size, got, drop, tc.want, tc.drop)
			}
		})
	}
}
