package dhcp

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/pxeperf/pxeperf/configs"
)

// TestListenHint: a bind refused for want of privilege names root and the
// capabilities, not another server; only a port in use guesses at one.
func TestListenHint(t *testing.T) {
	wrap := func(e syscall.Errno) error {
		return fmt.Errorf("bind 0.0.0.0:67: %w", os.NewSyscallError("bind", e))
	}
	for _, tt := range []struct {
		err       error
		mode      string
		want, not string
	}{
		{wrap(syscall.EACCES), configs.ModeProxy, "CAP_NET_BIND_SERVICE", "dnsmasq"},
		{wrap(syscall.EPERM), configs.ModeFull, "CAP_NET_RAW", "another DHCP server"},
		{wrap(syscall.EADDRINUSE), configs.ModeProxy, "dnsmasq", "CAP_"},
		{wrap(syscall.EADDRINUSE), configs.ModeFull, "--dhcp proxy", "CAP_"},
	} {
		h := listenHint(tt.err, tt.mode)
		if !strings.Contains(h, tt.want) || strings.Contains(h, tt.not) {
			t.Errorf("listenHint(%v, %s) = %q; want %q in it and not %q", tt.err, tt.mode, h, tt.want, tt.not)
		}
	}
}
