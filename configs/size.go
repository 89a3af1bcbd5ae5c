package configs

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// sizeUnits are the units a size may carry, compared case-insensitively.
// Bare K/M/G/T are binary as in dd; KB/MB/GB/TB are decimal.
var sizeUnits = map[string]int64{
	"": 1, "b": 1,
	"k": 1 << 10, "kib": 1 << 10, "kb": 1e3,
	"m": 1 << 20, "mib": 1 << 20, "mb": 1e6,
	"g": 1 << 30, "gib": 1 << 30, "gb": 1e9,
	"t": 1 << 40, "tib": 1 << 40, "tb": 1e12,
}

// sizeForms names the accepted forms in every size error.
const sizeForms = "write bytes (1000000) or a number and a unit: 64M, 500MiB, 64GiB, 1.5GiB (powers of 1024) or 500MB, 2GB (powers of 1000)"

func sizeError(s, what string) error { return fmt.Errorf("%q %s: %s", s, what, sizeForms) }

// ParseSize reads a byte count: the one size parser of pxeperf, behind the
// config's sizes (ParseByteSize), bench --size and --window, images
// generate --size, report --min-size and the API's min_size. A size is a
// number (1000000, 1.5) and an optional unit, in any case and with or
// without a space: B; K, M, G, T and KiB, MiB, GiB, TiB are powers of 1024;
// KB, MB, GB, TB powers of 1000. A fraction is rounded to whole bytes. A
// negative size is an error.
func ParseSize(s string) (int64, error) {
	n, err := parseSize(s)
	if err == nil && n < 0 {
		return 0, sizeError(s, "is negative")
	}
	return n, err
}

// parseSize is ParseSize that also reads a leading minus, for the config
// file: there Validate refuses a negative size and names its key.
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	neg := strings.HasPrefix(t, "-")
	if neg {
		t = t[1:]
	}
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	mult, ok := sizeUnits[unit]
	if num == "" || !ok {
		return 0, sizeError(s, "is not a size")
	}
	var n int64
	if !strings.Contains(num, ".") {
		v, err := strconv.ParseInt(num, 10, 64) // digits only: an error is a range error
		if err != nil || v > math.MaxInt64/mult {
			return 0, sizeError(s, "is too large (the most is 8EiB)")
		}
		n = v * mult
	} else {
		f, err := strconv.ParseFloat(num, 64)
		if err != nil {
			return 0, sizeError(s, "is not a size")
		}
		v := math.Round(f * float64(mult))
		if v >= math.MaxInt64 {
			return 0, sizeError(s, "is too large (the most is 8EiB)")
		}
		n = int64(v)
	}
	if neg {
		n = -n
	}
	return n, nil
}
