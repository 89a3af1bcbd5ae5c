//go:build linux

package netstate

import (
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"github.com/safchain/ethtool"
	"golang.org/x/sys/unix"
)

// sysReader holds two sockets opened in the caller's network namespace:
// the library's for ethtool requests and one for SIOCGIFMTU and
// ETHTOOL_GFEATURES. Interfaces are looked up by name in that namespace,
// whichever thread asks later.
type sysReader struct {
	e     *ethtool.Ethtool
	fd    int
	feats *featureBits // built at the first read; the caller (Reader) serialises reads
}

// featureBits is where the features State reports sit in the kernel's
// feature strings (ETH_SS_FEATURES). The set is the kernel's own, the same
// for every interface, so it is read once: the library's Features reads it
// again at every call, into a zeroed 1 MiB buffer (MAX_GSTRINGS x 32
// bytes), too costly for a read per transfer (see
// netstate/DESIGN.md#feature-strings-read-once). Each read is one
// ETHTOOL_GFEATURES.
type featureBits struct {
	n                     int // strings in the set
	rx, tx, tso, gso, gro []uint
}

func newFeatureBits(names map[string]uint) *featureBits {
	fb := &featureBits{n: len(names)}
	for n, i := range names {
		switch {
		case n == "rx-checksum":
			fb.rx = append(fb.rx, i)
		case strings.HasPrefix(n, "tx-checksum-"):
			fb.tx = append(fb.tx, i)
		// TSO is the plain TCP segmentation of IPv4 and IPv6 (what ethtool
		// -k calls tcp-segmentation-offload for ordinary traffic). The
		// ecn/mangleid/accecn variants are left out: kernel 6.18 keeps
		// tx-tcp-accecn-segmentation on after tx checksum goes off, when
		// no ordinary TCP is segmented by the device any more.
		case n == "tx-tcp-segmentation" || n == "tx-tcp6-segmentation":
			fb.tso = append(fb.tso, i)
		case n == "tx-generic-segmentation":
			fb.gso = append(fb.gso, i)
		case n == "rx-gro":
			fb.gro = append(fb.gro, i)
		}
	}
	return fb
}

// maxFeatureBlocks bounds the feature bits read: 32 a block.
const maxFeatureBlocks = 16

// gfeatures is struct ethtool_gfeatures with room for maxFeatureBlocks.
type gfeatures struct {
	cmd, size uint32
	blocks    [maxFeatureBlocks]struct{ available, requested, active, neverChanged uint32 }
}

// ifreqData is struct ifreq with its union's data pointer.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24 - unsafe.Sizeof(uintptr(0))]byte
}

// active reads iface's active feature bits (ETHTOOL_GFEATURES).
func (s *sysReader) active(iface string, n int) (*gfeatures, error) {
	blocks := (n + 31) / 32
	if blocks > maxFeatureBlocks {
		return nil, fmt.Errorf("the kernel has %d feature strings, more than the %d this build reads", n, maxFeatureBlocks*32)
	}
	g := &gfeatures{cmd: unix.ETHTOOL_GFEATURES, size: uint32(blocks)}
	var ifr ifreqData
	if len(iface) >= len(ifr.name) {
		return nil, fmt.Errorf("interface name %q is too long", iface)
	}
	copy(ifr.name[:], iface)
	ifr.data = unsafe.Pointer(g)
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(s.fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr))); errno != 0 {
		return nil, errno
	}
	return g, nil
}

// state is On when a feature at one of idx is active, Off when there are
// such features and none is, Unknown when the kernel has none.
func (g *gfeatures) state(idx []uint) string {
	if len(idx) == 0 {
		return Unknown
	}
	for _, i := range idx {
		if g.blocks[i/32].active&(1<<(i%32)) != 0 {
			return On
		}
	}
	return Off
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
	// ETHTOOL_GDRVINFO: the driver says whether the speed is a line rate
	// (NominalSpeed); lo and others without ethtool support answer
	// EOPNOTSUPP.
	if d, err := s.e.DriverName(iface); err == nil {
		st.Driver = d
	} else if !errors.Is(err, unix.EOPNOTSUPP) {
		errs = append(errs, fmt.Errorf("driver: %w", err))
	}
	if s.feats == nil {
		if names, err := s.e.FeatureNames(iface); err == nil {
			s.feats = newFeatureBits(names)
		} else {
			errs = append(errs, fmt.Errorf("offload feature names: %w", err))
		}
	}
	if s.feats != nil {
		if g, err := s.active(iface, s.feats.n); err != nil {
			errs = append(errs, fmt.Errorf("offload features: %w", err))
		} else {
			st.RxCsum, st.TxCsum, st.TSO = g.state(s.feats.rx), g.state(s.feats.tx), g.state(s.feats.tso)
			st.GSO, st.GRO = g.state(s.feats.gso), g.state(s.feats.gro)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return st, fmt.Errorf("interface %s: %w", iface, err)
	}
	return st, nil
}

// Kernel is the running kernel's release (uname -r).
func Kernel() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}
