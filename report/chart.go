package report

import (
	"errors"
	"fmt"
	"html"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"

	"github.com/pxeperf/pxeperf/record"
)

// ErrNoChartData is returned by WindowChart when no completed fetch has a
// window to plot.
var ErrNoChartData = errors.New("nothing to chart: no completed HTTP fetch with a client window matches (TFTP fetches have none; widen the filters)")

// Chart is a drawing, kept as shapes so that the SVG and the PNG show the
// same thing.
type Chart struct {
	W, H   int
	Title  string
	shapes []shape
}

type shapeKind int

const (
	kindLine   shapeKind = iota // a polyline
	kindCircle                  // pts[0], radius in width
	kindText                    // text at pts[0] (baseline)
)

type point struct{ X, Y float64 }

type shape struct {
	kind   shapeKind
	pts    []point
	color  color.RGBA
	width  float64
	class  string // SVG class: "series" marks a data line
	series string // offload state of a data line
	text   string
	size   int    // font size, px
	anchor string // start, middle, end
	rotate bool   // text turned -90°
	bold   bool
}

var (
	black     = color.RGBA{0x22, 0x22, 0x22, 0xff}
	gridGrey  = color.RGBA{0xdd, 0xdd, 0xdd, 0xff}
	axisGrey  = color.RGBA{0x55, 0x55, 0x55, 0xff}
	seriesCol = map[record.Offload]color.RGBA{
		record.OffloadOff:     {0xd6, 0x27, 0x28, 0xff}, // red
		record.OffloadOn:      {0x1f, 0x77, 0xb4, 0xff}, // blue
		record.OffloadUnknown: {0x7f, 0x7f, 0x7f, 0xff}, // grey
	}
)

// windowTick names a window for the x axis: 4K, 64K, 1M.
func windowTick(w float64) string {
	switch {
	case w >= 1<<20:
		return strconv.FormatFloat(w/(1<<20), 'g', 3, 64) + "M"
	case w >= 1<<10:
		return strconv.FormatFloat(w/(1<<10), 'g', 3, 64) + "K"
	}
	return strconv.FormatFloat(w, 'g', 4, 64)
}

// niceStep is a 1, 2 or 5 × 10^k step giving about n ticks up to max.
func niceStep(maxV float64, n int) float64 {
	raw := maxV / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			return m * mag
		}
	}
	return 10 * mag
}

// WindowChart draws median Mbit/s against the window the client advertised
// (log scale, WindowBucket rows), one line per RX offload setting (off, on,
// and unknown when some fetch has it), with axes, ticks, a legend and a
// title: the chart of the gPXE study's table.
func WindowChart(recs []record.Record) (*Chart, error) { return WindowChartWith(recs, Options{}) }

// WindowChartWith is WindowChart counting the kinds o names.
func WindowChartWith(recs []record.Record, o Options) (*Chart, error) {
	sp := newSplitter(o)
	rows, states, _ := windowOffload(recs, newCounter(o, throughputKinds), sp)
	// The auto row has no window to place on the axis.
	rows = slices.DeleteFunc(rows, func(r WindowOffloadRow) bool { return r.Auto })
	if len(rows) == 0 {
		return nil, ErrNoChartData
	}
	c := &Chart{W: 800, H: 500, Title: "Throughput by client window and RX checksum offload"}
	p := newWindowPlot(c, rows)
	p.yGrid()
	p.windowTicks()
	p.axes(windowAxis(recs, newCounter(o, throughputKinds)) + " (bytes, log scale)")
	p.series(rows, states, sp)
	return c, nil
}

// windowPlot is the window chart's frame: the plot area in pixels and its
// scales, the window (log 2) across and Mbit/s up.
type windowPlot struct {
	c                        *Chart
	left, right, top, bottom float64
	lo, hi                   float64 // log2 of the windows at the left and right edges
	step, yMax               float64 // Mbit/s between y ticks, and at the top
}

