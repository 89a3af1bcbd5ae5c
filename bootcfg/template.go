package bootcfg

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"text/template"
	"time"
)

// Data is what a loader template sees. Empty strings mean "not set".
type Data struct {
	MAC      string // client MAC, aa:bb:cc:dd:ee:ff
	IP       string // client address, 192.168.50.10
	Hostname string // hosts entry name
	Arch     string // architecture name DHCP saw (configs arch table)
	// Server is this server's address, e.g. 192.168.50.1.
	Server string
	// ServerURL is http://ADDR[:PORT], no trailing slash.
	ServerURL string
	// Kernel and Initrd are names in the file root as the hosts entry gives
	// them (root-relative), or URLs.
	Kernel, Initrd string
	// Cmdline is the kernel command line, as the kernel should see it.
	Cmdline string
	// FDT is a device tree file (pxelinux "fdt", GRUB "devicetree", U-Boot
	// loads it to ${fdt_addr_r}).
	FDT string
	// FDTDir is a folder of device trees (pxelinux "fdtdir"; U-Boot loads
	// FDTDir/${fdtfile}). FDT wins when both are set.
	FDTDir string
	// Labels are the host's labels.
	Labels map[string]string
	// DefaultBoot is what a host without a kernel boots: "" (a message,
	// then the loader's prompt or next boot target), "local" (the local
	// disk) or "shell" (the loader's prompt, for a person); see
	// configs.Host.DefaultBoot. A kernel wins over it.
	DefaultBoot string
	// LocalBoot is the U-Boot boot target (mmc0, usb0, ...) the built-in
	// boot script runs for "local"; "" when distro boot is to go on by
	// itself.
	LocalBoot string
}

// URL turns a root-relative name into ServerURL + "/" + name; names with
// "://" are returned unchanged. Templates call it as {{url .Kernel}}.
func (d Data) URL(name string) string {
	if strings.Contains(name, "://") {
		return name
	}
	return d.ServerURL + "/" + strings.TrimLeft(name, "/")
}

// Who names the client for messages: "HOSTNAME (MAC IP)" with what is
// known, "unknown client" when nothing is.
func (d Data) Who() string {
	var id []string
	for _, s := range []string{d.MAC, d.IP} {
		if s != "" {
			id = append(id, s)
		}
	}
	switch {
	case d.Hostname != "" && len(id) > 0:
		return d.Hostname + " (" + strings.Join(id, " ") + ")"
	case d.Hostname != "":
		return d.Hostname
	case len(id) > 0:
		return strings.Join(id, " ")
	}
	return "unknown client"
}

// templateName is the name of every parsed template's root, so error
// messages can be cut at a known place. The source is kept beside it.
const templateName = "bootcfg"

// funcs are the functions templates may call. url is replaced per Render
// with one bound to the Data's ServerURL.
func funcs() template.FuncMap {
	return template.FuncMap{
		"quote":     UBootQuote,
		"grubargs":  GRUBArgs,
		"grubword":  GRUBQuote,
		"oneline":   oneLine,
		"trimslash": func(s string) string { return strings.TrimRight(s, "/") },
		"url":       func(name string) string { return Data{}.URL(name) },
	}
}

// Parse parses a loader template with Option("missingkey=error") and the
// functions quote (UBootQuote), grubargs (GRUBArgs), grubword (GRUBQuote),
// oneline (newlines to spaces, trimmed), trimslash (trailing "/" removed)
// and url (Data.URL). src names where the text came from
// ("hosts[board1].templates.uboot", "@boot/uboot.tmpl"); firstLine is the
// line of the config file on which the text starts, or 0 when the text is
// a file of its own. Errors name the source, the line and the fix:
//
//	hosts[board1].templates.uboot (line 14): template line 3: function "foo" not defined; fix the template: known fields are .MAC .IP ...
//
// Besides syntax, Parse runs the template once with every field set and
// once with none to catch unknown fields (.Kernal) before a client asks.
func Parse(l Loader, src string, firstLine int, text string) (*template.Template, error) {
	return ParseIn(l, src, "", firstLine, text)
}

