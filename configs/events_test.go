package configs

import (
	"strings"
	"testing"
	"time"
)

// TestEvents: the events section's defaults, a good file, and each bad
// value refused with its key, line and fix.
func TestEvents(t *testing.T) {
	e := Default().Events
	if e.WebhookURL != "" || e.Queue != 1024 || e.Timeout != 5*time.Second || e.Attempts != 8 {
		t.Errorf("defaults %+v", e)
	}
	c, err := Parse("t.yaml", []byte("events:\n  webhook_url: https://ci.example/hook\n  queue: 16\n"), Default())
	if err != nil {
		t.Fatal(err)
	}
	if c.Events.WebhookURL != "https://ci.example/hook" || c.Events.Queue != 16 || c.Events.Timeout != 5*time.Second {
		t.Errorf("parsed %+v", c.Events)
	}
	for name, tt := range map[string]struct {
		yaml string
		want []string
	}{
		"scheme":  {"events:\n  webhook_url: ftp://x/\n", []string{"t.yaml:2", "events.webhook_url", "https://"}},
		"no host": {"events:\n  webhook_url: http://\n", []string{"events.webhook_url", "leave it out"}},
		"queue":   {"events:\n  queue: 0\n", []string{"t.yaml:2", "events.queue", "1024"}},
		"timeout": {"events:\n  timeout: 1ms\n", []string{"events.timeout", "5s"}},
		"tries":   {"events:\n  attempts: 0\n", []string{"events.attempts", "8"}},
		"typo":    {"events:\n  webhook_ulr: x\n", []string{"t.yaml:2", "events.webhook_ulr", "webhook_url"}},
	} {
		_, err := Parse("t.yaml", []byte(tt.yaml), Default())
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		rest := err.Error()
		for _, w := range tt.want {
			i := strings.Index(rest, w)
			if i < 0 {
				t.Errorf("%s: error %q lacks %q (in order)", name, err, w)
				break
			}
			rest = rest[i+len(w):]
		}
	}
}
