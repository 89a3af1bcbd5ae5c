package bench

import (
	"errors"
	"fmt"
	"strings"
)

// httpProtocol is an HTTP image fetch from pxeperf's httpboot server, swept
// by the client's window (SO_RCVBUF); its drivers are in http_linux.go
// (testbed) and remote.go.
var httpProtocol = protocol{
	inner: func(s Spec) []Point {
		var out []Point
		for _, w := range s.Windows {
			out = append(out, Point{Window: w})
		}
		return out
	},
	innerCount: func(s Spec) int { return len(s.Windows) },
	key: func(p Point) string {
		return fmt.Sprintf("%s mtu=%d rate=%s rx_offload=%s window=%s", p.Proto, p.MTU, FormatRate(p.Rate), onOff(p.Offload), FormatWindow(p.Window))
	},
	validate: func(s Spec) []error {
		if len(s.BlkSizes) > 0 || len(s.WindowSizes) > 0 {
			return []error{errors.New("--blksize and --windowsize apply to --proto tftp")}
		}
		return nil
	},
	// --proto http keeps the rest of the spec; --window is a common flag
	// (streams take it too).
	use: func(s Spec, proto string, _ Flags) (Spec, bool, error) {
		if strings.ToLower(strings.TrimSpace(proto)) != ProtoHTTP {
			return s, false, nil
		}
		s.Proto = ProtoHTTP
		return s, true, nil
	},
}
