package main

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/internal/netif"
)

// checkNetSettings refuses a full-mode pool outside the interface's subnet:
// the clients it hands out would be unable to reach pxeperf; a wrong
// setting (exit status 2). (--addr not on the interface is refused by
// netif.Resolve: an address or interface that may yet come up, status 1.)
func checkNetSettings(cfg *configs.Config, ni *netif.Info) error {
	pool := cfg.DHCP.Pool
	if cfg.DHCP.Mode != configs.ModeFull || !pool.IsValid() {
		return nil
	}
	subnet := ni.Prefix.Masked()
	if !ni.Prefix.IsValid() {
		return fmt.Errorf("dhcp.pool %s: %s has no IPv4 subnet for %s; give the interface an address "+
			"(ip addr add %s/24 dev %s)", pool, ni.Iface.Name, ni.Addr, ni.Addr, ni.Iface.Name)
	}
	if subnet.Contains(pool.First) && subnet.Contains(pool.Last) {
		return nil
	}
	return usageErrorf("dhcp.pool %s (--pool) is outside %s's subnet %s, so its clients could not reach "+
		"pxeperf at %s; use addresses inside it, e.g. --pool %s", pool, ni.Iface.Name, subnet, ni.Addr, poolIn(subnet, ni.Addr))
}

// poolIn suggests a pool inside subnet that leaves out server.
func poolIn(subnet netip.Prefix, server netip.Addr) string {
	a := subnet.Addr().As4()
	switch {
	case subnet.Bits() <= 24:
		a[3] = 100
		b := a
		b[3] = 200
		return netip.AddrFrom4(a).String() + "-" + netip.AddrFrom4(b).String()
	default:
		first := subnet.Addr().Next()
		if first == server {
			first = first.Next()
		}
		last := first
		for n := last.Next(); subnet.Contains(n) && subnet.Contains(n.Next()); n = n.Next() {
			if n != server {
				last = n
			}
		}
		return first.String() + "-" + last.String()
	}
}

// folderFor returns dir as an absolute path after checking that the folder
// above it exists: pxeperf creates a missing root or data folder, never a
// path of them (a typo like /srv/pxeprf/images would otherwise quietly
// grow a new tree).
func folderFor(key, flag, dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", key, dir, err)
	}
	if st, err := os.Stat(abs); err == nil {
		if !st.IsDir() {
			return "", fmt.Errorf("%s %s is a file, not a folder; set %s (%s:) to a folder", key, abs, flag, key)
		}
		return abs, nil
	}
	parent := filepath.Dir(abs)
	st, err := os.Stat(parent)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%s %s: the folder above it, %s, does not exist; create it "+
			"(mkdir -p %s) or set %s (%s:) to a folder that does", key, abs, parent, parent, flag, key)
	}
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", key, abs, err)
	}
	if !st.IsDir() {
		return "", fmt.Errorf("%s %s: %s is a file, not a folder; set %s (%s:) elsewhere", key, abs, parent, flag, key)
	}
	return abs, nil
}

// ensureFolder is folderFor, then creates the folder when missing and
// says so at INFO with its absolute path.
func ensureFolder(key, flag, dir string, logger *slog.Logger) (string, error) {
	abs, err := folderFor(key, flag, dir)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(abs); err == nil {
		return abs, nil
	}
	if err := os.Mkdir(abs, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("creating %s folder %s: %w (set %s to a writable folder)", key, abs, err, flag)
	}
	logger.Info("created the "+key+" folder", key, abs)
	return abs, nil
}

// permHint says how to let pxeperf bind its ports without being root.
const permHint = `binding ports below 1024 (DHCP 67, TFTP 69, HTTP 80) and DHCP's SO_BINDTODEVICE need root
or capabilities: run it with sudo, or give the binary the capabilities once:
  sudo setcap cap_net_bind_service,cap_net_raw,cap_net_admin+ep "$(command -v pxeperf)"
(cap_net_bind_service: ports below 1024; cap_net_raw: DHCP on one interface), or listen
above 1024: --http-addr :8080 --tftp-addr :6969 --dhcp off`

// permError is a bind refused for want of privilege: the socket error and
// the fix, without the service's guess (another server running?).
type permError struct {
	what string
	err  error
}

func (e *permError) Error() string { return e.what + "\n" + permHint }
func (e *permError) Unwrap() error { return e.err }

// bindHint replaces a service's error by permError when the kernel refused
// the bind for want of privilege (EACCES, EPERM); other errors pass.
func bindHint(err error) error {
	if err == nil || !errors.Is(err, fs.ErrPermission) {
		return err
	}
	what := err.Error()
	var op *net.OpError
	if errors.As(err, &op) {
		what = op.Error()
	}
	return &permError{what: what, err: err}
}

// goSourceFolder reports whether dir holds Go files of a module (go.mod
// beside or above it): the default root ./images in a pxeperf checkout.
func goSourceFolder(dir string) bool {
	if m, _ := filepath.Glob(filepath.Join(dir, "*.go")); len(m) == 0 {
		return false
	}
	_, err := os.Stat(filepath.Join(filepath.Dir(dir), "go.mod"))
	return err == nil
}
