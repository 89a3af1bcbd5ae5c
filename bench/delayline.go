package bench

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pxeperf/pxeperf/netlab"
	"github.com/pxeperf/pxeperf/record"
)

// What netlab's delay line delivered at each point: stamped on the record,
// summed up under the sweep's table. A point whose line fell behind ran
// at the busy host's round trip, not 2 x the asked delay, so its row says
// nothing about the model.

// stampDelayLine puts the line's report of a point on its record; nothing
// without frames (netem, no line).
func stampDelayLine(rec *record.Record, rep netlab.DelayReport) {
	if rep.Frames == 0 {
		return
	}
	rec.DelayP50, rec.DelayP99, rec.DelayMax = rep.P50, rep.P99, rep.Max
	rec.DelayFrames, rec.DelayLate, rec.DelayBehind = int64(rep.Frames), int64(rep.Late), rep.Behind()
}

// DelayLineNotes say, under a sweep's table, whether the delay line kept
// up: at every point, or where it fell behind (with what to do about a
// host too busy for the delay asked). None when no record went through
// the line.
func DelayLineNotes(results []Result) []string {
	var measured int
	var behind []Result
	var worstP99, worstMax time.Duration
	for _, r := range results {
		rec := &r.Record
		if rec.DelayFrames == 0 {
			continue
		}
		measured++
		if rec.DelayBehind {
			behind = append(behind, r)
		}
		worstP99, worstMax = max(worstP99, rec.DelayP99-rec.DelayAsked), max(worstMax, rec.DelayMax-rec.DelayAsked)
	}
	if measured == 0 {
		return nil
	}
	us := func(d time.Duration) string { return fmt.Sprintf("%.0f us", float64(d)/1e3) }
	if len(behind) == 0 {
		return []string{fmt.Sprintf("Delay line: kept up at all %d %s: p99 of the delay it added per frame at most %s beyond the one asked (largest %s); "+
			"a frame is late past the asked delay + max(50 us, half of it), a %s falls behind with more than 1%% late.",
			measured, plural(measured, "fetch", "fetches"), us(worstP99), us(worstMax), "fetch")}
	}
	var asked []time.Duration
	var keys []string
	for _, r := range behind {
		if !slices.Contains(asked, r.Record.DelayAsked) {
			asked = append(asked, r.Record.DelayAsked)
		}
		if k := r.Point.Key(); !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(asked)
	list := keys
	if len(list) > 6 {
		list = append(slices.Clone(list[:6]), fmt.Sprintf("and %d more", len(keys)-6))
	}
	worst := slices.MaxFunc(behind, func(a, b Result) int {
		return int((a.Record.DelayP99 - a.Record.DelayAsked) - (b.Record.DelayP99 - b.Record.DelayAsked))
	}).Record
	var names []string
	for _, d := range asked {
		names = append(names, FormatDelay(d))
	}
	return []string{
		fmt.Sprintf("DELAY LINE FELL BEHIND at %d of %d %s (%d of %d points): more than 1%% of their frames were held past the asked delay + max(50 us, half of it); "+
			"worst p99 %s against %s asked (largest %s, %d of %d frames late). Their round trip was partly the busy host's, not 2 x the delay: where one of them misses the model, it measures the host, not the model. Points: %s.",
			len(behind), measured, plural(measured, "fetch", "fetches"), len(keys), countPoints(results), us(worst.DelayP99), us(worst.DelayAsked), us(worst.DelayMax),
			worst.DelayLate, worst.DelayFrames, strings.Join(list, "; ")),
		fmt.Sprintf("This host is too busy for a one-way delay of %s: run the sweep again with fewer jobs beside it, pin the delay line to a core kept free of other work "+
			"(--delay-cpu N, the rest on other cores with taskset), use a larger --delay (e.g. %s: the same stalls matter less against it), or a lower --rate (fewer frames a second to forward).",
			strings.Join(names, ", "), FormatDelay(min(max(4*asked[len(asked)-1], time.Millisecond), MaxDelay))),
	}
}

// ParseCPUs parses --delay-cpu: a comma list of CPU numbers; "" is none
// (the line runs on any CPU).
func ParseCPUs(s string) ([]int, error) {
	var cpus []int
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		c, err := strconv.Atoi(item)
		if err != nil || c < 0 {
			return nil, fmt.Errorf("%q: want CPU numbers as taskset -c takes them, e.g. 1 or 2,3", item)
		}
		if !slices.Contains(cpus, c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// countPoints is the number of distinct points among results.
func countPoints(results []Result) int {
	seen := map[string]bool{}
	for _, r := range results {
		if r.Record.DelayFrames > 0 {
			seen[r.Point.Key()] = true
		}
	}
	return len(seen)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
