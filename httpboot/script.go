package httpboot

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"text/template"

	"github.com/pxeperf/pxeperf/bootcfg"
	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/hosts"
	"github.com/pxeperf/pxeperf/images"
)

// DefaultScript is the built-in iPXE script template: it boots the host
// entry's kernel/initrd/cmdline when set; otherwise it carries out the
// host's default_boot, or says why nothing boots and drops to the iPXE
// shell. It never chains back to itself, so a client cannot loop.
//
// default_boot local: under a BIOS, sanboot of drive 0x80 (the first
// disk's MBR, as netboot.xyz and Warewulf do), else `exit 1` back to the
// firmware, which under UEFI tries its next boot option: a failure code,
// because EDK2 answers a boot option that returns success with its boot
// manager menu instead (see DESIGN.md). default_boot shell: the shell with
// a message.
// Image URLs (url, .ImageURL) carry the client's MAC and the request's
// ?label. values (see carry.go), so their fetches are put on the right
// host, even when no lease ties the client's address to its MAC
// (proxyDHCP), and are labelled as the script's fetch is.
const DefaultScript = `#!ipxe
# pxeperf built-in script for {{with .Hostname}}{{.}} {{end}}{{with .MAC}}{{.}} {{end}}({{.IP}})
{{- if .Kernel}}
echo pxeperf: booting {{.Kernel}}{{if .Hostname}} on {{.Hostname}}{{end}}
kernel {{url .Kernel}}{{if .Initrd}} initrd=initrd{{end}}{{if .Cmdline}} {{.Cmdline}}{{end}}
{{- if .Initrd}}
initrd --name initrd {{url .Initrd}}
{{- end}}
boot || goto failed
:failed
echo pxeperf: booting {{.Kernel}} failed
{{- else if eq .DefaultBoot "local"}}
echo pxeperf: {{with .Hostname}}{{.}} {{end}}{{if .MAC}}{{.MAC}}{{else}}{{.IP}}{{end}} boots from its local disk (default_boot: local)
iseq ${platform} pcbios || goto pxeperf_exit
sanboot --no-describe --drive 0x80 ||
echo pxeperf: no boot sector on drive 0x80, exiting to the BIOS for its next boot device
:pxeperf_exit
exit 1
{{- else if eq .DefaultBoot "shell"}}
echo pxeperf: {{with .Hostname}}{{.}} {{end}}{{if .MAC}}{{.MAC}}{{else}}{{.IP}}{{end}} stops at the iPXE shell for a person (default_boot: shell)
{{- else}}
echo pxeperf: no kernel is set for {{if .MAC}}{{.MAC}}{{else}}{{.IP}}{{end}}
echo pxeperf: add a hosts entry with kernel/initrd/cmdline or a script, see {{.ServerURL}}/healthz
{{- end}}
shell
`

// scriptFuncs are the functions scripts may call.
func scriptFuncs(base string) template.FuncMap {
	return template.FuncMap{
		// url turns a root-relative name into a URL on this server; URLs
		// (anything with "://") are left alone.
		"url": func(name string) string {
			if strings.Contains(name, "://") {
				return name
			}
			return base + "/" + strings.TrimLeft(name, "/")
		},
	}
}

// serveScript renders the client's iPXE script. It returns the promised
// body length, or 0 when it already set the outcome.
func (s *Server) serveScript(w *countingWriter, r *http.Request, rec *event.Fetch, c hosts.Client) int64 {
	if err := scriptQuery(r.URL.Query()); err != nil {
		s.refused.Refuse(refuseScriptValue, rec.Client.Addr().String(), "err", err.Error())
		rec.Outcome, rec.Err = event.OutcomeError, err.Error()
		http.Error(w, "pxeperf: "+err.Error(), http.StatusBadRequest)
		return 0
	}
	src, tmpl, err := s.scriptSource(c.Host)
	if err != nil {
		return s.scriptFailed(w, rec, src, err)
	}
	base := s.serverURL(r)
	mac := ""
	if c.MAC != nil {
		mac = c.MAC.String()
	}
	token, whole := carryQuery(mac, r.URL.Query())
	if !whole {
		s.opt.Logger.Warn("http boot: the script's labels are too long to carry to its image URLs; only the MAC is carried",
			"client", rec.Client.String(), "max_bytes", maxCarry)
	}
	images := carryBase(base, token)
	t, err := parseScript(src, tmpl, images)
	if err != nil {
		return s.scriptFailed(w, rec, src, err)
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, s.scriptData(r, rec, c, base, images)); err != nil {
		return s.scriptFailed(w, rec, src, err)
	}
	s.writeText(w, r, "text/plain; charset=utf-8", buf.Bytes())
	return -1
}

