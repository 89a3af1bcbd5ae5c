package api

import "github.com/pxeperf/pxeperf/record"

// Compile-time guard: the record store is the Source serve mounts.
var _ Source = (*record.Store)(nil)
