//go:build !linux

package bench

import (
	"context"

	"github.com/pxeperf/pxeperf/netlab"
)

// Run needs a netlab testbed, which exists only on Linux.
func Run(context.Context, Options) ([]Result, error) { return nil, netlab.ErrUnsupported }
