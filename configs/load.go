package configs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Error is one problem with a config: the key (dotted path), its line in the
// file when known, and what to do about it.
type Error struct {
	File string
	Line int
	Key  string
	Msg  string
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d", e.Line)
		}
		b.WriteString(": ")
	} else if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Key != "" {
		fmt.Fprintf(&b, "%s: ", e.Key)
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is a list of config problems, reported together.
type Errors []*Error

func (es Errors) Error() string {
	var b strings.Builder
	for i, e := range es {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

func joinErrors(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	var out Errors
	for _, e := range errs {
		var ce *Error
		if errors.As(e, &ce) {
			out = append(out, ce)
		} else {
			out = append(out, &Error{Msg: e.Error()})
		}
	}
	return out
}

// Load reads a config file and applies it over the embedded default.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w (check the --config path)", err)
	}
	c, err := Parse(path, data, Default())
	if c != nil {
		c.File = path
	}
	return c, err
}

// Parse decodes YAML over base (nil: a zero Config), strictly, then validates.
// Every error names the key and line.
func Parse(name string, data []byte, base *Config) (*Config, error) {
	c := &Config{}
	if base != nil {
		*c = *base
		c.DHCP.BootFiles = cloneMap(base.DHCP.BootFiles)
		c.Hosts = append([]Host(nil), base.Hosts...)
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if err.Error() == "EOF" { // empty file: the base as it is
			c.Set = nil
			return c, withFile(c.Validate(), name, nil)
		}
		return nil, &Error{File: name, Msg: "not valid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	lines := map[string]int{}
	var errs Errors
	renames := readAliases(&doc, "", &errs)
	// Every problem is reported at once: unknown keys, values that do not
	// decode (the decoder goes on past them, keeping the base's value),
	// and what Validate finds in the rest.
	var keyErrs []error
	checkKeys(&doc, reflect.TypeOf(Config{}), "", lines, &keyErrs)
	errs = append(errs, flatten(joinErrors(keyErrs))...)
	if err := doc.Decode(c); err != nil {
		errs = append(errs, flatten(withFile(decodeError(err), name, lines))...)
	}
	bad := map[string]bool{}
	for _, e := range flatten(withFile(errs, name, lines)) {
		bad[e.Key] = true
	}
	for _, e := range flatten(c.Validate()) {
		if !bad[e.Key] { // a value that did not decode is reported once
			errs = append(errs, e)
		}
	}
	if len(errs) > 0 {
		// A file refused anyway says its old names too: its errors name
		// the new keys.
		errs = append(errs, renames...)
		sort.SliceStable(errs, func(i, j int) bool { return lineOr(errs[i], lines) < lineOr(errs[j], lines) })
		return nil, withFile(errs, name, lines)
	}
	c.Set = make(map[string]bool, len(lines))
	for k := range lines {
		c.Set[k] = true
	}
	for _, w := range renames {
		w.File = name
		c.Warnings = append(c.Warnings, w.Error())
	}
	return c, nil
}

// flatten lists the *Error values in err (an Errors, an *Error or other).
func flatten(err error) Errors {
	if err == nil {
		return nil
	}
	var es Errors
	if errors.As(err, &es) {
		return es
	}
	var e *Error
	if errors.As(err, &e) {
		return Errors{e}
	}
	return Errors{{Msg: err.Error()}}
}

// lineOr is an error's line for sorting: its own, else its key's.
func lineOr(e *Error, lines map[string]int) int {
	if e.Line > 0 {
		return e.Line
	}
	if l := lineOf(e.Key, lines); l > 0 {
		return l
	}
	return 1 << 30
}

// typeError is how a value's UnmarshalYAML reports a bad value: as a
// yaml.TypeError, so the decoder goes on and every bad value is reported,
// not just the first.
func typeError(line int, msg string) error {
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %s", line, msg)}}
}

// renamed maps keys that were renamed to their new names, with what else
// changed, so an old file gets an error saying what to write instead.
var renamed = map[string]string{
	"tftp.lockstep_threads": "tftp.transfer_threads (it now counts windowed transfers too)",
}

// aliases maps keys that were renamed but are still read, by their dotted
// path, to their new name in the same section: a file that has one loads
// as if it said the new name, with a warning naming it (renamed keys whose
// meaning changed are refused instead). bench configured the stream server
// (package stream), pxeperf's own throughput server.
var aliases = map[string]string{
	"bench": "stream",
}

// readAliases renames, in the YAML tree under path, every key of aliases
// to its new name and returns a warning for each; an old key beside its
// new one in the same section is an error (one of them would be lost).
func readAliases(n *yaml.Node, path string, errs *Errors) Errors {
	var warnings Errors
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			warnings = append(warnings, readAliases(c, path, errs)...)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i]
			k := join(path, key.Value)
			if to, ok := aliases[k]; ok {
				switch {
				case hasKey(n, to):
					*errs = append(*errs, &Error{Line: key.Line, Key: k, Msg: fmt.Sprintf("is the old name of %s, which is also set; "+
						"keep %s alone", join(path, to), join(path, to))})
					n.Content = append(n.Content[:i], n.Content[i+2:]...) // reported once, here
					i -= 2
					continue
				default:
					warnings = append(warnings, &Error{Line: key.Line, Key: k,
						Msg: fmt.Sprintf("was renamed %s; read as %s for now: rename the key", join(path, to), join(path, to))})
					key.Value = to
					k = join(path, to)
				}
			}
			warnings = append(warnings, readAliases(n.Content[i+1], k, errs)...)
		}
	}
	return warnings
}

