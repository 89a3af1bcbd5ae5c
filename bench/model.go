package bench

import (
	"fmt"
	"math"
	"time"

	"github.com/pxeperf/pxeperf/measure"
	"github.com/pxeperf/pxeperf/record"
)

// GoodputFactor is the share of a tbf rate left for TCP payload at an MTU:
// tbf counts Ethernet frames without FCS (MTU+14 bytes), of which IP and TCP
// headers with timestamps take 52: 1448/1514 at MTU 1500, 8948/9014 at 9000.
func GoodputFactor(mtu int) float64 {
	if mtu <= 52 {
		return 0
	}
	return float64(mtu-52) / float64(mtu+14)
}

// ModelMbps is the throughput a window-limited TCP flow should reach:
// min(window/RTT, rate x GoodputFactor(mtu)), in Mbit/s. A zero rate is
// unlimited (only the window bounds it); a zero RTT leaves only the rate.
func ModelMbps(window uint32, rtt time.Duration, rateBps int64, mtu int) float64 {
	lim := math.Inf(1)
	if rateBps > 0 {
		lim = float64(rateBps) * GoodputFactor(mtu) / 1e6
	}
	if rtt > 0 {
		lim = min(lim, float64(window)*8/rtt.Seconds()/1e6)
	}
	return lim
}

// FitPoint is one record against the model.
type FitPoint struct {
	ID       int64
	Window   uint32 // the window the client advertised (WndMax)
	RateBps  int64
	MTU      int
	Measured float64 // Mbit/s
	Model    float64 // Mbit/s at Fit.RTT
	Dev      float64 // (Measured-Model)/Model
}

// Fit is how well min(window/RTT, line rate) explains a set of fetches.
type Fit struct {
	// MeasuredRTT is the median of the records' MinRTT (TCP_INFO on the
	// server): the RTT the run measured.
	MeasuredRTT time.Duration
	// RTT is the RTT that minimises the squared relative deviation over
	// the points (a log-spaced search, 1 µs .. 1 s).
	RTT time.Duration
	// Identified is false when every point sits at line rate: then the
	// data only bound the RTT from above (RTT <= RTT field), the window
	// never limited the flow.
	Identified bool
	Points     []FitPoint
	// Worst is the point with the largest |Dev| at RTT; WorstMeasured the
	// largest |Dev| with MeasuredRTT instead.
	Worst         FitPoint
	WorstMeasured float64
	// SubMSS counts fetches left out because the window they advertised
	// was below one MSS: the sender then sends partial segments as window
	// updates come, and the largest window no longer describes the flow.
	SubMSS int
}

// FitModel fits min(window/RTT, rate x goodput factor) to the measured
// fetches that ran under a rate limit (RateLimit) and have a window (WndMax).
// Unlimited fetches are left out: on veth they are bound by CPU, which the
// model does not know; so are fetches whose window was below one MSS
// (counted in SubMSS). With no usable record it returns a zero Fit.
func FitModel(recs []record.Record) Fit {
	var f Fit
	var rtts []float64
	for _, r := range recs {
		if r.Outcome != "ok" || r.Mbps <= 0 || r.WndMax == 0 || r.RateLimit <= 0 || math.IsInf(r.Mbps, 0) || math.IsNaN(r.Mbps) {
			continue
		}
		if r.MSS > 0 && r.WndMax < r.MSS {
			f.SubMSS++
			continue
		}
		f.Points = append(f.Points, FitPoint{ID: r.ID, Window: r.WndMax, RateBps: r.RateLimit, MTU: r.MTU, Measured: r.Mbps})
		if r.MinRTT > 0 {
			rtts = append(rtts, float64(r.MinRTT))
		}
	}
	if len(f.Points) == 0 {
		return f
	}
	if len(rtts) > 0 {
		f.MeasuredRTT = time.Duration(measure.Median(rtts))
	}
	cost := func(rtt time.Duration) float64 {
		var c float64
		for _, p := range f.Points {
			m := ModelMbps(p.Window, rtt, p.RateBps, p.MTU)
			d := (p.Measured - m) / m
			c += d * d
		}
		return c
	}
	// Log-spaced search from 1 µs to 1 s, then a finer one around the best.
	// Where the cost is flat (every point at line rate) the largest RTT of
	// the flat minimum is kept, which is the bound the data give.
	best, bestCost := time.Duration(0), math.Inf(1)
	search := func(lo, hi float64, n int) {
		for i := 0; i <= n; i++ {
			rtt := time.Duration(math.Exp(math.Log(lo) + (math.Log(hi)-math.Log(lo))*float64(i)/float64(n)))
			if c := cost(rtt); c <= bestCost*(1+1e-12) {
				best, bestCost = rtt, c
			}
		}
	}
	search(float64(time.Microsecond), float64(time.Second), 600)
	search(float64(best)/1.05, float64(best)*1.05, 200)
	f.RTT = best
	// Identified: some point is window-limited at the fit, i.e. its
	// window/RTT is below its line rate.
	for i := range f.Points {
		p := &f.Points[i]
		p.Model = ModelMbps(p.Window, f.RTT, p.RateBps, p.MTU)
		p.Dev = (p.Measured - p.Model) / p.Model
		if lim := ModelMbps(p.Window, 0, p.RateBps, p.MTU); p.Model < lim*0.999 {
			f.Identified = true
		}
		if i == 0 || math.Abs(p.Dev) > math.Abs(f.Worst.Dev) {
			f.Worst = *p
		}
		if f.MeasuredRTT > 0 {
			m := ModelMbps(p.Window, f.MeasuredRTT, p.RateBps, p.MTU)
			f.WorstMeasured = max(f.WorstMeasured, math.Abs(p.Measured-m)/m)
		}
	}
	return f
}

// RowFitLine says how many of the summary's rows have their median within
// 10% of the model (a repeat's own spread is in the min-max column): the
// check the gPXE grid with --delay is held to. Rows without a model (no
// rate limit, no window, no completed fetch) are not counted; "" when no
// row has one. Rows whose delay line fell behind are counted apart too:
// they measure the host, not the model.
func RowFitLine(rows []SummaryRow) string {
	n, within, behind, keptWithin := 0, 0, 0, 0
	var worst SummaryRow
	var worstDev float64
	for _, r := range rows {
		if r.Model <= 0 || math.IsInf(r.Model, 0) || r.N == 0 {
			continue
		}
		n++
		dev := (r.Median - r.Model) / r.Model
		ok := math.Abs(dev) <= 0.10
		if ok {
			within++
		}
		if r.LineBehind > 0 {
			behind++
		} else if ok {
			keptWithin++
		}
		if n == 1 || math.Abs(dev) > math.Abs(worstDev) {
			worst, worstDev = r, dev
		}
	}
	if n == 0 {
		return ""
	}
	line := fmt.Sprintf("Row medians against the model: %d of %d within 10%%; worst %+.1f%% (window %s, RX csum %s, %d repeats).",
		within, n, worstDev*100, worst.Window, worst.RxOffload, worst.N)
	if behind > 0 {
		line += fmt.Sprintf(" The delay line fell behind in %d of these rows (Line behind); of the %d where it kept up, %d are within 10%%.",
			behind, n-behind, keptWithin)
	}
	return line
}
