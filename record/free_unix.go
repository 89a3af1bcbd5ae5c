//go:build unix

package record

import "golang.org/x/sys/unix"

// dataFree is the space left to an unprivileged writer on the filesystem
// of dir (ok false when it cannot be told).
func dataFree(dir string) (free int64, ok bool) {
	var fs unix.Statfs_t
	if unix.Statfs(dir, &fs) != nil {
		return 0, false
	}
	return int64(fs.Bavail) * int64(fs.Bsize), true
}
