package bootcfg

import (
	"fmt"
	"strings"
)

// safeWord reports whether s can stand unquoted in a U-Boot hush or GRUB
// script: no spaces, no quotes, no $, no backslash, no glob or list
// characters.
func safeWord(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("._/:=,+@%-", c) >= 0:
		default:
			return false
		}
	}
	return true
}

func checkLine(what, s string) error {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return fmt.Errorf("%s %q %w", what, s, errNewline)
		}
	}
	return nil
}

// UBootQuote writes s as one word of U-Boot's hush shell (template
// function quote), so `setenv bootargs {{quote .Cmdline}}` stores exactly
// s. Words of plain characters stay as they are; others are put in single
// quotes. U-Boot 2023.01's hush (common/cli_hush.c) takes everything
// inside single quotes literally but done_word then drops every backslash
// and keeps the character after it, even inside quotes; so each \ is
// written \\ and each ' as '\” (close, escaped quote, reopen). $ inside
// single quotes is not expanded. Control characters (newlines) are an
// error: the script is run line by line.
func UBootQuote(s string) (string, error) {
	if err := checkLine("U-Boot value", s); err != nil {
		return "", err
	}
	if safeWord(s) {
		return s, nil
	}
	r := strings.NewReplacer(`\`, `\\`, `'`, `'\''`)
	return "'" + r.Replace(s) + "'", nil
}

// GRUBQuote writes s as one word of a GRUB script (template function
// grubword): plain words stay as they are, others are put in single
// quotes, in which GRUB expands nothing; each ' is written '\”.
func GRUBQuote(s string) (string, error) {
	if err := checkLine("GRUB word", s); err != nil {
		return "", err
	}
	if safeWord(s) {
		return s, nil
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'", nil
}

// GRUBArgs writes a kernel command line as the arguments of GRUB's linux
// command (template function grubargs), so the kernel sees what it would
// see from pxelinux. GRUB rebuilds the command line from its argument words
// (grub-core/lib/cmdline.c grub_create_loader_cmdline): it puts "..."
// around a word with a space and a backslash before every \, ' and ".
// So the command line is split into the kernel's words (double quotes
// group, as in the kernel's next_arg), each word loses its grouping quotes
// (foo="a b" becomes the word foo=a b, which GRUB hands on as "foo=a b",
// the same parameter to the kernel) and is quoted for GRUB's own parser.
// A \ or ' anywhere, or a " that is not grouping a whole word or value,
// cannot reach the kernel unchanged through GRUB and is an error.
func GRUBArgs(cmdline string) (string, error) {
	words, err := kernelWords(cmdline)
	if err != nil {
		return "", err
	}
	out := make([]string, 0, len(words))
	for _, w := range words {
		if strings.ContainsAny(w, `\'`) {
			return "", fmt.Errorf("kernel parameter %q: GRUB puts a backslash before \\ and ' in the command line, so the kernel would not see it as written; remove them or boot this host with pxelinux or U-Boot", w)
		}
		q, err := GRUBQuote(w)
		if err != nil {
			return "", err
		}
		out = append(out, q)
	}
	return strings.Join(out, " "), nil
}

// kernelWords splits a command line into the kernel's parameters (any
// whitespace separates, double quotes group) and removes the grouping
// quotes: "a b" and foo="a b" become a b and foo=a b.
func kernelWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord, inQuote := false, false
	raw := 0 // start of the current word in s
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			inQuote = !inQuote
			inWord = true
			cur.WriteByte(c)
		case !inQuote && (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'):
			if inWord {
				w, err := ungroup(cur.String())
				if err != nil {
					return nil, err
				}
				words = append(words, w)
				cur.Reset()
				inWord = false
			}
			raw = i + 1
		default:
			inWord = true
			cur.WriteByte(c)
		}
	}
	if inQuote {
		return nil, fmt.Errorf("kernel command line %q: unbalanced double quote in %q", s, s[raw:])
	}
	if inWord {
		w, err := ungroup(cur.String())
		if err != nil {
			return nil, err
		}
		words = append(words, w)
	}
	return words, nil
}

// ungroup removes the quotes of "word" or name="value"; other quotes are
// an error because GRUB would pass them on escaped.
func ungroup(w string) (string, error) {
	n := strings.Count(w, `"`)
	if n == 0 {
		return w, nil
	}
	if n == 2 && strings.HasSuffix(w, `"`) {
		if strings.HasPrefix(w, `"`) {
			return w[1 : len(w)-1], nil
		}
		if i := strings.IndexByte(w, '='); i >= 0 && i+1 < len(w) && w[i+1] == '"' {
			return w[:i+1] + w[i+2:len(w)-1], nil
		}
	}
	return "", fmt.Errorf("kernel parameter %s: GRUB cannot pass a double quote inside a parameter to the kernel; quote a whole parameter (\"a b\") or its value (name=\"a b\")", w)
}

// oneLine turns the whitespace control characters of s (a YAML block
// scalar's newlines) into spaces and trims it (template function oneline),
// so a command line written over several lines stays one line.
func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		switch r {
		case '\t', '\n', '\r', '\v', '\f':
			return ' '
		}
		return r
	}, s)
	return strings.TrimSpace(s)
}
