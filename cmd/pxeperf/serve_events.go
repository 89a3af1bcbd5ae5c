package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/metrics"
	"github.com/pxeperf/pxeperf/notify"
)

// startEvents builds the milestone fan-out (env.events: the record sink,
// the admin event stream, the webhook of events.webhook_url) and starts
// the webhook's sender. The func returned stops it, sending what is
// queued for a few seconds at most. The host store's sinks emit to
// env.events; DHCP's lease events reach it through the event chain.
func startEvents(env *serveEnv, rec *recording) (stop func(), err error) {
	var sinks []event.MilestoneSink
	if rec != nil {
		sinks = append(sinks, rec.sink)
	}
	if env.live != nil {
		sinks = append(sinks, env.live.dash)
	}
	stop = func() {}
	if e := env.cfg.Events; e.WebhookURL != "" {
		token, err := readWebhookToken(e.WebhookTokenFile)
		if err != nil {
			return nil, err
		}
		w, err := notify.NewWebhook(notify.WebhookOptions{URL: e.WebhookURL, Token: token, Queue: e.Queue,
			Timeout: e.Timeout, Attempts: e.Attempts, Logger: env.logger.With("svc", "events")})
		if err != nil {
			return nil, err
		}
		env.webhook = w
		sinks = append(sinks, w)
		stop = func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = w.Close(ctx)
		}
		env.logger.Info("sending milestones to the webhook", "url", e.WebhookURL, "queue", e.Queue)
	}
	env.events = notify.NewFanout(sinks...)
	if env.live != nil {
		if err := registerEventMetrics(env.live.reg, env); err != nil {
			stop()
			return nil, err
		}
	}
	return stop, nil
}

// readWebhookToken reads events.webhook_token_file ("" none).
func readWebhookToken(file string) (string, error) {
	if file == "" {
		return "", nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("events.webhook_token_file: %w (write the receiver's token into it, or unset the key)", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" || strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("events.webhook_token_file %s: want one token on one line", file)
	}
	return tok, nil
}

// registerEventMetrics puts the webhook's counters (when there is one)
// and the event stream's lost milestones on the registry.
func registerEventMetrics(reg *prometheus.Registry, env *serveEnv) error {
	name := func(n string) string { return metrics.Namespace + "_events_" + n }
	cs := []prometheus.Collector{prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name("stream_lost_total"),
		Help: "Milestones an admin event stream reader too slow to take its buffer lost."},
		func() float64 { return float64(env.live.dash.LostMilestones()) })}
	if w := env.webhook; w != nil {
		stat := func(f func(notify.WebhookStats) int64) func() float64 {
			return func() float64 { return float64(f(w.Stats())) }
		}
		counter := func(n, help string, f func(notify.WebhookStats) int64, labels prometheus.Labels) prometheus.Collector {
			return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name(n), Help: help, ConstLabels: labels}, stat(f))
		}
		const dropped = "Milestones the webhook lost, by reason: queue_full (the oldest waiting, dropped), gave_up (after events.attempts, or refused with a 4xx), unsent (queued at shutdown)."
		cs = append(cs,
			counter("webhook_sent_total", "Milestones the webhook receiver took (2xx).", func(s notify.WebhookStats) int64 { return s.Sent }, nil),
			counter("webhook_retries_total", "Webhook POSTs sent again after a failure.", func(s notify.WebhookStats) int64 { return s.Retries }, nil),
			counter("webhook_dropped_total", dropped, func(s notify.WebhookStats) int64 { return s.Dropped }, prometheus.Labels{"reason": "queue_full"}),
			counter("webhook_dropped_total", dropped, func(s notify.WebhookStats) int64 { return s.Failed }, prometheus.Labels{"reason": "gave_up"}),
			counter("webhook_dropped_total", dropped, func(s notify.WebhookStats) int64 { return s.Unsent }, prometheus.Labels{"reason": "unsent"}),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name("webhook_queued"), Help: "Milestones waiting for the webhook."},
				func() float64 { return float64(w.Stats().Queued) }))
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("events metrics: %w", err)
		}
	}
	return nil
}

// eventProblems are what /healthz names of the webhook: milestones lost
// lately, a receiver failing now.
func (env *serveEnv) eventProblems() []string {
	if env.webhook == nil {
		return nil
	}
	return env.webhook.Problems()
}
