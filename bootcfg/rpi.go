package bootcfg

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// A Raspberry Pi bootloader asks its files under a folder named for it,
// "<serial>/start4.elf" (8 lower-case hex digits) or
// "dc-a6-32-01-36-c2/start4.elf" (its MAC, with dashes), and goes on with
// that prefix for every file once start4.elf came. rpiFallback makes the
// prefix optional: a board whose folder exists is served from it alone (a
// file missing there is missing, so one board's folder never mixes with
// another's files), and a board without one is served the root's files,
// so one set of firmware in the root boots every Pi.

// rpiFallback returns the root name to serve for name, a Pi folder's name
// whose folder is not in dir; ok is false for any other name.
func rpiFallback(dir, name string) (string, bool) {
	prefix, rest, found := strings.Cut(strings.TrimLeft(name, "/"), "/")
	if !found || rest == "" || !isRPiFolder(prefix) {
		return "", false
	}
	if st, err := os.Stat(filepath.Join(dir, prefix)); err == nil && st.IsDir() {
		return "", false
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", false
	}
	return rest, true
}

// isRPiFolder: eight lower-case hex digits (a serial) or a MAC as
// xx-xx-xx-xx-xx-xx in lower-case hex, the two folder names the Pi
// bootloader tries. It is only ever taken for a name missing from the root.
func isRPiFolder(s string) bool {
	switch len(s) {
	case 8:
		return isLowerHex(s)
	case 17:
		for i := 2; i < 17; i += 3 {
			if s[i] != '-' {
				return false
			}
		}
		return isLowerHex(strings.ReplaceAll(s, "-", ""))
	}
	return false
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return s != ""
}
