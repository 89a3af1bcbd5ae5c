// Package report turns measurement records into the tables labs publish:
// throughput by client window and RX checksum offload (the 2010 gPXE
// study), by direction and MTU (Xilinx board tables), per client, by link
// speed, iperf3-style interval lines and the netperf TCP_STREAM summary,
// plus a chart of Mbit/s against window.
//
// Everything here is pure: functions from []record.Record and
// []record.Interval to a Table, and a Table to text, markdown, CSV or JSON.
// Reading the store is the caller's business (cmd/pxeperf report, api/).
package report

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Format is an output format of Render.
type Format string

const (
	Text     Format = "text"     // aligned columns, like the published tables
	Markdown Format = "markdown" // a GitHub-flavoured markdown table
	CSV      Format = "csv"      // header row (snake_case keys) + data rows, no title or notes
	JSON     Format = "json"     // {"table", "title", "rows", "notes"}
)

// Formats lists every Format, in the order help texts show them.
var Formats = []Format{Text, Markdown, CSV, JSON}

// ParseFormat checks a --format value.
func ParseFormat(s string) (Format, error) {
	for _, f := range Formats {
		if string(f) == s {
			return f, nil
		}
	}
	return "", fmt.Errorf("unknown format %q: use text, markdown, csv or json", s)
}

// Column is one column of a Table.
type Column struct {
	Name string
	// Key names the column in CSV (snake_case, unique); default Name.
	Key string
	// Left aligns the column left in text output (labels); numbers are
	// right-aligned.
	Left bool
	// TextOnly columns are shown by text and markdown only: a cell with
	// its annotations ("82.3 (w 11/16/16, 4 loss, 10 resent)", "1G tbf").
	// CSVOnly columns are CSV's only: the same figures, a number or an
	// annotation to a column, so that every number column parses.
	TextOnly, CSVOnly bool
	// Unit is put after a non-empty cell in text and markdown ("%"); CSV
	// has the bare number.
	Unit string
}

// shown is the columns format f prints, by index.
func (t Table) shown(f Format) []int {
	var idx []int
	for i, c := range t.Columns {
		if (f == CSV && c.TextOnly) || (f != CSV && c.CSVOnly) {
			continue
		}
		idx = append(idx, i)
	}
	return idx
}

// textCell is row r's cell i as text and markdown show it.
func (t Table) textCell(r []string, i int) string {
	if i >= len(r) || r[i] == "" {
		return "-"
	}
	return r[i] + t.Columns[i].Unit
}

// Table is one report, ready to render. Rows hold formatted cells ("" is no
// data, shown as "-" in text and markdown); Data holds the same rows typed,
// for JSON.
type Table struct {
	Name    string
	Title   string
	Columns []Column
	Rows    [][]string
	Data    any
	Notes   []string
	// Empty is the message shown instead of the table when Rows is empty.
	Empty string
	// Layout, when set, is printed verbatim by the text format instead of
	// the aligned grid (the iperf3 and netperf layouts).
	Layout string
}

// jsonTable is the JSON shape of every table.
type jsonTable struct {
	Table   string   `json:"table"`
	Title   string   `json:"title"`
	Rows    any      `json:"rows"`
	Notes   []string `json:"notes,omitempty"`
	Message string   `json:"message,omitempty"`
}

// Render writes t in format f.
func Render(w io.Writer, t Table, f Format) error {
	switch f {
	case Text:
		return renderText(w, t)
	case Markdown:
		return renderMarkdown(w, t)
	case CSV:
		return renderCSV(w, t)
	case JSON:
		jt := jsonTable{Table: t.Name, Title: t.Title, Rows: t.Data, Notes: t.Notes}
		if len(t.Rows) == 0 {
			jt.Message = t.Empty
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(jt)
	}
	return fmt.Errorf("unknown format %q: use text, markdown, csv or json", f)
}

func renderText(w io.Writer, t Table) error {
	if t.Layout != "" {
		_, err := io.WriteString(w, printableLines(t.Layout))
		return err
	}
	var b strings.Builder
	b.WriteString(Printable(t.Title) + "\n\n")
	if len(t.Rows) == 0 {
		b.WriteString(Printable(t.Empty) + "\n")
		_, err := io.WriteString(w, b.String())
		return err
	}
	cols := t.shown(Text)
	width := make([]int, len(cols))
	for j, i := range cols {
		width[j] = utf8.RuneCountInString(t.Columns[i].Name)
	}
	rows := make([][]string, len(t.Rows))
	for k, r := range t.Rows {
		rows[k] = make([]string, len(cols))
		for j, i := range cols {
			rows[k][j] = Printable(t.textCell(r, i))
			width[j] = max(width[j], utf8.RuneCountInString(rows[k][j]))
		}
	}
	line := func(cells []string) {
		var l strings.Builder
		for j, c := range cells {
			if j > 0 {
				l.WriteString("  ")
			}
			pad := strings.Repeat(" ", width[j]-utf8.RuneCountInString(c))
			if t.Columns[cols[j]].Left {
				l.WriteString(c + pad)
			} else {
				l.WriteString(pad + c)
			}
		}
		b.WriteString(strings.TrimRight(l.String(), " ") + "\n")
	}
	names := make([]string, len(cols))
	rules := make([]string, len(cols))
	for j, i := range cols {
		names[j] = t.Columns[i].Name
		rules[j] = strings.Repeat("-", width[j])
	}
	line(names)
	line(rules)
	for _, r := range rows {
		line(r)
	}
	if len(t.Notes) > 0 {
		b.WriteString("\n")
		for _, n := range t.Notes {
			b.WriteString(Printable(n) + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func renderMarkdown(w io.Writer, t Table) error {
	var b strings.Builder
	b.WriteString("**" + mdEscape(t.Title) + "**\n\n")
	if len(t.Rows) == 0 {
		b.WriteString(mdEscape(t.Empty) + "\n")
		_, err := io.WriteString(w, b.String())
		return err
	}
	cols := t.shown(Markdown)
	b.WriteString("|")
	for _, i := range cols {
		b.WriteString(" " + mdEscape(t.Columns[i].Name) + " |")
	}
	b.WriteString("\n|")
	for _, i := range cols {
		if t.Columns[i].Left {
			b.WriteString(" :--- |")
		} else {
			b.WriteString(" ---: |")
		}
	}
	b.WriteString("\n")
	for _, r := range t.Rows {
		b.WriteString("|")
		for _, i := range cols {
			b.WriteString(" " + mdEscape(t.textCell(r, i)) + " |")
		}
		b.WriteString("\n")
	}
	if len(t.Notes) > 0 {
		b.WriteString("\n")
		for _, n := range t.Notes {
			b.WriteString("_" + mdEscape(n) + "_\n\n")
		}
	}
	_, err := io.WriteString(w, strings.TrimRight(b.String(), "\n")+"\n")
	return err
}

func renderCSV(w io.Writer, t Table) error {
	cw := csv.NewWriter(w)
	cols := t.shown(CSV)
	names := make([]string, len(cols))
	for j, i := range cols {
		c := t.Columns[i]
		names[j] = c.Name
		if c.Key != "" {
			names[j] = c.Key
		}
	}
	if err := cw.Write(names); err != nil {
		return err
	}
	cells := make([]string, len(cols))
	for _, r := range t.Rows {
		cells = cells[:0]
		for _, i := range cols {
			c := ""
			if i < len(r) {
				c = r[i]
			}
			cells = append(cells, csvCell(c))
		}
		if err := cw.Write(cells); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