// scriptFix is the advice on every script template error.
const scriptFix = "fix the template: known variables are .MAC .IP .Arch .Hostname .Server .ServerURL .ImageURL .Kernel .Initrd .Cmdline .DefaultBoot .LocalBoot .Labels .Query and the query parameters"

func (s *Server) scriptFailed(w http.ResponseWriter, rec *event.Fetch, src string, err error) int64 {
	msg := fmt.Sprintf("iPXE script template %s: %v (%s)", src, err, scriptFix)
	s.opt.Logger.Error("http boot: "+msg, "client", rec.Client.String(), "host", rec.Host)
	rec.Outcome, rec.Err = event.OutcomeError, msg
	http.Error(w, "pxeperf: "+msg, http.StatusInternalServerError)
	return 0
}

// scriptText is a template's text and where it starts: the config file
// and line for inline text, or the root file for "@file".
type scriptText struct {
	text string
	file string
	line int // line of file the text starts on; 1 for a file of its own
}

// scriptSource picks the template: the host entry's script, else
// http.script, else DefaultScript. A script "@file" is read from the root.
// src names it for error messages.
func (s *Server) scriptSource(h *configs.Host) (src string, t scriptText, err error) {
	return readScript(s.opt.Images, s.opt.ConfigFile, h, s.opt.HTTP.Script)
}

func readScript(store *images.Store, configFile string, h *configs.Host, global configs.Template) (string, scriptText, error) {
	var src string
	var tmpl configs.Template
	switch {
	case h != nil && h.Script.Text != "":
		src, tmpl = "hosts["+h.Name+"].script", h.Script
	case global.Text != "":
		src, tmpl = "http.script", global
	default:
		return "built-in", scriptText{text: DefaultScript, line: 1}, nil
	}
	name, ok := strings.CutPrefix(strings.TrimSpace(tmpl.Text), "@")
	if !ok {
		return src, scriptText{text: tmpl.Text, file: configFile, line: tmpl.Line}, nil
	}
	src += " (@" + name + ")"
	text, err := bootcfg.ReadTemplate(store, name)
	if err != nil {
		return src, scriptText{}, fmt.Errorf("reading the template from the image root: %w (put %s in the root, or write the script inline)", err, name)
	}
	return src, scriptText{text: text, file: name, line: 1}, nil
}

// templateLine finds text/template's "NAME:LINE:" position in an error.
var templateLine = regexp.MustCompile(`^template: [^:]*:(\d+):(\d+:)? ?`)

// parseScript parses an iPXE script template. An error names the file and
// the line in it (config line + template line - 1 for inline text).
func parseScript(src string, st scriptText, base string) (*template.Template, error) {
	t, err := template.New(src).Option("missingkey=error").Funcs(scriptFuncs(base)).Parse(st.text)
	if err == nil {
		return t, nil
	}
	msg := err.Error()
	if m := templateLine.FindStringSubmatch(msg); m != nil && st.line > 0 {
		n, _ := strconv.Atoi(m[1])
		where := fmt.Sprintf("line %d", st.line+n-1)
		if st.file != "" {
			where = fmt.Sprintf("%s:%d", st.file, st.line+n-1)
		}
		msg = where + ": " + msg[len(m[0]):]
	}
	return nil, errors.New(msg)
}