// ParseIn is Parse for a template inside the config file file: errors read
// `SRC (FILE line N): ...`.
func ParseIn(l Loader, src, file string, firstLine int, text string) (*template.Template, error) {
	if !known(l) {
		return nil, fmt.Errorf("%s: unknown loader %q; use one of pxelinux, grub, uboot", src, l)
	}
	loc := location{src: src, file: file, first: firstLine}
	t, err := template.New(templateName).Option("missingkey=error").Funcs(funcs()).Parse(text)
	if err != nil {
		return nil, loc.wrap(err)
	}
	// Keep the location with the template: a second, never executed
	// template in the set carries it to Render's error messages.
	if _, err := t.New(loc.encode()).Parse(""); err != nil {
		return nil, loc.wrap(err)
	}
	for _, d := range []Data{sampleData(), {}} {
		if err := execute(t, d, &bytes.Buffer{}); err != nil && isFieldError(err) {
			return nil, loc.wrap(err)
		}
	}
	return t, nil
}

// Render executes t (from Parse) with d. For UBoot it returns the script
// wrapped in a legacy U-Boot script image (ScriptImage, named "pxeperf
// HOSTNAME" or "pxeperf MAC"), stamped with mtime; for the others the
// plain text.
func Render(l Loader, t *template.Template, d Data, mtime time.Time) ([]byte, error) {
	if !known(l) {
		return nil, fmt.Errorf("unknown loader %q; use one of pxelinux, grub, uboot", l)
	}
	var buf bytes.Buffer
	if err := execute(t, d, &buf); err != nil {
		return nil, locationOf(t).wrap(err)
	}
	if l != UBoot {
		return buf.Bytes(), nil
	}
	if buf.Len() == 0 {
		// U-Boot's source refuses a zero-length script ("Empty Script").
		buf.WriteString("\n")
	}
	name := "pxeperf"
	switch {
	case d.Hostname != "":
		name += " " + d.Hostname
	case d.MAC != "":
		name += " " + d.MAC
	}
	return ScriptImage(buf.Bytes(), name, mtime), nil
}

// execute runs t on a clone whose url is bound to d, so one parsed
// template serves clients concurrently.
func execute(t *template.Template, d Data, buf *bytes.Buffer) error {
	c, err := t.Clone()
	if err != nil {
		return err
	}
	c.Funcs(template.FuncMap{"url": d.URL})
	return c.ExecuteTemplate(buf, templateName, d)
}

func known(l Loader) bool {
	return l == PXELinux || l == GRUB || l == UBoot
}

// sampleData sets every field, so Parse's trial run walks the branches a
// configured host takes.
func sampleData() Data {
	return Data{
		MAC: "52:54:00:12:34:56", IP: "192.168.50.10", Hostname: "board1", Arch: "arm64",
		Server: "192.168.50.1", ServerURL: "http://192.168.50.1",
		Kernel: "boot/vmlinuz", Initrd: "boot/initrd.img", Cmdline: "console=ttyS0",
		FDT: "boot/board.dtb", FDTDir: "boot/dtbs", Labels: map[string]string{},
		DefaultBoot: "local", LocalBoot: "mmc0",
	}
}

// isFieldError reports errors that no Data can avoid: a field Data does
// not have. Others (a missing label, a value quote refuses) depend on the
// host and are reported by Render.
func isFieldError(err error) bool {
	return strings.Contains(err.Error(), "can't evaluate field")
}

// location is where a template's text came from.
type location struct {
	src, file string
	first     int // line of the file on which the text starts; 0: own file
}

// The location rides in the template set as the name of an empty
// template: "\x00bootcfg\x00SRC\x00FILE\x00FIRST".
const locationMark = "\x00bootcfg\x00"

