package admin

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestClient: the token goes as a bearer header, a 200 answer decodes, any
// other is an error naming path and status, and no listener is an
// UnreachableError.
func TestClient(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			http.Error(w, "token please", http.StatusUnauthorized)
			return
		}
		w.Write([]byte(`{"status":"ok"}`))
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	ctx := context.Background()
	var v struct{ Status string }
	if err := NewClient(addr, "s3cret").Get(ctx, "/healthz", &v); err != nil || v.Status != "ok" {
		t.Errorf("with the token: %+v, %v", v, err)
	}
	err := NewClient(addr, "").Get(ctx, "/healthz", &v)
	if err == nil || err.Error() != "/healthz: HTTP 401: token please" {
		t.Errorf("without the token: %v", err)
	}
	srv.Close()
	var ue *UnreachableError
	if err := NewClient(addr, "").Get(ctx, "/healthz", &v); !errors.As(err, &ue) ||
		!strings.HasPrefix(err.Error(), "reaching serve's admin listener: ") {
		t.Errorf("no listener: %v, want an UnreachableError", err)
	}
}