// CheckScripts parses every iPXE script template of a config (http.script
// and each host's script; "@file" ones from the root), so a broken one
// fails `config check` and serve's start, not a board's boot. Errors name
// the key, the file and line, and the fix.
func CheckScripts(cfg *configs.Config, store *images.Store) error {
	var errs []error
	check := func(h *configs.Host) {
		src, st, err := readScript(store, cfg.File, h, cfg.HTTP.Script)
		if err == nil {
			_, err = parseScript(src, st, "http://check")
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("iPXE script template %s: %v; %s", src, err, scriptFix))
		}
	}
	check(nil)
	for i := range cfg.Hosts {
		if cfg.Hosts[i].Script.Text != "" {
			check(&cfg.Hosts[i])
		}
	}
	return errors.Join(errs...)
}

// scriptQuery checks that every query parameter can reach a script as it
// is. iPXE has no quoting a template could rely on (a newline starts a
// command, ${...} expands, || and && chain, # comments), and generated
// shells (U-Boot hush, GRUB) split on ; and spaces; so a name or value is
// taken only when it is made of letters, digits and . _ : / @ + = , % ~ -
// and the request is refused otherwise. Values from the config are trusted.
func scriptQuery(q map[string][]string) error {
	for k, vs := range q {
		if !scriptSafe(k) {
			return fmt.Errorf("query parameter %q: a script takes names of letters, digits and . _ : / @ + = , %% ~ - only", truncate(k, 64))
		}
		for _, v := range vs {
			if !scriptSafe(v) {
				return fmt.Errorf("query parameter %s=%q: a value that reaches a script must be letters, digits and . _ : / @ + = , %% ~ - only (no spaces, newlines, $ { } ; | & # quotes)",
					truncate(k, 64), truncate(v, 64))
			}
		}
	}
	return nil
}

func scriptSafe(v string) bool {
	for _, c := range []byte(v) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			strings.IndexByte("._:/@+=,%~-", c) >= 0
		if !ok {
			return false
		}
	}
	return true
}

// scriptData is what a template sees. Query parameters whose names are Go
// identifiers appear as top-level keys too (built-in names win); all of them
// are in .Query.
func (s *Server) scriptData(r *http.Request, rec *event.Fetch, c hosts.Client, base, images string) map[string]any {
	d := map[string]any{}
	q := map[string]string{}
	for k, vs := range r.URL.Query() {
		if len(vs) == 0 {
			continue
		}
		q[k] = vs[0]
		if isIdent(k) {
			d[k] = vs[0]
		}
	}
	mac, arch := "", ""
	if c.MAC != nil {
		mac = c.MAC.String()
	}
	if a, ok := configs.ArchByCode(c.Arch); ok {
		arch = a.Name
	}
	var hostname, kernel, initrd, cmdline, defaultBoot, localBoot string
	if h := c.Host; h != nil {
		hostname, kernel, initrd, cmdline = h.Name, h.Kernel, h.Initrd, h.Cmdline
		defaultBoot, localBoot = h.DefaultBoot, h.LocalBoot
	}
	lb := c.Labels(rec.Labels) // the record gets the entry's later (hosts.Stamping)
	if lb == nil {
		lb = map[string]string{}
	}
	ip := ""
	if rec.Client.IsValid() {
		ip = rec.Client.Addr().String()
	}
	server := ""
	if a := s.serverAddr(r); a.IsValid() {
		server = a.String()
	}
	for k, v := range map[string]any{
		"MAC": mac, "IP": ip, "Arch": arch, "Hostname": hostname,
		"Server": server, "ServerURL": base, "ImageURL": images,
		"Kernel": kernel, "Initrd": initrd, "Cmdline": cmdline,
		"DefaultBoot": defaultBoot, "LocalBoot": localBoot,
		"Labels": lb, "Query": q,
	} {
		d[k] = v
	}
	return d
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		ok := r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (i > 0 && r >= '0' && r <= '9')
		if !ok {
			return false
		}
	}
	return true
}
