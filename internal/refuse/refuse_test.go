package refuse

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestRefuseLogsOncePerClientPerPeriod(t *testing.T) {
	var buf bytes.Buffer
	l := New(slog.New(slog.NewTextHandler(&buf, nil)), time.Minute)
	now := time.Unix(1000, 0)
	l.now = func() time.Time { return now }
	for range 100 {
		l.Refuse("tftp: too many transfers", "10.0.0.9")
	}
	l.Refuse("tftp: too many transfers", "10.0.0.10")
	l.Refuse("http: too many labels", "10.0.0.9")
	now = now.Add(61 * time.Second)
	l.Refuse("tftp: too many transfers", "10.0.0.9")
	if n := strings.Count(buf.String(), "\n"); n != 4 {
		t.Errorf("logged %d lines, want 4:\n%s", n, buf.String())
	}
	if c := l.Count("tftp: too many transfers"); c != 102 {
		t.Errorf("count = %d, want 102", c)
	}
	if got := fmt.Sprint(l.Reasons()); got != "[http: too many labels tftp: too many transfers]" {
		t.Errorf("reasons = %s", got)
	}
}

// TestRefuseBounded: a flood from many addresses keeps counting but
// remembers at most maxKeys clients.
func TestRefuseBounded(t *testing.T) {
	l := New(slog.New(slog.DiscardHandler), time.Minute)
	for i := range 3 * maxKeys {
		l.Refuse("dhcp: pool", fmt.Sprint(i))
	}
	if len(l.last) > maxKeys {
		t.Errorf("remembers %d clients, bound is %d", len(l.last), maxKeys)
	}
	if l.Count("dhcp: pool") != 3*maxKeys {
		t.Errorf("count = %d", l.Count("dhcp: pool"))
	}
}
