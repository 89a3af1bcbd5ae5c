package images

import (
	"os"
	"strings"
)

// SignedLoaders are the Secure Boot loaders served from the distribution's
// packages when the root lacks them, by the name firmware and shim ask
// for: Debian's Microsoft-signed shim (package shim-signed), and the
// Debian-signed GRUB network image (grub-efi-amd64-signed) under the name
// shim loads from beside itself. A Secure Boot server refuses unsigned
// iPXE, so this chain is what such a server can boot.
var SignedLoaders = map[string]string{
	"shimx64.efi": "/usr/lib/shim/shimx64.efi.signed",
	"grubx64.efi": "/usr/lib/grub/x86_64-efi-signed/grubnetx64.efi.signed",
}

// SignedPackages names the Debian package that installs each of
// SignedLoaders, for the warnings that say what to install.
var SignedPackages = map[string]string{
	"shimx64.efi": "shim-signed",
	"grubx64.efi": "grub-efi-amd64-signed",
}

// WithSignedLoaders sets the Secure Boot loaders served from the host when
// the root lacks them (default SignedLoaders); nil or empty turns that
// fallback off.
func WithSignedLoaders(m map[string]string) Option { return func(s *Store) { s.signed = m } }

// signedPath is where the host holds signed loader n, or "" when n is not
// a top-level name of s.signed or the file is not there.
func (s *Store) signedPath(n string) string {
	if strings.Contains(n, "/") {
		return "" // only top-level names, as for iPXE: a folder is the user's layout
	}
	p, ok := s.signed[n]
	if !ok {
		return ""
	}
	if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
		return ""
	}
	return p
}

// IsShim reports whether a boot file name is a shim (shimx64.efi,
// shimaa64.efi, ...): firmware with Secure Boot on loads it, and it loads
// grub<arch>.efi from beside itself.
func IsShim(name string) bool {
	base := strings.ToLower(name[strings.LastIndexByte(name, '/')+1:])
	return strings.HasPrefix(base, "shim") && strings.HasSuffix(base, ".efi")
}
