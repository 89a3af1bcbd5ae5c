package images

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// sizeUnits are the accepted suffixes, compared case-insensitively. Bare
// K/M/G/T are binary like dd and truncate; KB/MB/GB/TB are decimal.
var sizeUnits = map[string]int64{
	"": 1, "b": 1,
	"k": 1 << 10, "kib": 1 << 10, "kb": 1e3,
	"m": 1 << 20, "mib": 1 << 20, "mb": 1e6,
	"g": 1 << 30, "gib": 1 << 30, "gb": 1e9,
	"t": 1 << 40, "tib": 1 << 40, "tb": 1e12,
}

// sizeForms names the accepted forms in every ParseSize error.
const sizeForms = "write bytes (1000000) or a number and a unit: 64M, 500MiB, 1GiB, 1.5GiB (powers of 1024) or 500MB, 2GB (powers of 1000)"

// ParseSize reads a byte count such as 1000000, 500MiB, 1GiB, 64M, 500MB or
// 1.5GiB. Bare K/M/G/T are powers of 1024 (as in dd), KB/MB/GB/TB powers of
// 1000, KiB/MiB/GiB/TiB powers of 1024; case does not matter.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	mult, ok := sizeUnits[unit]
	if num == "" || !ok {
		return 0, fmt.Errorf("size %q: %s", s, sizeForms)
	}
	if !strings.Contains(num, ".") {
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || n > math.MaxInt64/mult {
			return 0, fmt.Errorf("size %q is too large or not a number: %s", s, sizeForms)
		}
		return n * mult, nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: %s", s, sizeForms)
	}
	v := math.Round(f * float64(mult))
	if v >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q is too large: %s", s, sizeForms)
	}
	return int64(v), nil
}

// FormatSize writes n bytes for people: 1023 B, 1.5 KiB, 256.0 MiB.
func FormatSize(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v := float64(n)
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		v /= 1024
		if v < 1024 || u == "TiB" {
			return fmt.Sprintf("%.1f %s", v, u)
		}
	}
	return "" // unreachable
}

// FormatSizeExact writes n bytes in the largest 1024-based unit that holds
// it whole, in the form ParseSize reads back: 500MiB, 1GiB, 4KiB, 65532.
func FormatSizeExact(n int64) string {
	for _, u := range []struct {
		s string
		m int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.m && n%u.m == 0 {
			return strconv.FormatInt(n/u.m, 10) + u.s
		}
	}
	return strconv.FormatInt(n, 10)
}