func (l location) encode() string {
	return locationMark + strings.Join([]string{l.src, l.file, strconv.Itoa(l.first)}, "\x00")
}

func locationOf(t *template.Template) location {
	for _, x := range t.Templates() {
		rest, ok := strings.CutPrefix(x.Name(), locationMark)
		if !ok {
			continue
		}
		p := strings.Split(rest, "\x00")
		if len(p) == 3 {
			n, _ := strconv.Atoi(p[2])
			return location{src: p[0], file: p[1], first: n}
		}
	}
	return location{src: t.Name()}
}

// fixHint is the end of every template error.
func fixHint() string {
	var fields []string
	rt := reflect.TypeOf(Data{})
	for i := 0; i < rt.NumField(); i++ {
		fields = append(fields, "."+rt.Field(i).Name)
	}
	return "fix the template: known fields are " + strings.Join(fields, " ") +
		` (.Labels.NAME or index .Labels "NAME"); methods .Who .URL; functions are quote, grubargs, grubword, oneline, trimslash, url and Go's text/template built-ins`
}

// wrap rewrites text/template's "template: bootcfg:3:7: msg" into
// "SRC (FILE line N): template line 3: msg; fix the template: ...".
func (l location) wrap(err error) error {
	msg := err.Error()
	line := 0
	if rest, ok := strings.CutPrefix(msg, "template: "+templateName+":"); ok {
		// rest is "3: msg" (parse) or "3:7: executing \"bootcfg\" at <.X>: msg" (exec).
		num, tail, ok := strings.Cut(rest, ":")
		if n, err := strconv.Atoi(num); ok && err == nil {
			line, rest = n, tail
			if col, tail, ok := strings.Cut(rest, ":"); ok {
				if _, err := strconv.Atoi(col); err == nil {
					rest = tail
				}
			}
		}
		rest = strings.TrimSpace(rest)
		rest = strings.TrimPrefix(rest, `executing "`+templateName+`" `)
		msg = strings.ReplaceAll(rest, "started at "+templateName+":", "started at template line ")
	}
	var b strings.Builder
	b.WriteString(l.src)
	switch {
	case l.first > 0 && line > 0 && l.file != "":
		fmt.Fprintf(&b, " (%s line %d)", l.file, l.first+line-1)
	case l.first > 0 && line > 0:
		fmt.Fprintf(&b, " (line %d)", l.first+line-1)
	case l.file != "":
		fmt.Fprintf(&b, " (%s)", l.file)
	}
	b.WriteString(": ")
	if line > 0 {
		fmt.Fprintf(&b, "template line %d: ", line)
	}
	b.WriteString(msg)
	b.WriteString("; ")
	b.WriteString(fixHint())
	return &TemplateError{Src: l.src, File: l.file, Line: line, AbsLine: absLine(l, line), Msg: msg, err: err, text: b.String()}
}

func absLine(l location, line int) int {
	if line == 0 {
		return 0
	}
	if l.first > 0 {
		return l.first + line - 1
	}
	return line
}

// TemplateError is a template that does not parse or run. Error() reads
// `SRC (FILE line N): template line L: MSG; fix the template: ...`.
type TemplateError struct {
	Src     string // where the text came from, as given to Parse
	File    string // config file, as given to ParseIn; "" from Parse
	Line    int    // line in the template text, 1-based; 0 when unknown
	AbsLine int    // line in the config file (or the template's own file); 0 when unknown
	Msg     string // text/template's message without its prefix
	err     error
	text    string
}

func (e *TemplateError) Error() string { return e.text }

// Unwrap returns text/template's error (*template.ExecError for runtime errors).
func (e *TemplateError) Unwrap() error { return e.err }

// errNewline is returned by the quoting functions for values that cannot be
// written on one script line.
var errNewline = errors.New("contains a newline, NUL or other control character, which a one-line loader command cannot carry")
