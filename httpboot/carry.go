package httpboot

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
)

// A script hands out URLs (the built-in script's kernel and initrd, url
// "name", .ImageURL) whose fetches must be recorded like the script's own:
// the same MAC and the same ?label. values, or the image fetches of a board
// booted with ?label.rx_offload=off land in the wrong column. A query
// string cannot ride on a base URL (.ImageURL is written "{{.ImageURL}}/vmlinuz"),
// so what is carried sits in the path, as one segment after carryPrefix:
// base64url of the query "mac=...&label.k=v" (only letters, digits, - and
// _: it survives iPXE's, U-Boot's and GRUB's URL handling unchanged).
// ServeHTTP takes it out again before anything else looks at the path;
// parameters of the request's own query win over carried ones.
const carryPrefix = "/_c/"

// maxCarry bounds the carried segment, well inside maxPathLen.
const maxCarry = 512

// carryQuery is what a script's URLs carry: the client's MAC and the
// request's ?label. parameters (already checked by scriptQuery and labels).
// When the labels do not fit maxCarry, only the MAC is carried and ok is
// false.
func carryQuery(mac string, q url.Values) (token string, ok bool) {
	v := url.Values{}
	if mac != "" {
		v.Set("mac", mac)
	}
	for k, vs := range q {
		if strings.HasPrefix(k, "label.") && len(vs) > 0 {
			v.Set(k, vs[0])
		}
	}
	ok = true
	t := base64.RawURLEncoding.EncodeToString([]byte(v.Encode()))
	if len(t) > maxCarry {
		ok = false
		v = url.Values{}
		if mac != "" {
			v.Set("mac", mac)
		}
		t = base64.RawURLEncoding.EncodeToString([]byte(v.Encode()))
	}
	if len(v) == 0 {
		return "", ok
	}
	return t, ok
}

// carryBase is base with the carried segment, or base when there is none.
func carryBase(base, token string) string {
	if token == "" {
		return base
	}
	return base + carryPrefix + token
}

// uncarry moves a carried segment from r's path into its query (the
// request's own parameters win). A segment that does not decode is left in
// the path: the request then fails as any unknown path does.
func uncarry(r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, carryPrefix)
	if !ok {
		return
	}
	token, path, _ := strings.Cut(rest, "/")
	if len(token) > maxCarry {
		return
	}
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return
	}
	carried, err := url.ParseQuery(string(raw))
	if err != nil {
		return
	}
	q := r.URL.Query()
	for k, vs := range carried {
		if (k == "mac" || strings.HasPrefix(k, "label.")) && !q.Has(k) && len(vs) > 0 {
			q.Set(k, vs[0])
		}
	}
	u := *r.URL
	u.Path, u.RawPath, u.RawQuery = "/"+path, "", q.Encode()
	r.URL = &u
	r.RequestURI = u.RequestURI()
}
