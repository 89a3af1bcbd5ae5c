//go:build linux

package netstate

import (
	"errors"
	"fmt"
	"strings"

	"github.com/safchain/ethtool"
	"golang.org/x/sys/unix"
)

// sysReader holds two sockets opened in the caller's network namespace:
// the library's for ethtool requests and one for SIOCGIFMTU. Interfaces are
// looked up by name in that namespace, whichever thread asks later.
type sysReader struct {
	e  *ethtool.Ethtool
	fd int
}

func newSysReader() (*sysReader, error) {
	e, err := ethtool.NewEthtool()
	if err != nil {
		return nil, fmt.Errorf("opening an ethtool socket: %w", err)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		e.Close()
		return nil, fmt.Errorf("opening a socket for interface ioctls: %w", err)
	}
	return &sysReader{e: e, fd: fd}, nil
}

func (s *sysReader) close() error {
	s.e.Close()
	return unix.Close(s.fd)
}

func (s *sysReader) mtu(iface string) (int, error) {
	ifr, err := unix.NewIfreq(iface)
	if err != nil {
		return 0, err
	}
	if err := unix.IoctlIfreq(s.fd, unix.SIOCGIFMTU, ifr); err != nil {
		return 0, err
	}
	return int(ifr.Uint32()), nil
}

// speedUnknown is SPEED_UNKNOWN (-1) as the kernel's u32.
const speedUnknown = 0xffffffff

func (s *sysReader) read(iface string) (State, error) {
	st := State{Iface: iface}
	var errs []error
	mtu, err := s.mtu(iface)
	if err != nil {
		return st, fmt.Errorf("interface %s: %w", iface, err)
	}
	st.MTU = mtu
	// ETHTOOL_GSET: the kernel answers it for every driver that has link
	// settings; the library's GLINKSETTINGS path prints warnings to stdout.
	// Interfaces without a link speed (lo, bridges) answer EOPNOTSUPP.
	if speed, err := s.e.CmdGet(&ethtool.EthtoolCmd{}, iface); err != nil {
		if !errors.Is(err, unix.EOPNOTSUPP) {
			errs = append(errs, fmt.Errorf("link speed: %w", err))
		}
	} else if speed != 0 && speed != speedUnknown && speed < 1<<31 {
		st.SpeedMbps = int(speed)
	}
	feats, err := s.e.Features(iface)
	if err != nil {
		errs = append(errs, fmt.Errorf("offload features: %w", err))
	} else {
		st.RxCsum = featureState(feats, func(n string) bool { return n == "rx-checksum" })
		st.TxCsum = featureState(feats, func(n string) bool { return strings.HasPrefix(n, "tx-checksum-") })
		// TSO is the plain TCP segmentation of IPv4 and IPv6 (what ethtool
		// -k calls tcp-segmentation-offload for ordinary traffic). The
		// ecn/mangleid/accecn variants are left out: kernel 6.18 keeps
		// tx-tcp-accecn-segmentation on after tx checksum goes off, when
		// no ordinary TCP is segmented by the device any more.
		st.TSO = featureState(feats, func(n string) bool {
			return n == "tx-tcp-segmentation" || n == "tx-tcp6-segmentation"
		})
		st.GSO = featureState(feats, func(n string) bool { return n == "tx-generic-segmentation" })
		st.GRO = featureState(feats, func(n string) bool { return n == "rx-gro" })
	}
	if err := errors.Join(errs...); err != nil {
		return st, fmt.Errorf("interface %s: %w", iface, err)
	}
	return st, nil
}

// featureState is On when a matching feature is active, Off when matching features
// exist and none is, Unknown when the driver has no such feature.
func featureState(feats map[string]bool, match func(string) bool) string {
	state := Unknown
	for n, on := range feats {
		if !match(n) {
			continue
		}
		if on {
			return On
		}
		state = Off
	}
	return state
}

// Kernel is the running kernel's release (uname -r).
func Kernel() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}
