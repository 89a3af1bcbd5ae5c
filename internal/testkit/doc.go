// Package testkit is the home of the rigs that only tests import: skips
// and bounded waits any test may use (testenv), test networks and the
// built binary (nstest), golden files (golden), a
// service's Serve for the length of a test (servetest), a scratch
// PostgreSQL (pgtest), table checks (tablecheck), a full image cache
// (imagetest) and U-Boot under QEMU (uboot). The product's own helpers
// stay beside it in internal/ (datalock, hwaddr, netif, refuse, threadsock,
// sockopt, httpserve); the benchmark harness is bench/peers.
package testkit
