//go:build unix

package pgtest

import (
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"syscall"
)

// serverUser: as root, PostgreSQL's commands run as the postgres user
// (else nobody), who is given dir, since PostgreSQL refuses to run as
// root. It returns what sets a command's user; nil when not root.
func serverUser(dir string) (func(*exec.Cmd), error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	uid, gid := uint32(65534), uint32(65534)
	if u, err := user.Lookup("postgres"); err == nil {
		a, _ := strconv.Atoi(u.Uid)
		b, _ := strconv.Atoi(u.Gid)
		uid, gid = uint32(a), uint32(b)
	}
	if err := os.Chown(dir, int(uid), int(gid)); err != nil {
		return nil, err
	}
	cred := &syscall.Credential{Uid: uid, Gid: gid}
	return func(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred} }, nil
}
