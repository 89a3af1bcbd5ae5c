// Package peers is the benchmark harness shared by every side-by-side
// run: the peers a lab would pick instead of pxeperf (nginx and Go's
// http.FileServer for HTTP; atftpd and tftp-hpa's in.tftpd for TFTP;
// kea-dhcp4 single- and multi-threaded for DHCP), each started in a test
// namespace (internal/testkit/nstest) under a CPU meter of its own, the
// clients that load them (Go HTTP, curl, atftp, tftp-hpa, U-Boot under QEMU
// through internal/testkit/uboot, perfdhcp), strace counts and same-round
// ratios. It holds no protocol code and imports none of pxeperf's protocol
// packages, so their own benchmarks (httpboot TestBenchPeers, tftp
// TestBenchWindowsize, dhcp TestVersusKea, e2e TestUBoot) import it.
//
// TestPeers runs the whole peers table of issue 12 in one alternating run
// on veth pairs and prints it with each row's target:
//
//	PXEPERF_BENCH=1 go test -run TestPeers -v -timeout 90m ./bench/peers
//	PXEPERF_BENCH=1 PXEPERF_BENCH_QUICK=1 go test -run TestPeers -v -timeout 30m ./bench/peers
//	PXEPERF_BENCH=1 PXEPERF_BENCH_ONLY=uboot go test -run TestPeers -v -timeout 30m ./bench/peers
package peers
