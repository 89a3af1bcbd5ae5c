//go:build linux

package tftp

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/pxeperf/pxeperf/bench/peers"
	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
	"github.com/pxeperf/pxeperf/measure"
)

// TestBenchAdaptive is issue 16's table: pxeperf against atftpd, same run,
// atftp as the client, over veth pairs the test makes:
//
//   - loss: blksize 1468, 8 MiB, unshaped veth, nftables dropping 0, 0.5, 2
//     and 5% of the DATA reaching the client at random, windowsize 4, 16, 64;
//   - overflow: blksize 8192 x windowsize 16 at MTU 9000, 64 MiB (a window
//     overflows atftp's socket buffer);
//   - clean: blksize 1468 x windowsize 16 on a 1 Gbit/s tbf link, 64 MiB.
//
// Each fetch is byte-checked; a fetch not done within PXEPERF_BENCH_CAP
// seconds (default 30) is shown as "dnf". It runs only with PXEPERF_BENCH=1
// and needs atftpd (see requireAtftpd):
//
//	PXEPERF_BENCH=1 go test -run TestBenchAdaptive -v -timeout 90m ./tftp/
//
// PXEPERF_BENCH_RUNS sets the repeats (default 1; the median is shown; the
// servers alternate within each repeat). PXEPERF_BENCH_PEER names another
// pxeperf binary (say main's, for an A/B in the same run) served beside them
// on port 1070; PXEPERF_BENCH_CASES picks cases by name ("loss", "loss2" for
// the 2% x 16 cell alone, "mtu9000", "tbf", comma-separated; default all) and PXEPERF_BENCH_SERVERS the servers
// ("pxeperf,atftpd,peer"; default all).
func TestBenchAdaptive(t *testing.T) {
	requireBench(t, "atftp", "nft")
	atftpd := requireAtftpd(t)
	runs := benchRuns(1)
	peer := peers.Env("PXEPERF_BENCH_PEER")
	servers := []string{"pxeperf", "atftpd"}
	if peer != "" {
		servers = append(servers, "peer")
	}
	servers = slices.DeleteFunc(servers, func(s string) bool { return !peers.Only("PXEPERF_BENCH_SERVERS", s) })
	want := func(name string) bool { return peers.Only("PXEPERF_BENCH_CASES", name) }
	limit := time.Duration(peers.EnvInt("PXEPERF_BENCH_CAP", 30)) * time.Second
	var table strings.Builder
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "case\tloss %%\tblksize\twindowsize\tpxeperf Mbit/s\tatftpd Mbit/s\tratio\tpeer Mbit/s\tpxeperf eff. window min/med/max\tlosses\tresent\ttimeouts\t\n")

	type cell struct {
		name           string
		loss, blk, win int
		mb             int
	}
	run := func(b *adaptBed, c cell) {
		t.Helper()
		b.setLoss(t, c.loss)
		file := fmt.Sprintf("img%d.bin", c.mb)
		if _, err := os.Stat(filepath.Join(b.root, file)); err != nil {
			nstest.RandomFile(t, filepath.Join(b.root, file), c.mb<<20, uint64(c.mb))
		}
		want := nstest.FileSHA256(t, filepath.Join(b.root, file))
		mbps := map[string][]float64{}
		var line string
		for range runs {
			for _, srv := range servers {
				port := map[string]string{"pxeperf": "69", "atftpd": "1069", "peer": "1070"}[srv]
				out := filepath.Join(b.out, file)
				os.Remove(out)
				seen := strings.Count(b.pxe.Out.String(), "msg=fetch")
				start := time.Now()
				_, err := nstest.Output(b.pair.Client, limit, "atftp", "--option", fmt.Sprintf("blksize %d", c.blk),
					"--option", fmt.Sprintf("windowsize %d", c.win), "--option", "tsize 0",
					"-g", "-r", file, "-l", out, b.ip, port)
				secs := time.Since(start).Seconds()
				switch {
				case err != nil && secs >= limit.Seconds()-1:
					mbps[srv] = append(mbps[srv], 0) // did not finish
				case err != nil:
					t.Fatalf("%s %s: atftp: %v", c.name, srv, err)
				default:
					if got := nstest.FileSHA256(t, out); got != want {
						t.Fatalf("%s %s: sha256 %s, want %s", c.name, srv, got, want)
					}
					mbps[srv] = append(mbps[srv], float64(c.mb<<20)*8/secs/1e6)
				}
				if srv == "pxeperf" {
					nstest.WaitFor(5*time.Second, func() bool { return strings.Count(b.pxe.Out.String(), "msg=fetch") > seen })
					lines := regexp.MustCompile(`(?m)^.*msg=fetch .*$`).FindAllString(b.pxe.Out.String(), -1)
					if len(lines) > 0 {
						line = lines[len(lines)-1]
					}
				}
			}
		}
		show := func(v float64) string {
			if v == 0 {
				return fmt.Sprintf("dnf (>%s)", limit)
			}
			return fmt.Sprintf("%.0f", v)
		}
		p, a := measure.Median(mbps["pxeperf"]), measure.Median(mbps["atftpd"]) // 0: not run
		ratio := "-"
		if a > 0 {
			ratio = fmt.Sprintf("%.1fx", p/a)
		} else if p > 0 {
			ratio = "atftpd dnf"
		}
		field := func(k string) string {
			if m := regexp.MustCompile(` ` + k + `=(\S+)`).FindStringSubmatch(line); m != nil {
				return m[1]
			}
			return "?"
		}
		pm := "-"
		if peer != "" {
			pm = show(measure.Median(mbps["peer"]))
		}
		fmt.Fprintf(tw, "%s\t%.1f\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", c.name, float64(c.loss)/10, c.blk, c.win, show(p), show(a), ratio, pm,
			field("eff_window"), field("losses"), field("retransmits"), field("timeouts"))
		t.Logf("%s loss %.1f%% %dx%d: pxeperf %v, atftpd %v, peer %v Mbit/s; %s", c.name, float64(c.loss)/10, c.blk, c.win,
			mbps["pxeperf"], mbps["atftpd"], mbps["peer"], line)
	}

	// Loss in tenths of a percent, so 0.5% fits an int.
	if want("loss") || want("loss2") {
		lossBed := newAdaptBed(t, atftpd, peer, nstest.Options{}, false)
		for _, loss := range []int{0, 5, 20, 50} {
			for _, win := range []int{4, 16, 64} {
				if want("loss") || loss == 20 && win == 16 {
					run(lossBed, cell{name: "loss", loss: loss, blk: 1468, win: win, mb: 8})
				}
			}
		}
		lossBed.setLoss(t, 0)
	}
	if want("mtu9000") {
		run(newAdaptBed(t, atftpd, peer, nstest.Options{MTU: 9000}, false), cell{name: "MTU 9000", blk: 8192, win: 16, mb: 64})
	}
	if want("tbf") {
		run(newAdaptBed(t, atftpd, peer, nstest.Options{}, true), cell{name: "tbf 1gbit", blk: 1468, win: 16, mb: 64})
	}
	tw.Flush()
	t.Logf("issue 16: pxeperf against atftpd, atftp client, median of %d (loss: DATA dropped at random by nftables):\n%s",
		runs, table.String())
}

