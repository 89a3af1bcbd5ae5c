package report

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Printable returns s with every character a terminal would act on
// escaped: C0 and C1 controls (ESC starts the sequences that retitle a
// window or clear the screen), DEL, invalid UTF-8, and the invisible
// format characters that reorder text (bidi overrides), as \xHH or \uHHHH.
// File names, hosts and labels come from the network (a TFTP RRQ names
// any bytes), so text output passes them through here. Printable text,
// spaces included, is returned as it is.
func Printable(s string) string {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 || !strconv.IsPrint(r) {
			break
		}
		i += n
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case strconv.IsPrint(r):
			b.WriteString(s[i : i+n])
		case r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r < 0x10000:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
		i += n
	}
	return b.String()
}

// printableLines is Printable for each line of a multi-line layout,
// keeping its line breaks.
func printableLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = Printable(l)
	}
	return strings.Join(lines, "\n")
}

// csvCell makes a cell safe to open in a spreadsheet (OWASP's CSV
// injection rule): a text cell starting with = + - @, a tab or a carriage
// return would be read as a formula (=HYPERLINK(...) calls out), so it
// gets a leading '. Numbers, negative ones included, stay as they are:
// they are no formula. Controls are escaped as in text.
func csvCell(s string) string {
	s = Printable(s)
	if s == "" || !strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return s
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		return s
	}
	return "'" + s
}

// mdReplacer escapes what Markdown would read as table structure,
// emphasis, code, links or HTML.
var mdReplacer = strings.NewReplacer("|", `\|`, "_", `\_`, "*", `\*`, "`", "\\`", "[", `\[`, "]", `\]`,
	"<", "&lt;", ">", "&gt;", `\`, `\\`)

// mdEscape makes s one Markdown table cell or line: controls escaped
// (a newline would end the row), then Markdown's own characters.
func mdEscape(s string) string {
	return mdReplacer.Replace(Printable(s))
}
