package tftp_test

import (
	"bytes"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/pxeperf/pxeperf/tftp"
)

// TestClientFaults: the client's fault hooks lose, reorder and duplicate
// DATA and duplicate or reorder ACKs, and pxeperf's server still delivers
// every byte in order (RFC 7440 recovery; no Sorcerer's Apprentice).
func TestClientFaults(t *testing.T) {
	srv := startServer(t, tftp.Config{})
	const size = 700_000
	want := sha256.Sum256(srv.file(t, "f.img", size))
	every := func(k int, f tftp.Fault) func(int, int64) tftp.Fault {
		seen := map[int64]bool{}
		return func(n int, seq int64) tftp.Fault {
			if seq%int64(k) == 0 && !seen[seq] { // once per block, or it never arrives
				seen[seq] = true
				return f
			}
			return tftp.Deliver
		}
	}
	tests := map[string]struct {
		opt      tftp.ClientOptions
		wantDups bool
		wantOOO  bool
	}{
		"every 7th lost, window 16":   {opt: tftp.ClientOptions{WindowSize: 16, Fault: every(7, tftp.Drop)}, wantOOO: true},
		"every 5th held back":         {opt: tftp.ClientOptions{WindowSize: 16, Fault: every(5, tftp.Hold)}, wantOOO: true},
		"every 3rd twice":             {opt: tftp.ClientOptions{WindowSize: 8, Fault: every(3, tftp.Twice)}, wantDups: true},
		"lock-step, every 150th lost": {opt: tftp.ClientOptions{WindowSize: 1, Fault: every(150, tftp.Drop)}},
		"duplicate ACKs":              {opt: tftp.ClientOptions{WindowSize: 16, DupACK: true}},
		"stale ACKs after each ACK":   {opt: tftp.ClientOptions{WindowSize: 16, StaleACK: true}},
		"no faults, for the baseline": {opt: tftp.ClientOptions{WindowSize: 16}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tc.opt.BlkSize, tc.opt.Timeout, tc.opt.Retries = 1468, 100*time.Millisecond, 50 // the server resends on its own timeout
			h := sha256.New()
			st, err := tftp.Get(ctxT(t), udp(t), srv.addr, "f.img", h, tc.opt)
			if err != nil {
				t.Fatalf("Get: %v (stats %+v)", err, st)
			}
			if got := h.Sum(nil); !bytes.Equal(got, want[:]) || st.Bytes != size {
				t.Fatalf("content differs or short: %+v", st)
			}
			if tc.wantDups && st.Duplicates == 0 {
				t.Errorf("no duplicates counted: %+v", st)
			}
			if tc.wantOOO && st.OutOfOrder == 0 {
				t.Errorf("no out-of-order blocks counted: %+v", st)
			}
		})
	}
}
