package netlab

import (
	"fmt"
	"strconv"
	"strings"
)

// nsName is the namespace name of side s of testbed n made by process pid.
func nsName(pid, n int, s Side) string {
	return fmt.Sprintf("%s%d-%d-%s", Prefix, pid, n, s)
}

// parseName returns the creating pid of a netlab namespace name, and false
// for any name netlab did not make.
func parseName(name string) (pid int, ok bool) {
	rest, found := strings.CutPrefix(name, Prefix)
	if !found {
		return 0, false
	}
	parts := strings.Split(rest, "-")
	if len(parts) != 3 || (parts[2] != Server.String() && parts[2] != Client.String()) {
		return 0, false
	}
	pid, err := strconv.Atoi(parts[0])
	if err != nil || pid <= 0 || parts[0] != strconv.Itoa(pid) {
		return 0, false
	}
	if n, err := strconv.Atoi(parts[1]); err != nil || n < 0 || parts[1] != strconv.Itoa(n) {
		return 0, false
	}
	return pid, true
}