// hasKey reports whether the mapping node m has key.
func hasKey(m *yaml.Node, key string) bool {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return true
		}
	}
	return false
}

// checkKeys walks the YAML tree beside the Go type, recording each key's line
// and reporting keys the type does not have.
func checkKeys(n *yaml.Node, t reflect.Type, path string, lines map[string]int, errs *[]error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			checkKeys(c, t, path, lines, errs)
		}
	case yaml.MappingNode:
		if t.Kind() == reflect.Map {
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := join(path, n.Content[i].Value)
				lines[k] = n.Content[i].Line
				checkKeys(n.Content[i+1], t.Elem(), k, lines, errs)
			}
			return
		}
		if t.Kind() != reflect.Struct || isScalarType(t) {
			return // the decoder reports the type mismatch with its line
		}
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i].Value
			k := join(path, key)
			lines[k] = n.Content[i].Line
			ft, ok := fields[key]
			if to, old := renamed[k]; !ok && old {
				*errs = append(*errs, &Error{Line: n.Content[i].Line, Key: k, Msg: "was renamed " + to + "; rename the key"})
				continue
			}
			if !ok {
				msg := fmt.Sprintf("unknown key %q", key)
				near, d := closest(key, fields)
				far, fd := elsewhere(key, path)
				if far != nil && fd < d {
					near = ""
				}
				if near != "" {
					msg += fmt.Sprintf("; did you mean %q?", near)
				} else if far != nil {
					msg += fmt.Sprintf("; did you mean %s? (%q is a key there, not here)", strings.Join(far, " or "), lastKey(far[0]))
				} else {
					msg += "; known keys here: " + strings.Join(sortedKeys(fields), ", ")
				}
				*errs = append(*errs, &Error{Line: n.Content[i].Line, Key: k, Msg: msg})
				continue
			}
			checkKeys(n.Content[i+1], ft, k, lines, errs)
		}
	case yaml.SequenceNode:
		if t.Kind() != reflect.Slice {
			return
		}
		for i, c := range n.Content {
			k := fmt.Sprintf("%s[%d]", path, i)
			lines[k] = c.Line
			checkKeys(c, t.Elem(), k, lines, errs)
		}
	}
}

// isScalarType is true for struct types that decode from a scalar.
func isScalarType(t reflect.Type) bool {
	return reflect.PointerTo(t).Implements(reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem())
}

func yamlFields(t reflect.Type) map[string]reflect.Type {
	m := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		m[name] = f.Type
	}
	return m
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func sortedKeys(m map[string]reflect.Type) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// closest returns the known key nearest to key by edit distance
// (optimal string alignment: a swap of two neighbours is one edit, so
// "nmae" is 1 from "name" and 2 from "mac"), if it is near: at most 2
// edits, 1 for keys of 3 letters or fewer. A tie goes to the key of the
// length nearest key's, then alphabetically.
func closest(key string, fields map[string]reflect.Type) (string, int) {
	best, bestD := "", maxEdits(key)+1
	for _, k := range sortedKeys(fields) {
		d := editDistance(key, k)
		if d < bestD || (d == bestD && best != "" && absDiff(len(k), len(key)) < absDiff(len(best), len(key))) {
			best, bestD = k, d
		}
	}
	return best, bestD
}

// maxEdits is how far a misspelling may be from the key it means.
func maxEdits(key string) int {
	if len(key) <= 3 {
		return 1
	}
	return 2
}

func absDiff(a, b int) int {
	if a < b {
		return b - a
	}
	return a - b
}

// elsewhere finds key under other parents in the whole key set (pool: at
// the top level means dhcp.pool): the dotted paths whose last part is
// nearest to key by edit distance (at most maxEdits; four at most,
// shortest first), and that distance; nil when none is near.
func elsewhere(key, path string) ([]string, int) {
	var best []string
	bestD := maxEdits(key) + 1
	for _, k := range allKeys() {
		parent := strings.TrimSuffix(k, "."+lastKey(k))
		if parent == k {
			parent = ""
		}
		if parent == sliceFree(path) {
			continue // a sibling: closest has looked at those
		}
		switch d := editDistance(key, lastKey(k)); {
		case d < bestD:
			best, bestD = []string{k}, d
		case d == bestD:
			best = append(best, k)
		}
	}
	sort.SliceStable(best, func(i, j int) bool { return len(best[i]) < len(best[j]) })
	if len(best) > 4 {
		best = best[:4]
	}
	return best, bestD
}

