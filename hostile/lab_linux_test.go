//go:build linux

package hostile

import (
	"testing"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
)

// lab is a namespace pair with the real binary serving in its server side.
type lab struct {
	P *nstest.Pair
	S *nstest.Served
}

// newLab makes a pair and starts serve in its server namespace with yaml
// (Pair.Serve: root, data and the pair's interface and address filled in);
// before, when not nil, fills the root first.
func newLab(t *testing.T, opt nstest.Options, yaml string, before func(root string), args ...string) *lab {
	t.Helper()
	p := nstest.NewPair(t, opt)
	return &lab{P: p, S: p.Serve(t, yaml, before, args...)}
}

// yamlSection is a config section: name, then each line ("key: value")
// indented under it.
func yamlSection(name string, lines ...string) string {
	s := name + ":\n"
	for _, l := range lines {
		s += "  " + l + "\n"
	}
	return s
}