// adaptBed is a benchBed with pxeperf (:69, logging every fetch), atftpd
// (:1069) and maybe a peer pxeperf (:1070) serving one root in the server
// namespace, and a loss table in the client namespace.
type adaptBed struct {
	*benchBed
	out string
	pxe *nstest.Proc
}

func newAdaptBed(t *testing.T, atftpd, peer string, opt nstest.Options, shaped bool) *adaptBed {
	t.Helper()
	bed := newBenchBed(t, opt, shaped, 0)
	b := &adaptBed{benchBed: bed, out: t.TempDir()}
	mtu := 1500
	if opt.MTU != 0 {
		mtu = opt.MTU
	}
	bed.logLevel, bed.adminAddr = "info", true // the fetch lines give the sender's window
	b.pxe = bed.startPxeperf(t, nstest.Binary(t), "69", "")
	bed.logLevel, bed.adminAddr = "warn", false
	bed.startAtftpd(t, atftpd, "1069", "/dev/null")
	ports := []string{"69", "1069"}
	if peer != "" {
		bed.startPxeperf(t, peer, "1070", "")
		ports = append(ports, "1070")
	}
	for _, port := range ports {
		waitTFTP(t, bed.pair, bed.ip, port, fmt.Sprintf("TFTP server (MTU %d)", mtu))
	}
	nstest.Run(t, bed.pair.Client, "nft", "add", "table", "inet", "loss")
	nstest.Run(t, bed.pair.Client, "nft", "add", "chain", "inet", "loss", "in", "{ type filter hook input priority 0; }")
	return b
}

// setLoss makes the client namespace drop, at random, tenths/10 percent of
// the DATA from the server (0: none).
func (b *adaptBed) setLoss(t *testing.T, tenths int) {
	t.Helper()
	nstest.Run(t, b.pair.Client, "nft", "flush", "chain", "inet", "loss", "in")
	if tenths > 0 {
		nstest.Run(t, b.pair.Client, "nft", "add", "rule", "inet", "loss", "in", "ip", "saddr", b.ip,
			"udp", "sport", "!=", "69", "@th,64,16", "3", "numgen", "random", "mod", "1000", "<", fmt.Sprint(tenths), "counter", "drop")
	}
}