// sliceFree writes a key path as allKeys does: hosts[2].name is hosts[].name.
func sliceFree(path string) string { return listIndex.ReplaceAllString(path, "[]") }

var listIndex = regexp.MustCompile(`\[\d+\]`)

// lastKey is the last part of a dotted key path.
func lastKey(k string) string {
	if i := strings.LastIndexByte(k, '.'); i >= 0 {
		return k[i+1:]
	}
	return k
}

// allKeys lists every key of the config, dotted (a list's entries as
// hosts[].name), sorted.
func allKeys() []string {
	var out []string
	var walk func(t reflect.Type, path string)
	walk = func(t reflect.Type, path string) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			if t.Kind() == reflect.Slice {
				path += "[]"
			}
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || isScalarType(t) {
			return
		}
		for name, ft := range yamlFields(t) {
			k := join(path, name)
			out = append(out, k)
			walk(ft, k)
		}
	}
	walk(reflect.TypeOf(Config{}), "")
	sort.Strings(out)
	return out
}

// editDistance is the optimal string alignment distance of a and b:
// insertions, deletions, substitutions and swaps of two neighbouring
// letters, each one edit.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// decodeError turns yaml.v3's type errors ("line 3: cannot unmarshal !!str
// `abc` into int") into Errors with lines.
func decodeError(err error) error {
	var ce *Error
	if errors.As(err, &ce) {
		return ce
	}
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return &Error{Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	var out Errors
	for _, m := range te.Errors {
		e := &Error{Msg: m}
		var line int
		if _, scanErr := fmt.Sscanf(m, "line %d:", &line); scanErr == nil {
			e.Line = line
			_, e.Msg, _ = strings.Cut(m, ": ")
		}
		e.Msg = friendlyType(e.Msg)
		out = append(out, e)
	}
	return out
}

// goType is a Go type name in a yaml.v3 message: "into []configs.Addr".
var goType = regexp.MustCompile(`into (\S+)`)

// friendlyType rewrites yaml.v3's Go-type wording into config wording: no
// Go type name reaches the user.
func friendlyType(msg string) string {
	r := strings.NewReplacer(
		"cannot unmarshal !!str", "cannot use the text",
		"cannot unmarshal !!int", "cannot use the number",
		"cannot unmarshal !!float", "cannot use the number",
		"cannot unmarshal !!bool", "cannot use true/false",
		"cannot unmarshal !!map", "cannot use a mapping",
		"cannot unmarshal !!seq", "cannot use a list",
	)
	msg = r.Replace(msg)
	return goType.ReplaceAllStringFunc(msg, func(m string) string { return typeWords(strings.TrimPrefix(m, "into ")) })
}

// typeWords says what a Go type takes, in config words.
func typeWords(t string) string {
	switch {
	case t == "time.Duration":
		return "as a duration; write e.g. 30s, 5m or 1h"
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "uint"):
		return "as a whole number"
	case t == "bool":
		return "as true/false"
	case t == "string":
		return "as text"
	case t == "[]configs.Addr":
		return "as a list of IP addresses; write [192.168.50.1] or one \"- 192.168.50.1\" line each"
	case strings.HasPrefix(t, "[]"):
		return "as a list; write [a, b] or one \"- item\" line each"
	case strings.HasPrefix(t, "map["):
		return "as a mapping; write one \"key: value\" line each"
	case t == "configs.Addr":
		return "as an IP address"
	case t == "configs.MAC":
		return "as a MAC address"
	case t == "configs.Pool":
		return "as a FIRST-LAST range"
	default:
		return "here; see pxeperf config default for the form"
	}
}

// withFile attaches the file name and, from the key, the line to each error.
func withFile(err error, file string, lines map[string]int) error {
	if err == nil {
		return nil
	}
	var es Errors
	if !errors.As(err, &es) {
		var e *Error
		if !errors.As(err, &e) {
			return err
		}
		es = Errors{e}
	}
	for _, e := range es {
		e.File = file
		if e.Line == 0 && lines != nil {
			e.Line = lineOf(e.Key, lines)
		}
		if e.Key == "" && e.Line > 0 {
			e.Key = keyAt(e.Line, lines)
		}
	}
	return es
}

// lineOf finds the line of key or of its nearest parent present in the file.
func lineOf(key string, lines map[string]int) int {
	for key != "" {
		if l, ok := lines[key]; ok {
			return l
		}
		i := strings.LastIndexAny(key, ".[")
		if i < 0 {
			break
		}
		key = key[:i]
	}
	return 0
}

// keyAt returns the deepest key on a line.
func keyAt(line int, lines map[string]int) string {
	best := ""
	for k, l := range lines {
		if l == line && len(k) > len(best) {
			best = k
		}
	}
	return best
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// YAML renders the effective configuration.
func (c *Config) YAML() ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(c); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
