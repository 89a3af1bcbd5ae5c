//go:build linux

package perfsrv

import (
	"os"
	"strings"
	"testing"
)

func TestCongestionAllowed(t *testing.T) {
	b, err := os.ReadFile(allowedCongestionFile)
	if err != nil {
		t.Skipf("no %s: %v", allowedCongestionFile, err)
	}
	for _, a := range strings.Fields(string(b)) {
		if _, ok := congestionAllowed(a); !ok {
			t.Errorf("%q is in %s but not allowed", a, allowedCongestionFile)
		}
	}
	if allowed, ok := congestionAllowed("no-such-algorithm"); ok {
		t.Errorf("an algorithm outside %v allowed", allowed)
	}
}