// newWindowPlot fits the scales to rows: half a power of two beyond the
// smallest and largest window, and round steps up to a little above the
// highest median.
func newWindowPlot(c *Chart, rows []WindowOffloadRow) *windowPlot {
	p := &windowPlot{c: c, left: 80, right: float64(c.W) - 220, top: 60, bottom: float64(c.H) - 70}
	lo, hi := math.Inf(1), math.Inf(-1)
	var peak float64
	for _, r := range rows {
		lo, hi = min(lo, math.Log2(float64(r.Window))), max(hi, math.Log2(float64(r.Window)))
		for _, s := range r.Cells {
			peak = max(peak, s.Median)
		}
	}
	p.lo, p.hi = lo-0.5, hi+0.5
	p.step = niceStep(peak*1.05, 5)
	p.yMax = math.Ceil(peak*1.05/p.step) * p.step
	return p
}

func (p *windowPlot) x(w float64) float64 {
	return p.left + (math.Log2(w)-p.lo)/(p.hi-p.lo)*(p.right-p.left)
}

func (p *windowPlot) y(v float64) float64 { return p.bottom - v/p.yMax*(p.bottom-p.top) }

func (c *Chart) text(at point, s string, size int, anchor string) {
	c.shapes = append(c.shapes, shape{kind: kindText, pts: []point{at}, text: s, size: size, anchor: anchor, color: black})
}

func (c *Chart) line(col color.RGBA, width float64, pts ...point) {
	c.shapes = append(c.shapes, shape{kind: kindLine, pts: pts, color: col, width: width})
}

func (c *Chart) marker(at point, col color.RGBA) {
	c.shapes = append(c.shapes, shape{kind: kindCircle, pts: []point{at}, color: col, width: 4})
}

// yGrid draws the grid lines and the y ticks with their Mbit/s.
func (p *windowPlot) yGrid() {
	for v := 0.0; v <= p.yMax+p.step/2; v += p.step {
		if v > 0 {
			p.c.line(gridGrey, 1, point{p.left, p.y(v)}, point{p.right, p.y(v)})
		}
		p.c.line(axisGrey, 1, point{p.left - 5, p.y(v)}, point{p.left, p.y(v)})
		p.c.text(point{p.left - 8, p.y(v) + 4}, strconv.FormatFloat(v, 'f', -1, 64), 12, "end")
	}
}

// windowTicks draws the x ticks at every power of two in range (every
// other one when crowded).
func (p *windowPlot) windowTicks() {
	every := 1
	if p.hi-p.lo > 12 {
		every = 2
	}
	for e := int(math.Ceil(p.lo)); float64(e) <= p.hi; e++ {
		if e%every != 0 {
			continue
		}
		w := math.Exp2(float64(e))
		p.c.line(axisGrey, 1, point{p.x(w), p.bottom}, point{p.x(w), p.bottom + 5})
		p.c.text(point{p.x(w), p.bottom + 20}, windowTick(w), 12, "middle")
	}
}

// axes draws the axes, the title and the axes' names.
func (p *windowPlot) axes(xName string) {
	c := p.c
	c.line(axisGrey, 1.5, point{p.left, p.top}, point{p.left, p.bottom}, point{p.right, p.bottom})
	c.shapes = append(c.shapes,
		shape{kind: kindText, pts: []point{{float64(c.W) / 2, 32}}, text: c.Title, size: 18, anchor: "middle", color: black, bold: true},
		shape{kind: kindText, pts: []point{{(p.left + p.right) / 2, p.bottom + 48}}, text: xName, size: 13, anchor: "middle", color: black},
		shape{kind: kindText, pts: []point{{26, (p.top + p.bottom) / 2}}, text: "Median Mbit/s", size: 13, anchor: "middle", color: black, rotate: true},
	)
}

// series draws a line per setup and offload setting, with markers on each
// measured window and an entry in the legend; a setup's lines never join
// another's (Options.Merge), and with several setups each is named above
// its entries.
func (p *windowPlot) series(rows []WindowOffloadRow, states []record.Offload, sp splitter) {
	var setups []Setup
	for _, r := range rows {
		if !slices.Contains(setups, r.Setup) {
			setups = append(setups, r.Setup)
		}
	}
	ly := p.top + 10
	for si, st := range setups {
		if len(setups) > 1 {
			p.c.text(point{p.right + 20, ly + 4}, setupName(sp, st), 12, "start")
			ly += 20
		}
		for _, o := range states {
			col := seriesCol[o]
			if si > 0 {
				col = shade(col, si)
			}
			pts, n := p.points(rows, st, o)
			if n == 0 {
				continue
			}
			p.c.shapes = append(p.c.shapes, shape{kind: kindLine, pts: pts, color: col, width: 2.5, class: "series", series: offloadName(o)})
			for _, at := range pts {
				p.c.marker(at, col)
			}
			p.legendEntry(ly, col, fmt.Sprintf("RX csum %s (n=%d)", offloadName(o), n))
			ly += 22
		}
	}
}

