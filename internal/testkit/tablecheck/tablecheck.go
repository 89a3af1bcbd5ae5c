// Package tablecheck asserts, for tests, that a table's CSV and JSON carry
// numbers in their number columns: a cell of a column not named as text
// parses with strconv.ParseFloat (CSV) or is a JSON number (JSON), so a
// "82.3 (w 11/16/16)", "1gbit", "95%" or "90.0-96.0" is found wherever it
// hides. Annotations belong in columns of their own, named as text.
package tablecheck

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// CSV parses out as CSV (a header and rows) and reports every cell of a
// column not in text that is not empty and not a number. It returns the
// header and the rows by column name.
func CSV(t testing.TB, name string, out []byte, text []string) ([]string, []map[string]string) {
	t.Helper()
	recs, err := csv.NewReader(bytes.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatalf("%s: CSV: %v\n%s", name, err, out)
	}
	if len(recs) == 0 {
		t.Fatalf("%s: CSV without a header", name)
	}
	head := recs[0]
	var rows []map[string]string
	for _, rec := range recs[1:] {
		row := map[string]string{}
		for i, k := range head {
			v := rec[i]
			row[k] = v
			if v != "" && !isText(k, text) {
				if _, err := strconv.ParseFloat(v, 64); err != nil {
					t.Errorf("%s: CSV column %s: %q is not a number", name, k, v)
				}
			}
		}
		rows = append(rows, row)
	}
	return head, rows
}

// JSON parses out as a table's JSON ({"table", "rows": [...]}) and reports
// every string value of a key not in text, at any depth of a row (a
// string "941.0" is no number either); an object under a text key (labels)
// is free text. Booleans and null are fine. It returns the rows.
func JSON(t testing.TB, name string, out []byte, text []string) []map[string]any {
	t.Helper()
	var jt struct {
		Rows []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(out, &jt); err != nil {
		t.Fatalf("%s: JSON: %v\n%s", name, err, out)
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case string:
			k := path[strings.LastIndex(path, ".")+1:]
			if !isText(k, text) {
				t.Errorf("%s: JSON %s: %q is a string, not a number", name, path, v)
			}
		case map[string]any:
			for k, x := range v {
				if _, ok := x.(string); !ok && isText(k, text) {
					continue // a text key's object (labels): free text
				}
				walk(path+"."+k, x)
			}
		case []any:
			for _, x := range v {
				walk(path, x)
			}
		}
	}
	for i, r := range jt.Rows {
		walk("rows["+strconv.Itoa(i)+"]", r)
	}
	return jt.Rows
}

// isText: k is named in text, or ends in _name, _note or _utc, the
// suffixes of annotation columns.
func isText(k string, text []string) bool {
	return slices.Contains(text, k) || strings.HasSuffix(k, "_name") || strings.HasSuffix(k, "_note") || strings.HasSuffix(k, "_utc")
}

// Counted reports every median column (a key ending in _mbps other than
// the link's, a best or a min/max/published one) that has no count column
// (n, count, n_*, *_count) in the header.
func Counted(t testing.TB, name string, head []string) {
	t.Helper()
	hasCount := slices.ContainsFunc(head, func(k string) bool {
		return k == "n" || k == "count" || strings.HasPrefix(k, "n_") || strings.HasSuffix(k, "_count")
	})
	for _, k := range head {
		if strings.HasSuffix(k, "median_mbps") && !hasCount {
			t.Errorf("%s: median column %s and no count column: %v", name, k, head)
		}
	}
}
