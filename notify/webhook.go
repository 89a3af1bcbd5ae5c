package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/pxeperf/pxeperf/event"
)

// WebhookOptions shape a Webhook. Zero values take the defaults.
type WebhookOptions struct {
	// URL receives each milestone as a POST of its Message (JSON).
	URL string
	// Token, when set, is sent as "Authorization: Bearer TOKEN".
	Token string
	// Queue bounds the milestones waiting to be sent (default 1024); past
	// it the oldest waiting is dropped, counted.
	Queue int
	// Timeout bounds one POST (default 5s).
	Timeout time.Duration
	// Attempts is how often one milestone is tried before it is given up,
	// counted (default 8).
	Attempts int
	// Backoff is the wait before the first retry, doubling per attempt up
	// to MaxBackoff, each wait jittered down to half (defaults 500ms, 30s).
	Backoff, MaxBackoff time.Duration
	// Client sends the POSTs; default a client with Timeout.
	Client *http.Client
	Logger *slog.Logger
}

func (o WebhookOptions) withDefaults() WebhookOptions {
	if o.Queue <= 0 {
		o.Queue = 1024
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.Attempts <= 0 {
		o.Attempts = 8
	}
	if o.Backoff <= 0 {
		o.Backoff = 500 * time.Millisecond
	}
	if o.MaxBackoff < o.Backoff {
		o.MaxBackoff = max(30*time.Second, o.Backoff)
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: o.Timeout}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// WebhookStats count what a Webhook did.
type WebhookStats struct {
	Queued  int   `json:"queued"`  // waiting now
	Sent    int64 `json:"sent"`    // answered 2xx
	Retries int64 `json:"retries"` // POSTs sent again after a failure
	// Dropped: the queue was full and the oldest waiting was dropped.
	Dropped int64 `json:"dropped"`
	// Failed: given up after Attempts, or refused for good (a 4xx but
	// 408 and 429).
	Failed int64 `json:"failed"`
	// Unsent: still queued when the webhook was closed.
	Unsent    int64     `json:"unsent"`
	LastError string    `json:"last_error,omitempty"`
	LastDrop  time.Time `json:"last_drop,omitzero"` // Dropped or Failed, last
}

// Webhook POSTs milestones to a URL from one goroutine, in order, each
// retried with exponential backoff and jitter. Milestone only queues:
// it never waits for the network.
type Webhook struct {
	opt WebhookOptions

	mu    sync.Mutex
	queue []item // oldest first, at most opt.Queue
	seq   uint64
	st    WebhookStats
	fails int // consecutive failed POSTs

	wake    chan struct{}
	closing chan struct{}
	done    chan struct{}
	cancel  context.CancelFunc
	ctx     context.Context
	once    sync.Once
}

// item is one queued milestone: its JSON and its number (sent as
// X-Pxeperf-Event, so a receiver can tell a retry from a new event).
type item struct {
	seq  uint64
	body []byte
}

var _ event.MilestoneSink = (*Webhook)(nil)

// NewWebhook starts a webhook sending to opt.URL; Close stops it.
func NewWebhook(opt WebhookOptions) (*Webhook, error) {
	u, err := url.Parse(opt.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("events.webhook_url %q: want an http:// or https:// URL, e.g. https://ci.example/pxeperf-hook", opt.URL)
	}
	w := &Webhook{opt: opt.withDefaults(), wake: make(chan struct{}, 1), closing: make(chan struct{}), done: make(chan struct{})}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	go w.run()
	return w, nil
}

// Milestone queues m. A full queue drops its oldest milestone: the
// newest say where a board is now (see DESIGN.md).
func (w *Webhook) Milestone(m event.Milestone) {
	body := Encode(m)
	w.mu.Lock()
	w.seq++
	if len(w.queue) >= w.opt.Queue {
		w.queue = w.queue[1:]
		w.st.Dropped++
		w.st.LastDrop = time.Now()
	}
	w.queue = append(w.queue, item{seq: w.seq, body: body})
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Stats returns the counters.
func (w *Webhook) Stats() WebhookStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.st
	st.Queued = len(w.queue)
	return st
}

// Problems says what /healthz should name: milestones dropped or given up
// within the last ten minutes, and a receiver failing now.
func (w *Webhook) Problems() []string {
	st := w.Stats()
	w.mu.Lock()
	failing := w.fails > 0
	w.mu.Unlock()
	var p []string
	if !st.LastDrop.IsZero() && time.Since(st.LastDrop) < 10*time.Minute {
		p = append(p, fmt.Sprintf("events webhook %s: milestones lost (%d dropped from a full queue of %d, %d given up after retries), "+
			"the last at %s; the records of kind event keep them all (GET /api/fetches?kind=event); fix the receiver or raise events.queue",
			w.opt.URL, st.Dropped, w.opt.Queue, st.Failed, st.LastDrop.UTC().Format(time.RFC3339)))
	}
	if failing {
		p = append(p, fmt.Sprintf("events webhook %s: failing (%s); retrying with backoff, %d queued", w.opt.URL, st.LastError, st.Queued))
	}
	return p
}

// Close stops the sender once the queue is sent or ctx ends; what is
// still queued then is counted Unsent. Milestones after Close are
// queued and never sent.
func (w *Webhook) Close(ctx context.Context) error {
	w.once.Do(func() { close(w.closing) })
	select {
	case <-w.done:
	case <-ctx.Done():
		w.cancel()
		<-w.done
	}
	w.mu.Lock()
	w.st.Unsent += int64(len(w.queue))
	n := len(w.queue)
	w.queue = nil
	w.mu.Unlock()
	if n > 0 {
		w.opt.Logger.Warn("events webhook: closed with milestones unsent (the records of kind event keep them)", "url", w.opt.URL, "unsent", n)
	}
	return ctx.Err()
}

// run sends the queue, oldest first, until Close.
func (w *Webhook) run() {
	defer close(w.done)
	defer w.cancel()
	for {
		it, ok := w.next()
		if !ok {
			return
		}
		w.deliver(it)
	}
}

// next takes the oldest queued milestone, waiting for one; false once
// closing with an empty queue, or aborted.
func (w *Webhook) next() (item, bool) {
	for {
		if w.ctx.Err() != nil {
			return item{}, false // aborted: what is queued stays, Unsent
		}
		w.mu.Lock()
		if len(w.queue) > 0 {
			it := w.queue[0]
			w.queue = w.queue[1:]
			w.mu.Unlock()
			return it, true
		}
		w.mu.Unlock()
		select {
		case <-w.wake:
		case <-w.closing:
			w.mu.Lock()
			empty := len(w.queue) == 0
			w.mu.Unlock()
			if empty {
				return item{}, false
			}
		case <-w.ctx.Done():
			return item{}, false
		}
	}
}

// deliver POSTs it until it is taken, refused for good or Attempts are
// spent, waiting a jittered, doubling backoff between tries.
func (w *Webhook) deliver(it item) {
	for attempt := 1; ; attempt++ {
		err := w.post(it)
		w.mu.Lock()
		if err == nil {
			w.st.Sent++
			w.fails = 0
			w.mu.Unlock()
			return
		}
		w.fails++
		w.st.LastError = err.Error()
		giveUp := attempt >= w.opt.Attempts || errors.Is(err, errRefused) || w.ctx.Err() != nil
		if giveUp {
			w.st.Failed++
			w.st.LastDrop = time.Now()
		} else {
			w.st.Retries++
		}
		w.mu.Unlock()
		if giveUp {
			w.opt.Logger.Warn("events webhook: milestone given up", "url", w.opt.URL, "event", it.seq, "attempts", attempt, "err", err)
			return
		}
		select {
		case <-time.After(w.backoff(attempt)):
		case <-w.ctx.Done():
		}
	}
}

// backoff is the wait after the attempt-th failure: Backoff doubled per
// attempt, capped at MaxBackoff, then a random part of its upper half
// taken away, so that many servers do not retry in step.
func (w *Webhook) backoff(attempt int) time.Duration {
	d := w.opt.Backoff
	for i := 1; i < attempt && d < w.opt.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, w.opt.MaxBackoff)
	return d/2 + rand.N(d/2+1)
}

// errRefused marks an answer that a retry cannot change (a 4xx but 408
// Request Timeout and 429 Too Many Requests).
var errRefused = errors.New("refused")

// post sends one POST, bounded by Timeout.
func (w *Webhook) post(it item) error {
	ctx, cancel := context.WithTimeout(w.ctx, w.opt.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.opt.URL, bytes.NewReader(it.body))
	if err != nil {
		return fmt.Errorf("%w: %v", errRefused, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "pxeperf-events")
	req.Header.Set("X-Pxeperf-Event", strconv.FormatUint(it.seq, 10))
	if w.opt.Token != "" {
		req.Header.Set("Authorization", "Bearer "+w.opt.Token)
	}
	resp, err := w.opt.Client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		return nil
	case c >= 400 && c < 500 && c != http.StatusRequestTimeout && c != http.StatusTooManyRequests:
		return fmt.Errorf("%w: HTTP %d", errRefused, c)
	default:
		return fmt.Errorf("HTTP %d", c)
	}
}
