package record

import "github.com/pxeperf/pxeperf/event"

// Compile-time guard: the record sink is what serve hands the protocols.
var _ event.Sink = (*Sink)(nil)
