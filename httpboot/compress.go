package httpboot

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"

	"github.com/klauspost/compress/gzip"
)

// minCompress is the smallest text body worth compressing.
const minCompress = 128

// writeText writes a small generated body (script, JSON), compressed with
// zstd or gzip when the client accepts it. Image files never come here:
// they go out uncompressed through sendfile.
func (s *Server) writeText(w http.ResponseWriter, r *http.Request, ctype string, body []byte) {
	h := w.Header()
	h.Set("Content-Type", ctype)
	h.Set("Cache-Control", "no-store")
	h.Add("Vary", "Accept-Encoding")
	if len(body) >= minCompress {
		switch pickEncoding(r.Header.Values("Accept-Encoding")) {
		case "zstd":
			body = s.zenc.EncodeAll(body, nil)
			h.Set("Content-Encoding", "zstd")
		case "gzip":
			var b bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&b, gzip.DefaultCompression)
			_, _ = zw.Write(body)
			_ = zw.Close()
			body = b.Bytes()
			h.Set("Content-Encoding", "gzip")
		}
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// pickEncoding chooses zstd over gzip among the codings the client accepts
// (q=0 refuses one); "" for identity.
func pickEncoding(values []string) string {
	var zstd, gz bool
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			name = strings.ToLower(strings.TrimSpace(name))
			if q, ok := strings.CutPrefix(strings.ReplaceAll(params, " ", ""), "q="); ok {
				if f, err := strconv.ParseFloat(q, 64); err == nil && f <= 0 {
					continue
				}
			}
			switch name {
			case "zstd":
				zstd = true
			case "gzip", "x-gzip":
				gz = true
			}
		}
	}
	switch {
	case zstd:
		return "zstd"
	case gz:
		return "gzip"
	}
	return ""
}
