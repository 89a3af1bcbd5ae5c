package images

import (
	"os"
	"path/filepath"
	"strings"
)

// IPXEBinaries are the iPXE builds served from the fallback folder when the
// root lacks them: the names PXE firmware is usually pointed at.
var IPXEBinaries = []string{"undionly.kpxe", "undionly.kkpxe", "ipxe.efi", "snponly.efi", "ipxe.pxe", "ipxe.lkrn"}

func isIPXEBinary(n string) bool {
	if strings.Contains(n, "/") {
		return false // only top-level names: a folder in the request is the user's layout
	}
	for _, b := range IPXEBinaries {
		if n == b {
			return true
		}
	}
	return false
}

// FallbackPath is where the host holds n when the root lacks it: the
// fallback folder's iPXE binary, or a package's signed Secure Boot loader
// (SignedLoaders); "" when n is neither, the fallback is off or the file
// is not there.
func (s *Store) FallbackPath(n string) string {
	if p := s.signedPath(n); p != "" {
		return p
	}
	if s.fallbackDir == "" || !isIPXEBinary(n) {
		return ""
	}
	p := filepath.Join(s.fallbackDir, n)
	if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
		return ""
	}
	return p
}

// openFallback opens the fallback copy of a top-level iPXE binary, logging
// the first time each name is served from there.
func (s *Store) openFallback(n string) (*os.File, int64, bool) {
	p := s.FallbackPath(n)
	if p == "" {
		return nil, 0, false
	}
	f, size, err := openRegular(hostFS{}, p)
	if err != nil {
		return nil, 0, false
	}
	if _, seen := s.logged.LoadOrStore(n, true); !seen {
		msg := "serving iPXE binary from the fallback folder; put your own build in the root to override"
		if s.signedPath(n) != "" {
			msg = "serving the signed Secure Boot loader from the host's " + SignedPackages[n] + " package; put your own in the root to override"
		}
		s.logger.Info(msg, "file", n, "path", p, "root", s.dir)
	}
	return f, size, true
}