// points are the medians of setup st's rows with offload o, placed, and
// the count of fetches behind them.
func (p *windowPlot) points(rows []WindowOffloadRow, st Setup, o record.Offload) (pts []point, n int) {
	for _, r := range rows {
		if s := r.Cells[offloadName(o)]; s != nil && r.Setup == st {
			pts = append(pts, point{p.x(float64(r.Window)), p.y(s.Median)})
			n += s.Count
		}
	}
	return pts, n
}

// legendEntry draws a series' sample line and marker and its label at
// height ly, right of the plot.
func (p *windowPlot) legendEntry(ly float64, col color.RGBA, label string) {
	p.c.line(col, 2.5, point{p.right + 20, ly}, point{p.right + 50, ly})
	p.c.marker(point{p.right + 35, ly}, col)
	p.c.text(point{p.right + 58, ly + 4}, label, 12, "start")
}

// setupName is a Setup in a few words for the chart's legend: its
// cells as text shows them.
func setupName(sp splitter, st Setup) string {
	var parts []string
	cols := sp.columns()
	for i, c := range sp.cells(st) {
		switch {
		case c == "" || cols[i].CSVOnly:
		case cols[i].Key == "mtu":
			parts = append(parts, "MTU "+c)
		default:
			parts = append(parts, c)
		}
	}
	return strings.Join(parts, ", ")
}

// shade darkens col for the i-th setup, so each setup's lines differ.
func shade(col color.RGBA, i int) color.RGBA {
	f := 1 / (1 + 0.45*float64(i))
	return color.RGBA{uint8(float64(col.R) * f), uint8(float64(col.G) * f), uint8(float64(col.B) * f), 0xff}
}

