package dhcp

import (
	"testing"
	"time"
)

func TestInForce(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for name, tc := range map[string]struct {
		proxy        bool
		seen, expiry time.Time
		want         bool
	}{
		"full, expires later":      {false, now.Add(-time.Hour), now.Add(time.Minute), true},
		"full, expired now":        {false, now.Add(-time.Hour), now, false},
		"proxy, seen a day ago":    {true, now.Add(-ProxySightingLife), time.Time{}, true},
		"proxy, seen over a day":   {true, now.Add(-ProxySightingLife - time.Second), time.Time{}, false},
		"proxy, expiry is ignored": {true, now.Add(-time.Minute), now.Add(-time.Hour), true},
	} {
		if got := InForce(tc.proxy, tc.seen, tc.expiry, now); got != tc.want {
			t.Errorf("%s: InForce = %v, want %v", name, got, tc.want)
		}
	}
}
