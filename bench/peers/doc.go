// Package peers holds the peers benchmark of issue 12: one test,
// TestPeers, that runs pxeperf and the servers a lab would pick instead
// (nginx and Go's http.FileServer for HTTP; atftpd and tftp-hpa's in.tftpd
// for TFTP, fetched by curl, atftp, tftp-hpa and, when asked, U-Boot under
// QEMU, timed on the wire;
// kea-dhcp4 single- and multi-threaded for DHCP) in one alternating run on
// veth pairs and prints the side-by-side table with same-round ratios and
// each row's target. It has no code of its own besides the test: the
// machinery is internal/peerbench (with internal/uboot for the board),
// shared with the per-protocol harnesses (httpboot TestBenchPeers, tftp
// TestBenchWindowsize, dhcp TestVersusKea) and e2e's TestUBoot.
//
//	PXEPERF_BENCH=1 go test -run TestPeers -v -timeout 90m ./bench/peers
//	PXEPERF_BENCH=1 PXEPERF_BENCH_QUICK=1 go test -run TestPeers -v -timeout 30m ./bench/peers
//	PXEPERF_BENCH=1 PXEPERF_BENCH_ONLY=uboot go test -run TestPeers -v -timeout 30m ./bench/peers
package peers
