package metrics

import (
	"bytes"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// TestTextLogHasNoGoSyntax: serve's text log writes maps, lists and
// structs as sorted key=value text, and leaves empty ones out.
func TestTextLogHasNoGoSyntax(t *testing.T) {
	var b bytes.Buffer
	log := NewLogger(&b, "text", 0)
	type counts struct {
		Sent, Lost int
		Why        map[string]uint64
	}
	log.Info("stats", "refused", map[string]uint64{}, "errors", 0)
	log.Info("stats", "refused", map[string]uint64{"rate": 1, "dup": 2}, "kinds", []string{"a", "b"}, "none", []int(nil))
	log.Info("stats", "c", counts{Sent: 3, Lost: 1, Why: map[string]uint64{"x": 1}}, "p", &counts{Sent: 1})
	log.Info("kept", "addr", netip.MustParseAddr("10.0.0.1"), "d", time.Second, "err", errors.New("boom"), "raw", []byte("hi"))
	out := b.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 {
		t.Fatalf("log:\n%s", out)
	}
	for _, bad := range []string{"map[", "[]", "{", "}"} {
		if strings.Contains(out, bad) {
			t.Errorf("log has Go syntax %q:\n%s", bad, out)
		}
	}
	for i, want := range [][]string{
		{"msg=stats errors=0"},
		{`refused="dup=2,rate=1"`, "kinds=a,b"},
		{`c="sent=3,lost=1,why=x=1"`, `p="sent=1,lost=0,why="`},
		{"addr=10.0.0.1", "d=1s", "err=boom", `raw="hi"`},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("line %d lacks %s:\n%s", i+1, w, lines[i])
			}
		}
	}
	if strings.Contains(lines[0], "refused") || strings.Contains(lines[1], "none") {
		t.Errorf("an empty map or list was written:\n%s", out)
	}
}
