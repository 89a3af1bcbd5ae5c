package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/hosts"
)

// MaxHostBody is the largest request body /api/hosts takes (413 past it).
const MaxHostBody = 64 << 10

// HostsHandler serves the run-time hosts (package hosts' Store) on the
// admin listener, behind its token:
//
//	GET    /api/hosts                   {"hosts": [Entry...]} sorted by MAC
//	GET    /api/hosts/{mac}             one Entry; ETag header
//	PUT    /api/hosts/{mac}             body: a host entry as hosts[] has it, as JSON; 201 created, 200 replaced
//	PATCH  /api/hosts/{mac}             body: an RFC 7396 merge patch over the entry as it is
//	DELETE /api/hosts/{mac}             the run-time entry and its next boot go; 204
//	GET    /api/hosts/{mac}/next-boot   the next boot
//	PUT    /api/hosts/{mac}/next-boot   body: {"action": "boot"|"local"|"shell", "kernel", "initrd", "cmdline", "fdt", "script", "once"} ("set" is the server's time)
//	DELETE /api/hosts/{mac}/next-boot   204
//
// An Entry is {"mac", "source" (config, api, api-over-config), "etag",
// "host" (the entry's YAML shape), "next_boot" (or null), "updated"}.
// Writes take If-Match (412 when the etag is stale) and, on PUT,
// If-None-Match: * (412 when a run-time entry exists); a GET with
// If-None-Match of the current etag is 304. Errors are {"error", "field",
// "fix"}: error is the message `config check` prints for the same entry,
// field the key it names; 400 (bad JSON, a value config check refuses, a
// change that does not apply), 404, 409 (the host is the config file's),
// 412, 413 (body over MaxHostBody), 415 (a write not in JSON).
type HostsHandler struct {
	store  *hosts.Store
	logger *slog.Logger
	mux    *http.ServeMux
}

// NewHosts builds the handler over store; logger nil: discard.
func NewHosts(store *hosts.Store, logger *slog.Logger) *HostsHandler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	h := &HostsHandler{store: store, logger: logger, mux: http.NewServeMux()}
	h.mux.HandleFunc("GET /api/hosts", h.list)
	h.mux.HandleFunc("GET /api/hosts/{mac}", h.get)
	h.mux.HandleFunc("PUT /api/hosts/{mac}", h.put)
	h.mux.HandleFunc("PATCH /api/hosts/{mac}", h.patch)
	h.mux.HandleFunc("DELETE /api/hosts/{mac}", h.delete)
	h.mux.HandleFunc("GET /api/hosts/{mac}/next-boot", h.getNext)
	h.mux.HandleFunc("PUT /api/hosts/{mac}/next-boot", h.putNext)
	h.mux.HandleFunc("DELETE /api/hosts/{mac}/next-boot", h.deleteNext)
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		h.fail(w, http.StatusMethodNotAllowed, &hostError{Error: r.Method + " " + r.URL.Path + " is not an API call",
			Fix: "use GET /api/hosts, GET/PUT/PATCH/DELETE /api/hosts/MAC or GET/PUT/DELETE /api/hosts/MAC/next-boot"})
	})
	return h
}

