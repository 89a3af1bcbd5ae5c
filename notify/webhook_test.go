package notify

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pxeperf/pxeperf/event"
)

var board = net.HardwareAddr{0x52, 0x54, 0, 0x12, 0x34, 0x56}

func milestone(i int) event.Milestone {
	return event.Milestone{Time: time.Unix(1700000000+int64(i), 0), MAC: board, Host: "board7",
		What: event.MilestoneKernelFetched, Detail: map[string]string{"n": strconv.Itoa(i)}}
}

// receiver is a real HTTP server taking webhook POSTs: it answers 503 to
// the first fail requests, then 204, keeping what it took.
type receiver struct {
	mu       sync.Mutex
	fail     int
	requests int
	seqs     []string // X-Pxeperf-Event of every request, in arrival order
	got      []Message
	auth     string
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.requests++
	rc.seqs = append(rc.seqs, r.Header.Get("X-Pxeperf-Event"))
	rc.auth = r.Header.Get("Authorization")
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if rc.requests <= rc.fail {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	var m Message
	if err := json.Unmarshal(b, &m); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	rc.got = append(rc.got, m)
	w.WriteHeader(http.StatusNoContent)
}

func (rc *receiver) taken() []Message {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]Message(nil), rc.got...)
}

// waitUntil polls cond every 5 ms for up to 20 s (a hang guard, not a
// timed assertion).
func waitUntil(cond func() bool) bool {
	for range 4000 {
		if cond() {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return cond()
}

func closeWebhook(t *testing.T, w *Webhook) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = w.Close(ctx)
}

// TestWebhookRetriesInOrder: a receiver failing the first three POSTs gets
// every milestone once it answers, in the order they happened, the first
// one retried under the same event number, with the token.
func TestWebhookRetriesInOrder(t *testing.T) {
	rc := &receiver{fail: 3}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	w, err := NewWebhook(WebhookOptions{URL: srv.URL, Token: "s3cret", Backoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer closeWebhook(t, w)
	var want []Message
	for i := range 5 {
		w.Milestone(milestone(i))
		want = append(want, MessageOf(milestone(i)))
	}
	if !waitUntil(func() bool { return len(rc.taken()) == 5 }) {
		t.Fatalf("receiver took %d of 5 milestones; stats %+v", len(rc.taken()), w.Stats())
	}
	if d := cmp.Diff(want, rc.taken()); d != "" {
		t.Errorf("taken (-want +got):\n%s", d)
	}
	st := w.Stats()
	if st.Retries != 3 || st.Sent != 5 || st.Failed != 0 || st.Dropped != 0 {
		t.Errorf("stats %+v, want 3 retries, 5 sent", st)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if want := []string{"1", "1", "1", "1", "2", "3", "4", "5"}; !cmp.Equal(rc.seqs, want) {
		t.Errorf("event numbers %v, want %v (a retry keeps its number)", rc.seqs, want)
	}
	if rc.auth != "Bearer s3cret" {
		t.Errorf("Authorization %q", rc.auth)
	}
	if p := w.Problems(); len(p) != 0 {
		t.Errorf("problems after recovering: %v", p)
	}
}

// hungReceiver is the URL of a real server that takes each POST and never
// answers, until the test ends.
func hungReceiver(tb testing.TB) string {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	tb.Cleanup(func() { close(release); srv.Close() })
	return srv.URL
}

// TestWebhookNeverBlocks: against a receiver that never answers, queuing
// returns at once every time, the queue stays within its bound, the
// overflow is counted as dropped and /healthz's problems name it.
func TestWebhookNeverBlocks(t *testing.T) {
	url := hungReceiver(t)
	w, err := NewWebhook(WebhookOptions{URL: url, Queue: 4, Timeout: time.Hour, Attempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			w.Milestone(milestone(i))
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Milestone blocked behind a receiver that never answers")
	}
	st := w.Stats()
	// One milestone at most is in flight (taken from the queue, held by
	// the POST that never ends); the queue is full.
	if st.Queued != 4 || st.Dropped < n-5 || st.Queued+int(st.Dropped) > n || st.Sent != 0 {
		t.Errorf("stats %+v: want 4 queued and the rest but one dropped", st)
	}
	p := strings.Join(w.Problems(), "; ")
	if !strings.Contains(p, "dropped from a full queue of 4") || !strings.Contains(p, url) {
		t.Errorf("problems %q do not name the drops and the URL", p)
	}
	// Close gives up on the hung POST when its context ends, and counts
	// the queue left as unsent.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := w.Close(ctx); err == nil {
		t.Error("Close returned nil with a POST hung")
	}
	// Every milestone is accounted for: dropped, given up or unsent.
	if st := w.Stats(); st.Dropped+st.Failed+st.Unsent != n || st.Failed > 1 || st.Unsent < 3 || st.Queued != 0 {
		t.Errorf("after Close: %+v, want the %d milestones counted dropped, failed (at most the hung one) or unsent", st, n)
	}
}

// TestWebhookRefused: a 4xx (not 408/429) is given up at once, counted,
// and later milestones still go.
func TestWebhookRefused(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		c := calls
		mu.Unlock()
		if c == 1 {
			w.WriteHeader(http.StatusForbidden)
		}
	}))
	t.Cleanup(srv.Close)
	w, err := NewWebhook(WebhookOptions{URL: srv.URL, Backoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer closeWebhook(t, w)
	w.Milestone(milestone(0))
	w.Milestone(milestone(1))
	if !waitUntil(func() bool { st := w.Stats(); return st.Sent+st.Failed == 2 }) {
		t.Fatalf("stats %+v", w.Stats())
	}
	if st := w.Stats(); st.Failed != 1 || st.Retries != 0 || st.Sent != 1 || !strings.Contains(st.LastError, "403") {
		t.Errorf("stats %+v, want the 403 given up without a retry", st)
	}
}

func TestWebhookBadURL(t *testing.T) {
	for _, u := range []string{"", "ftp://x/", "http://", "not a url"} {
		if _, err := NewWebhook(WebhookOptions{URL: u}); err == nil || !strings.Contains(err.Error(), "events.webhook_url") {
			t.Errorf("%q: err %v", u, err)
		}
	}
}

// TestBackoff: each wait lies in the upper half of Backoff doubled per
// attempt, capped at MaxBackoff.
func TestBackoff(t *testing.T) {
	w := &Webhook{opt: WebhookOptions{Backoff: 100 * time.Millisecond, MaxBackoff: time.Second}.withDefaults()}
	for attempt, ceil := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond,
		3: 400 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 30: time.Second} {
		for range 50 {
			if d := w.backoff(attempt); d < ceil/2 || d > ceil {
				t.Fatalf("attempt %d: backoff %s outside [%s, %s]", attempt, d, ceil/2, ceil)
			}
		}
	}
}

// BenchmarkMilestoneFullQueue is what a boot pays to queue a milestone
// for a receiver that never answers (the queue full: the drop path).
func BenchmarkMilestoneFullQueue(b *testing.B) {
	w, err := NewWebhook(WebhookOptions{URL: hungReceiver(b), Queue: 1024, Timeout: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		_ = w.Close(ctx)
	}()
	m := milestone(1)
	b.ReportAllocs()
	for b.Loop() {
		w.Milestone(m)
	}
}
