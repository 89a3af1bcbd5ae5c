package report

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/record"
)

// FilterArgs are the filters as the CLI flags and the API query take them.
type FilterArgs struct {
	Client string   // MAC, IP or host name
	File   string   // exact name or a glob with * and ?
	Since  string   // a duration back from now (90m, 2h, 7d) or a time (RFC 3339, or 2006-01-02)
	Labels []string // k=v, every one must match
	Limit  string   // a count; "" no limit
	Server string   // server.name of the pxeperf that measured it
	Site   string   // server.site
	// Kind is a comma list of record kinds (image, boot, config, api,
	// error, stream) or "all"; "" every kind. Throughput tables count
	// the kinds chosen here (default: images and streams).
	Kind string
	// MinSize keeps fetches of at least this size, as configs.ParseSize
	// reads it: bytes, 64K, 1M, 1MiB (1024-based), 500MB (1000-based); ""
	// any size.
	MinSize string
}

// ParseFilter turns the filter arguments into a record.Filter; now anchors
// a relative --since. Errors say which argument is wrong and how to write it.
func ParseFilter(a FilterArgs, now time.Time) (record.Filter, error) {
	f := record.Filter{Client: strings.TrimSpace(a.Client), File: strings.TrimSpace(a.File),
		Server: strings.TrimSpace(a.Server), Site: strings.TrimSpace(a.Site)}
	var errs []error
	if a.Since != "" {
		t, err := ParseSince(a.Since, now)
		if err != nil {
			errs = append(errs, err)
		}
		f.Since = t
	}
	labels, err := ParseLabels(a.Labels)
	if err != nil {
		errs = append(errs, err)
	}
	f.Labels = labels
	if f.Kinds, err = record.ParseKinds(a.Kind); err != nil {
		errs = append(errs, err)
	}
	if a.MinSize != "" {
		n, err := configs.ParseSize(a.MinSize)
		if err != nil {
			errs = append(errs, fmt.Errorf("min-size: %w", err))
		}
		f.MinSize = n
	}
	if a.Limit != "" {
		n, err := strconv.Atoi(a.Limit)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("limit %q: want a count of records, e.g. 100", a.Limit))
		}
		f.Limit = n
	}
	return f, errors.Join(errs...)
}

// ParseSince reads a --since value: a duration back from now (Go syntax
// like 90m or 2h30m, plus whole days like 7d), an RFC 3339 time, or a date
// (2006-01-02, midnight UTC).
func ParseSince(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.Atoi(days); err == nil && n >= 0 {
			return now.Add(-time.Duration(n) * 24 * time.Hour), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("since %q: a duration back from now must not be negative, e.g. 2h", s)
		}
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse("2006-01-02", s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("since %q: write a duration back from now (90m, 2h, 7d) or a time (2026-11-30T08:00:00Z or 2026-11-30)", s)
}

// ParseLabels reads k=v pairs; a key given twice must have one value.
func ParseLabels(kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	m := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("label %q: write key=value, e.g. rx_offload=off", kv)
		}
		if old, dup := m[k]; dup && old != v {
			return nil, fmt.Errorf("label %q given twice (%s=%s and %s=%s): a record has one value per key", k, k, old, k, v)
		}
		m[k] = v
	}
	return m, nil
}