// ServeHTTP implements http.Handler.
func (h *HostsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// entryJSON is an Entry as the API answers it.
type entryJSON struct {
	MAC      string          `json:"mac"`
	Source   string          `json:"source"`
	ETag     string          `json:"etag"`
	Host     map[string]any  `json:"host"`
	NextBoot *hosts.NextBoot `json:"next_boot"`
	Updated  time.Time       `json:"updated"`
}

func toJSON(e hosts.Entry) entryJSON {
	m, _ := hosts.HostMap(e.Host)
	return entryJSON{MAC: e.MAC.String(), Source: e.Source, ETag: e.ETag, Host: m, NextBoot: e.NextBoot, Updated: e.Updated.UTC()}
}

// hostError is the body of every error answer.
type hostError struct {
	Error  string   `json:"error"`
	Field  string   `json:"field,omitempty"`
	Fix    string   `json:"fix,omitempty"`
	Errors []string `json:"errors,omitempty"` // every problem, when more than one
}

func (h *HostsHandler) list(w http.ResponseWriter, r *http.Request) {
	out := struct {
		Hosts []entryJSON `json:"hosts"`
	}{Hosts: []entryJSON{}}
	for _, e := range h.store.List() {
		out.Hosts = append(out.Hosts, toJSON(e))
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *HostsHandler) get(w http.ResponseWriter, r *http.Request) {
	e, ok := h.named(w, r)
	if !ok {
		return
	}
	if inm := r.Header.Get("If-None-Match"); inm != "" && matches(inm, e.ETag) {
		w.Header().Set("ETag", e.ETag)
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.answer(w, http.StatusOK, e)
}

func (h *HostsHandler) put(w http.ResponseWriter, r *http.Request) {
	mac, body, ok := h.write(w, r, "application/json")
	if !ok {
		return
	}
	e, created, err := h.store.Put(mac, body, cond(r))
	if err != nil {
		h.failErr(w, mac, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	h.answer(w, status, e)
}

func (h *HostsHandler) patch(w http.ResponseWriter, r *http.Request) {
	h.change(w, r, h.store.Patch, "application/json", "application/merge-patch+json")
}

// change reads a write's body and answers the entry change made of it.
func (h *HostsHandler) change(w http.ResponseWriter, r *http.Request,
	fn func(net.HardwareAddr, []byte, hosts.Cond) (hosts.Entry, error), types ...string) {
	mac, body, ok := h.write(w, r, types...)
	if !ok {
		return
	}
	e, err := fn(mac, body, cond(r))
	if err != nil {
		h.failErr(w, mac, err)
		return
	}
	h.answer(w, http.StatusOK, e)
}

func (h *HostsHandler) delete(w http.ResponseWriter, r *http.Request) {
	mac, ok := h.mac(w, r)
	if !ok {
		return
	}
	if err := h.store.Delete(mac, cond(r)); err != nil {
		h.failErr(w, mac, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *HostsHandler) getNext(w http.ResponseWriter, r *http.Request) {
	e, ok := h.named(w, r)
	if !ok {
		return
	}
	if e.NextBoot == nil {
		h.fail(w, http.StatusNotFound, &hostError{Error: e.MAC.String() + " has no next boot set; it boots its host entry",
			Fix: "PUT /api/hosts/" + e.MAC.String() + "/next-boot to set one"})
		return
	}
	w.Header().Set("ETag", e.ETag)
	writeJSON(w, http.StatusOK, e.NextBoot)
}

func (h *HostsHandler) putNext(w http.ResponseWriter, r *http.Request) {
	h.change(w, r, h.store.SetNextBoot, "application/json")
}

func (h *HostsHandler) deleteNext(w http.ResponseWriter, r *http.Request) {
	mac, ok := h.mac(w, r)
	if !ok {
		return
	}
	e, err := h.store.ClearNextBoot(mac, cond(r))
	if err != nil {
		h.failErr(w, mac, err)
		return
	}
	w.Header().Set("ETag", e.ETag)
	w.WriteHeader(http.StatusNoContent)
}

// mac reads the path's MAC, any common form.
func (h *HostsHandler) mac(w http.ResponseWriter, r *http.Request) (net.HardwareAddr, bool) {
	mac, err := hosts.ParseMAC(r.PathValue("mac"))
	if err != nil {
		h.fail(w, http.StatusBadRequest, &hostError{Error: "mac: " + err.Error(), Field: "mac", Fix: "write e.g. 52:54:00:12:34:56"})
		return nil, false
	}
	return mac, true
}

// named is the path's entry, or a 404 answered.
func (h *HostsHandler) named(w http.ResponseWriter, r *http.Request) (hosts.Entry, bool) {
	mac, ok := h.mac(w, r)
	if !ok {
		return hosts.Entry{}, false
	}
	e, ok := h.store.Get(mac)
	if !ok {
		h.fail(w, http.StatusNotFound, &hostError{Error: mac.String() + " has no host entry, in the config file or set at run time",
			Fix: "PUT /api/hosts/" + mac.String() + " to create it"})
	}
	return e, ok
}

// write checks a write's media type and reads its body (at most
// MaxHostBody), answering 415 or 413 itself.
func (h *HostsHandler) write(w http.ResponseWriter, r *http.Request, types ...string) (net.HardwareAddr, []byte, bool) {
	mac, ok := h.mac(w, r)
	if !ok {
		return nil, nil, false
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || !contains(types, mt) {
		h.fail(w, http.StatusUnsupportedMediaType, &hostError{Error: fmt.Sprintf("Content-Type %q: the body must be JSON", r.Header.Get("Content-Type")),
			Fix: "send the header Content-Type: " + strings.Join(types, " or ")})
		return nil, nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxHostBody))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		h.fail(w, http.StatusRequestEntityTooLarge, &hostError{Error: fmt.Sprintf("the body is over %d KiB", MaxHostBody>>10),
			Fix: "a host entry is small: put large scripts or templates in the root and name them as @file"})
		return nil, nil, false
	}
	if err != nil {
		h.fail(w, http.StatusBadRequest, &hostError{Error: "reading the body: " + err.Error()})
		return nil, nil, false
	}
	return mac, body, true
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}

// cond reads a write's preconditions.
func cond(r *http.Request) hosts.Cond {
	var c hosts.Cond
	for _, v := range r.Header.Values("If-Match") {
		for _, t := range strings.Split(v, ",") {
			if t = strings.TrimSpace(t); t != "" {
				c.IfMatch = append(c.IfMatch, t)
			}
		}
	}
	c.IfNoneMatch = strings.TrimSpace(r.Header.Get("If-None-Match")) == "*"
	return c
}

// matches says whether an If-None-Match value names etag (or is *).
func matches(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == etag {
			return true
		}
	}
	return false
}

func (h *HostsHandler) answer(w http.ResponseWriter, status int, e hosts.Entry) {
	w.Header().Set("ETag", e.ETag)
	writeJSON(w, status, toJSON(e))
}

// failErr answers a store error with its status and the config-check
// message, its key and its fix.
func (h *HostsHandler) failErr(w http.ResponseWriter, mac net.HardwareAddr, err error) {
	var es configs.Errors
	var ce *configs.Error
	switch {
	case errors.As(err, &es) && len(es) > 0:
		h.fail(w, http.StatusBadRequest, configError(es))
	case errors.As(err, &ce):
		h.fail(w, http.StatusBadRequest, configError(configs.Errors{ce}))
	case errors.Is(err, hosts.ErrRefused):
		h.fail(w, http.StatusBadRequest, &hostError{Error: err.Error(), Fix: fixOf(err.Error())})
	case errors.Is(err, hosts.ErrNotFound):
		h.fail(w, http.StatusNotFound, &hostError{Error: err.Error(), Fix: fixOf(err.Error())})
	case errors.Is(err, hosts.ErrFromConfig):
		h.fail(w, http.StatusConflict, &hostError{Error: err.Error(), Fix: "the host comes from " + h.store.ConfigFile() +
			"; edit it there (and send SIGHUP), or PUT /api/hosts/" + mac.String() + " to set a run-time entry over it"})
	case errors.Is(err, hosts.ErrPrecondition):
		if e, ok := h.store.Get(mac); ok {
			w.Header().Set("ETag", e.ETag) // the etag to retry with, once the entry is read again
		}
		h.fail(w, http.StatusPreconditionFailed, &hostError{Error: err.Error(), Fix: fixOf(err.Error())})
	default:
		h.logger.Error("api: a host change failed", "client_mac", mac.String(), "err", err)
		h.fail(w, http.StatusInternalServerError, &hostError{Error: err.Error(), Fix: fixOf(err.Error())})
	}
}

// configError is a config problem list as the API answers it.
func configError(es configs.Errors) *hostError {
	he := &hostError{Error: es[0].Error(), Field: es[0].Key, Fix: fixOf(es[0].Msg)}
	if len(es) > 1 {
		for _, e := range es {
			he.Errors = append(he.Errors, e.Error())
		}
	}
	return he
}

// fixOf is the fix of a "what is wrong; the fix" message.
func fixOf(msg string) string {
	if _, fix, ok := strings.Cut(msg, "; "); ok {
		return fix
	}
	return ""
}

func (h *HostsHandler) fail(w http.ResponseWriter, status int, e *hostError) {
	h.logger.Debug("api: host request failed", "status", status, "err", e.Error)
	writeJSON(w, status, e)
}

// writeJSON answers v; host answers are small, written at once.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
