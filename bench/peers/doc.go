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
// Benchmarking lives in two places: bench/ is the product's `pxeperf
// bench` (sweeps on a netlab testbed, records, tables); this package is
// the harness behind the per-package benchmark tests (PXEPERF_BENCH=1),
// their environment knobs (env.go), rate limits (ShapeBoth, through
// netlab's Testbed.SetRate) and peers. Medians are measure.Median's.
//
// TestPeers runs the whole peers table of issue 12 in one alternating run
// on veth pairs and prints it with each row's target:
//
//	PXEPERF_BENCH=1 go test -run TestPeers -v -timeout 90m ./bench/peers
//	PXEPERF_BENCH=1 PXEPERF_BENCH_QUICK=1 go test -run TestPeers -v -timeout 30m ./bench/peers
//	PXEPERF_BENCH=1 PXEPERF_BENCH_ONLY=uboot go test -run TestPeers -v -timeout 30m ./bench/peers
//
// # Knobs
//
// Every benchmark test reads its knobs through env.go (Require, Enabled,
// Quick, Env, EnvInt, Rounds, EnvInts, Only, LogLevel); TestKnobsListed
// fails when a PXEPERF_BENCH* name in the tree is missing here. The
// benchmark tests are: bench/peers TestPeers; tftp TestBenchThroughput,
// TestBenchWindowsize, TestBenchLockstep, TestBenchAdaptive; httpboot
// TestBenchTable, TestBenchPeers; dhcp TestPerfdhcpBench, TestVersusKea; record
// TestRecordingOverhead; cmd/pxeperf TestLiveOverhead; bench/iperf
// TestCrossCheck; netlab TestDelayLineCeiling; hostile TestSoak; e2e
// TestUBoot (longer with it).
//
//	PXEPERF_BENCH=1             run the benchmark tests (each is skipped without it)
//	PXEPERF_BENCH_QUICK=1       TestPeers: smaller files and a coarser DHCP grid
//	PXEPERF_BENCH_ROUNDS=N      interleaved rounds (TestPeers, TestVersusKea, TestBenchPeers,
//	                            TestBenchTable, TestRecordingOverhead, TestLiveOverhead)
//	PXEPERF_BENCH_RUNS=N        the tftp tests' rounds
//	PXEPERF_BENCH_MB=N          file size in MiB (tftp, httpboot, record)
//	PXEPERF_BENCH_MB32=N        TestBenchPeers: file size of each of 32 streams
//	PXEPERF_BENCH_ONLY=a,b      TestPeers: a subset of http,tftp,dhcp,uboot
//	PXEPERF_BENCH_UBOOT=1       TestPeers: add the U-Boot rows to a run of every part
//	PXEPERF_BENCH_HTTP=a,b      TestPeers: a subset of the HTTP cases (tbf/1,tbf/32,veth/1,veth/32)
//	PXEPERF_BENCH_TFTP=words    TestPeers: only the TFTP cases whose names hold the words
//	PXEPERF_BENCH_CASES=a,b     a subset of the cases (TestBenchPeers: veth/1,...; TestBenchAdaptive: loss,loss2,mtu9000,tbf)
//	PXEPERF_BENCH_CLIENTS=a,b   TestBenchLockstep: client/blksize cases (curl/512, atftp/1468, tftp-hpa/512)
//	PXEPERF_BENCH_SERVERS=a,b   only these servers (TestBenchLockstep, TestBenchAdaptive; TestVersusKea: space-separated)
//	PXEPERF_BENCH_ALTBIN=PATH   another pxeperf binary in the same rounds (TestPeers, tftp tests)
//	PXEPERF_BENCH_PEER=PATH     TestBenchAdaptive: another pxeperf binary beside the servers
//	PXEPERF_BENCH_BEFORE=PATH   TestVersusKea: another pxeperf binary
//	PXEPERF_BENCH_LINK=veth|tbf the tftp tests: one link only (veth: unshaped)
//	PXEPERF_BENCH_MTU=N         TestBenchLockstep: the veth MTU (9000 adds blksize 8192)
//	PXEPERF_BENCH_WINDOWS="..." TestBenchWindowsize: the window sizes, space-separated
//	PXEPERF_BENCH_CAP=S         TestBenchAdaptive: seconds before a fetch is "dnf"
//	PXEPERF_BENCH_NET=veth      TestBenchTable: server and client in two namespaces
//	PXEPERF_BENCH_RATES="..."   DHCP offered rates per second (TestPeers, TestPerfdhcpBench, TestVersusKea)
//	PXEPERF_BENCH_PERIOD=S      seconds per perfdhcp run (TestPeers, TestVersusKea)
//	PXEPERF_BENCH_PERF=DIR      perf record every server into DIR (TestBenchPeers, TestVersusKea)
//	PXEPERF_BENCH_PERF_STAT=1   with PXEPERF_BENCH_PERF: perf stat too (TestBenchPeers)
//	PXEPERF_BENCH_PROFILE=DIR   TestBenchPeers: pxeperf's handler in a helper process, CPU-profiled
//	PXEPERF_BENCH_NOSAMPLE=1    with PXEPERF_BENCH_PROFILE: also a row without TCP_INFO sampling
//	PXEPERF_BENCH_AA=1          TestRecordingOverhead: both servers discard (an A/A run)
//	PXEPERF_BENCH_LOG=LEVEL     pxeperf's --log-level in every lab (default warn)
//
// Internal, set by the harness for the helper processes it starts (not to
// be set by hand): PXEPERF_BENCH_HELPER (the kind), PXEPERF_BENCH_HELPER_ADDR,
// PXEPERF_BENCH_HELPER_ROOT, PXEPERF_BENCH_HELPER_PROFILE.
//
// netlab's own TestDelayLineCeiling reads PXEPERF_BENCH itself: this
// package imports netlab, so netlab's tests cannot import it.
package peers