// SVG writes the chart as a standalone SVG document.
func (c *Chart) SVG(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">`+"\n", c.W, c.H, c.W, c.H)
	fmt.Fprintf(&b, "<title>%s</title>\n", html.EscapeString(c.Title))
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", c.W, c.H)
	hex := func(col color.RGBA) string { return fmt.Sprintf("#%02x%02x%02x", col.R, col.G, col.B) }
	for _, s := range c.shapes {
		switch s.kind {
		case kindLine:
			pts := make([]string, len(s.pts))
			for i, p := range s.pts {
				pts[i] = fmt.Sprintf("%.1f,%.1f", p.X, p.Y)
			}
			attrs := ""
			if s.class != "" {
				attrs = fmt.Sprintf(` class="%s" data-offload="%s"`, s.class, html.EscapeString(s.series))
			}
			fmt.Fprintf(&b, `<polyline%s points="%s" fill="none" stroke="%s" stroke-width="%g" stroke-linejoin="round"/>`+"\n",
				attrs, strings.Join(pts, " "), hex(s.color), s.width)
		case kindCircle:
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="%g" fill="%s"/>`+"\n", s.pts[0].X, s.pts[0].Y, s.width, hex(s.color))
		case kindText:
			extra := ""
			if s.rotate {
				extra += fmt.Sprintf(` transform="rotate(-90 %.1f %.1f)"`, s.pts[0].X, s.pts[0].Y)
			}
			if s.bold {
				extra += ` font-weight="bold"`
			}
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="%d" text-anchor="%s" fill="%s"%s>%s</text>`+"\n",
				s.pts[0].X, s.pts[0].Y, s.size, s.anchor, hex(s.color), extra, html.EscapeString(s.text))
		}
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// PNG rasterises the chart: anti-aliased lines and discs, text in the
// 7×13 bitmap face (doubled for the title).
func (c *Chart) PNG(w io.Writer) error {
	img := image.NewRGBA(image.Rect(0, 0, c.W, c.H))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	for _, s := range c.shapes {
		switch s.kind {
		case kindLine:
			for i := 1; i < len(s.pts); i++ {
				stroke(img, s.pts[i-1], s.pts[i], s.width/2, s.color)
			}
		case kindCircle:
			stroke(img, s.pts[0], s.pts[0], s.width, s.color)
		case kindText:
			drawText(img, s)
		}
	}
	return png.Encode(w, img)
}

// stroke paints the points within r of segment a-b, with a one-pixel
// anti-aliased edge.
func stroke(img *image.RGBA, a, b point, r float64, col color.RGBA) {
	x0, x1 := int(math.Floor(min(a.X, b.X)-r-1)), int(math.Ceil(max(a.X, b.X)+r+1))
	y0, y1 := int(math.Floor(min(a.Y, b.Y)-r-1)), int(math.Ceil(max(a.Y, b.Y)+r+1))
	dx, dy := b.X-a.X, b.Y-a.Y
	l2 := dx*dx + dy*dy
	for py := y0; py <= y1; py++ {
		for px := x0; px <= x1; px++ {
			cx, cy := float64(px)+0.5, float64(py)+0.5
			t := 0.0
			if l2 > 0 {
				t = math.Max(0, math.Min(1, ((cx-a.X)*dx+(cy-a.Y)*dy)/l2))
			}
			d := math.Hypot(cx-(a.X+t*dx), cy-(a.Y+t*dy))
			if cov := r + 0.5 - d; cov > 0 {
				blend(img, px, py, col, math.Min(cov, 1))
			}
		}
	}
}

func blend(img *image.RGBA, x, y int, col color.RGBA, a float64) {
	if !(image.Point{x, y}.In(img.Rect)) {
		return
	}
	o := img.RGBAAt(x, y)
	mix := func(f, b uint8) uint8 { return uint8(float64(f)*a + float64(b)*(1-a) + 0.5) }
	img.SetRGBA(x, y, color.RGBA{mix(col.R, o.R), mix(col.G, o.G), mix(col.B, o.B), 0xff})
}

// drawText renders s.text in basicfont into a mask, scales it (size 16 and
// up doubled), turns it when asked, and places it by anchor and baseline.
func drawText(img *image.RGBA, s shape) {
	face := basicfont.Face7x13
	tw := font.MeasureString(face, s.text).Ceil()
	mask := image.NewAlpha(image.Rect(0, 0, tw, 13))
	d := font.Drawer{Dst: mask, Src: image.Opaque, Face: face, Dot: fixed.P(0, face.Ascent)}
	d.DrawString(s.text)
	scale := 1
	if s.size >= 16 {
		scale = 2
	}
	w, h := tw*scale, 13*scale
	// Offset of the text box from its anchor point, before turning.
	ox := 0
	switch s.anchor {
	case "middle":
		ox = -w / 2
	case "end":
		ox = -w
	}
	oy := -face.Ascent * scale
	for ty := 0; ty < h; ty++ {
		for tx := 0; tx < w; tx++ {
			a := mask.AlphaAt(tx/scale, ty/scale).A
			if a == 0 {
				continue
			}
			bx, by := ox+tx, oy+ty
			if s.rotate { // -90°: x' = y, y' = -x
				bx, by = oy+ty, -(ox + tx)
			}
			px, py := int(s.pts[0].X)+bx, int(s.pts[0].Y)+by
			blend(img, px, py, s.color, float64(a)/255)
			if s.bold {
				blend(img, px+1, py, s.color, float64(a)/255)
			}
		}
	}
}

// windowAxis names what the x axis shows, as the rows were grouped: the
// window bench runs were set to, the window served fetches' clients
// advertised, or both.
func windowAxis(recs []record.Record, c *counter) string {
	set, seen := false, false
	for i := range recs {
		r := recs[i]
		if !c.use(&r) || autoWindow(r) {
			continue
		}
		switch {
		case r.WndRequested > 0:
			set = true
		case r.WndMax > 0:
			seen = true
		}
	}
	switch {
	case set && seen:
		return "Client window: set (bench runs) or advertised (served fetches)"
	case set:
		return "Window the client was set to (SO_RCVBUF)"
	}
	return "Window the client advertised"
}
