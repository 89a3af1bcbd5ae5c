package httpboot

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/template"

	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/hosts"
)

// DefaultScript is the built-in iPXE script template: it boots the host
// entry's kernel/initrd/cmdline when set; otherwise it says why and drops to
// the iPXE shell. It never chains back to itself, so a client cannot loop.
// Image URLs carry ?mac= so their fetches are put on the right host even
// when no lease ties the client's address to its MAC (proxyDHCP).
const DefaultScript = `#!ipxe
# pxeperf built-in script for {{with .Hostname}}{{.}} {{end}}{{with .MAC}}{{.}} {{end}}({{.IP}})
{{- if .Kernel}}
echo pxeperf: booting {{.Kernel}}{{if .Hostname}} on {{.Hostname}}{{end}}
kernel {{url .Kernel}}{{with .MAC}}?mac={{.}}{{end}}{{if .Initrd}} initrd=initrd{{end}}{{if .Cmdline}} {{.Cmdline}}{{end}}
{{- if .Initrd}}
initrd --name initrd {{url .Initrd}}{{with .MAC}}?mac={{.}}{{end}}
{{- end}}
boot || goto failed
:failed
echo pxeperf: booting {{.Kernel}} failed
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
	src, text, err := s.scriptSource(c.Host)
	if err != nil {
		return s.scriptFailed(w, rec, src, err)
	}
	base := s.serverURL(r)
	t, err := template.New(src).Option("missingkey=error").Funcs(scriptFuncs(base)).Parse(text)
	if err != nil {
		return s.scriptFailed(w, rec, src, err)
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, s.scriptData(r, rec, c, base)); err != nil {
		return s.scriptFailed(w, rec, src, err)
	}
	s.writeText(w, r, "text/plain; charset=utf-8", buf.Bytes())
	return -1
}

func (s *Server) scriptFailed(w http.ResponseWriter, rec *event.Fetch, src string, err error) int64 {
	msg := fmt.Sprintf("iPXE script template %s: %v (fix the template: known variables are .MAC .IP .Arch .Hostname .Server .ServerURL .ImageURL .Kernel .Initrd .Cmdline .Labels .Query and the query parameters)", src, err)
	s.opt.Logger.Error("http boot: "+msg, "client", rec.Client.String(), "host", rec.Host)
	rec.Outcome, rec.Err = event.OutcomeError, msg
	http.Error(w, "pxeperf: "+msg, http.StatusInternalServerError)
	return 0
}

// scriptSource picks the template: the host entry's script, else
// http.script, else DefaultScript. A script "@file" is read from the root.
// src names it for error messages.
func (s *Server) scriptSource(h *configs.Host) (src, text string, err error) {
	switch {
	case h != nil && h.Script != "":
		src, text = "hosts["+h.Name+"].script", h.Script
	case s.opt.HTTP.Script != "":
		src, text = "http.script", s.opt.HTTP.Script
	default:
		return "built-in", DefaultScript, nil
	}
	name, ok := strings.CutPrefix(text, "@")
	if !ok {
		return src, text, nil
	}
	src = name
	f, _, err := s.opt.Images.Open(name)
	if err != nil {
		return src, "", fmt.Errorf("reading the template from the image root: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return src, "", fmt.Errorf("reading the template from the image root: %w", err)
	}
	return src, string(b), nil
}

// scriptData is what a template sees. Query parameters whose names are Go
// identifiers appear as top-level keys too (built-in names win); all of them
// are in .Query.
func (s *Server) scriptData(r *http.Request, rec *event.Fetch, c hosts.Client, base string) map[string]any {
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
	var hostname, kernel, initrd, cmdline string
	if h := c.Host; h != nil {
		hostname, kernel, initrd, cmdline = h.Name, h.Kernel, h.Initrd, h.Cmdline
	}
	lb := rec.Labels
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
		"Server": server, "ServerURL": base, "ImageURL": base,
		"Kernel": kernel, "Initrd": initrd, "Cmdline": cmdline,
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
