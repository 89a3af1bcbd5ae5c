package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/event"
	"github.com/pxeperf/pxeperf/hosts"
	"github.com/pxeperf/pxeperf/notify"
	"github.com/pxeperf/pxeperf/record"
)

// TestServeEvents: serve's wiring of the fan-out. A lease event sent into
// the event chain as DHCP sends it, and a milestone sent to env.events as
// the host store sends it, reach a real webhook receiver (with the token
// of events.webhook_token_file) and the record store as kind event; the
// webhook's counters are on the registry and /healthz stays quiet.
func TestServeEvents(t *testing.T) {
	var mu sync.Mutex
	var got []notify.Message
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m notify.Message
		if json.Unmarshal(b, &m) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		got, auth = append(got, m), r.Header.Get("Authorization")
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "hook.token")
	if err := os.WriteFile(tokenFile, []byte("tok123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := configs.Default()
	cfg.Data = dir
	cfg.Events.WebhookURL, cfg.Events.WebhookTokenFile = srv.URL, tokenFile
	logger := slog.New(slog.DiscardHandler)
	live, err := newLiveState(cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	table := hosts.New(nil)
	rec := openRecording(cfg, "lo", table, logger)
	if rec == nil {
		t.Fatal("no recording")
	}
	env := &serveEnv{cfg: cfg, logger: logger, live: live, hosts: table, records: rec.sink}
	stop, err := startEvents(env, rec)
	if err != nil {
		t.Fatal(err)
	}
	sink := event.Multi{eventChain(cfg, logger, live, rec, table, event.Discard{}), env.events}
	mac := net.HardwareAddr{0x52, 0x54, 0, 0x12, 0x34, 0x56}
	sink.Lease(&event.Lease{Time: time.Now(), MAC: mac, Addr: netip.MustParseAddr("10.0.0.9"), Arch: 7, Host: "board7"})
	env.events.Milestone(event.Milestone{MAC: mac, Host: "board7", What: event.MilestoneNextBootSet,
		Detail: map[string]string{"kernel": "vmlinuz"}})
	for range 2000 {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n == 2 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	mu.Lock()
	if len(got) != 2 || got[0].What != event.MilestoneDHCPAck || got[0].Detail["addr"] != "10.0.0.9" ||
		got[1].What != event.MilestoneNextBootSet || auth != "Bearer tok123" {
		t.Errorf("webhook took %+v (auth %q)", got, auth)
	}
	mu.Unlock()
	if n := gathered(t, env, "pxeperf_events_webhook_sent_total"); n != 2 {
		t.Errorf("sent_total %v", n)
	}
	if p, _ := env.recordHealth(); len(p) != 0 {
		t.Errorf("healthz problems %v", p)
	}
	rec.close(logger)
	st, err := record.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	evs, err := st.Query(context.Background(), record.Filter{Kinds: []string{record.KindEvent}, Client: mac.String()})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].File != event.MilestoneDHCPAck || evs[1].Labels["kernel"] != "vmlinuz" {
		t.Errorf("event records %+v", evs)
	}
	if all, _ := st.Query(context.Background(), record.Filter{}); len(all) != 0 {
		t.Errorf("a read without kinds lists %d events", len(all))
	}
}

// gathered is the value of the first series of a registered counter.
func gathered(t *testing.T, env *serveEnv, name string) float64 {
	t.Helper()
	mfs, err := env.live.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
