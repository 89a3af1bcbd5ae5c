package configs

import (
	"net/url"
	"strings"
	"time"
)

// Events configures where a board's milestones (host and next boot
// changes, DHCP ACK, loader and kernel fetched, next boot consumed) go
// besides the records of kind event and the admin event stream, which
// always carry them (package notify).
type Events struct {
	// WebhookURL receives each milestone as a POST of JSON
	// {"time","mac","host","what","detail"}. Default "": no webhook.
	WebhookURL string `yaml:"webhook_url"`
	// WebhookTokenFile names a file holding a token sent as
	// "Authorization: Bearer TOKEN". Default "": none.
	WebhookTokenFile string `yaml:"webhook_token_file"`
	// Queue bounds the milestones waiting for the webhook; past it the
	// oldest is dropped, counted (metrics, /healthz). Default 1024.
	Queue int `yaml:"queue"`
	// Timeout bounds one POST. Default 5s.
	Timeout time.Duration `yaml:"timeout"`
	// Attempts is how often one milestone is tried, with exponential
	// backoff and jitter between tries, before it is given up (counted).
	// Default 8.
	Attempts int `yaml:"attempts"`
}

// validateEvents checks the events section.
func validateEvents(e *Events, add func(key, format string, a ...any)) {
	if e.WebhookURL != "" {
		u, err := url.Parse(e.WebhookURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add("events.webhook_url", "%q is not an http:// or https:// URL; write e.g. https://ci.example/pxeperf-hook, or leave it out for no webhook", e.WebhookURL)
		}
	}
	if e.WebhookTokenFile != "" && strings.TrimSpace(e.WebhookTokenFile) != e.WebhookTokenFile {
		add("events.webhook_token_file", "%q has leading or trailing spaces; write the path alone", e.WebhookTokenFile)
	}
	if e.Queue < 1 || e.Queue > 1<<20 {
		add("events.queue", "%d is outside 1..1048576; the default is 1024", e.Queue)
	}
	if e.Timeout < 100*time.Millisecond || e.Timeout > 5*time.Minute {
		add("events.timeout", "%s is outside 100ms..5m; the default is 5s", e.Timeout)
	}
	if e.Attempts < 1 || e.Attempts > 100 {
		add("events.attempts", "%d is outside 1..100; the default is 8", e.Attempts)
	}
}
