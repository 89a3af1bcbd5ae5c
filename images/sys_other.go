//go:build !unix

package images

import (
	"errors"
	"os"
)

const openNonblock = 0

func setBlocking(*os.File) {}

// freeBytes is not known here; the minimum free space is not enforced.
func freeBytes(string) (int64, error) { return 0, errors.ErrUnsupported }

// tryLockExclusive: without flock every entry counts as in use, so the
// cache cap refuses instead of evicting.
func tryLockExclusive(*os.File) bool { return false }

func lockShared(*os.File) {}

func unlinked(os.FileInfo) bool { return false }
