//go:build !unix

package pgtest

import "os/exec"

// serverUser: there is no root to leave off Unix (syscall.Credential is
// Unix only), so PostgreSQL's commands run as the test's own user.
func serverUser(string) (func(*exec.Cmd), error) { return nil, nil }
