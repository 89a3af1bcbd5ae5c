package httpboot

import (
	"slices"
	"strconv"
	"strings"
)

// byteRange is one range of a Range header, resolved against the body's
// size: bytes start..end, both included.
type byteRange struct{ start, end int64 }

// fitRanges bounds what a Range header can make http.ServeContent do.
// Overlapping and adjacent ranges are merged first (RFC 9110 14.2 lets a
// server coalesce them), so a client asking for the same bytes many times
// gets them once. Past max ranges the header is dropped (drop: the body is
// served whole, 200, by sendfile), as nginx's max_ranges does: each part
// of a multipart answer costs a header of its own and a copy, so a header
// of many one-byte ranges made an answer many times the file (see
// httpboot/DESIGN.md#ranges-per-request). A header that does not parse is
// left alone (ServeContent answers it 416 or serves the body whole), as
// is one with nothing to merge.
func fitRanges(h string, size int64, max int) (out string, drop bool) {
	spec, ok := strings.CutPrefix(h, "bytes=")
	if !ok || size < 0 {
		return h, false
	}
	parts := strings.Split(spec, ",")
	rs := make([]byteRange, 0, min(len(parts), 64))
	for _, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		r, ok := parseRange(p, size)
		if !ok {
			return h, false
		}
		if r.start >= size {
			continue // unsatisfiable on its own; ServeContent drops it too
		}
		rs = append(rs, r)
	}
	merged := mergeRanges(rs)
	if len(merged) > max {
		return "", true
	}
	if len(merged) == len(rs) {
		return h, false
	}
	var b strings.Builder
	b.WriteString("bytes=")
	for i, r := range merged {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(r.start, 10))
		b.WriteByte('-')
		b.WriteString(strconv.FormatInt(r.end, 10))
	}
	return b.String(), false
}

// parseRange reads one range spec ("a-b", "a-", "-n") of a body of size
// bytes, as net/http's parseRange does.
func parseRange(p string, size int64) (byteRange, bool) {
	a, b, ok := strings.Cut(p, "-")
	if !ok {
		return byteRange{}, false
	}
	a, b = strings.TrimSpace(a), strings.TrimSpace(b)
	if a == "" {
		if b == "" || b[0] == '-' {
			return byteRange{}, false
		}
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n < 0 {
			return byteRange{}, false
		}
		return byteRange{start: max(size-min(n, size), 0), end: size - 1}, true
	}
	start, err := strconv.ParseInt(a, 10, 64)
	if err != nil || start < 0 {
		return byteRange{}, false
	}
	end := size - 1
	if b != "" {
		e, err := strconv.ParseInt(b, 10, 64)
		if err != nil || e < start {
			return byteRange{}, false
		}
		end = min(e, size-1)
	}
	return byteRange{start: start, end: end}, true
}

// mergeRanges sorts rs and joins the ranges that overlap or touch.
func mergeRanges(rs []byteRange) []byteRange {
	if len(rs) < 2 {
		return rs
	}
	s := slices.Clone(rs)
	slices.SortFunc(s, func(x, y byteRange) int {
		switch {
		case x.start < y.start:
			return -1
		case x.start > y.start:
			return 1
		}
		return 0
	})
	out := s[:1]
	for _, r := range s[1:] {
		last := &out[len(out)-1]
		if r.start <= last.end+1 {
			last.end = max(last.end, r.end)
			continue
		}
		out = append(out, r)
	}
	return out
}
