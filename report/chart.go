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
	left, right, top, bottom := 80.0, float64(c.W)-220, 60.0, float64(c.H)-70

	var setups []Setup
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range rows {
		if !slices.Contains(setups, r.Setup) {
			setups = append(setups, r.Setup)
		}
		lo, hi = min(lo, math.Log2(float64(r.Window))), max(hi, math.Log2(float64(r.Window)))
	}
	lo, hi = lo-0.5, hi+0.5
	x := func(w float64) float64 { return left + (math.Log2(w)-lo)/(hi-lo)*(right-left) }
	var peak float64
	for _, r := range rows {
		for _, s := range r.Cells {
			peak = max(peak, s.Median)
		}
	}
	step := niceStep(peak*1.05, 5)
	yMax := math.Ceil(peak*1.05/step) * step
	y := func(v float64) float64 { return bottom - v/yMax*(bottom-top) }

	text := func(p point, s string, size int, anchor string) {
		c.shapes = append(c.shapes, shape{kind: kindText, pts: []point{p}, text: s, size: size, anchor: anchor, color: black})
	}
	line := func(col color.RGBA, w float64, pts ...point) {
		c.shapes = append(c.shapes, shape{kind: kindLine, pts: pts, color: col, width: w})
	}

	// Grid and y ticks.
	for v := 0.0; v <= yMax+step/2; v += step {
		if v > 0 {
			line(gridGrey, 1, point{left, y(v)}, point{right, y(v)})
		}
		line(axisGrey, 1, point{left - 5, y(v)}, point{left, y(v)})
		text(point{left - 8, y(v) + 4}, strconv.FormatFloat(v, 'f', -1, 64), 12, "end")
	}
	// X ticks at every power of two in range (every other one when crowded).
	every := 1
	if hi-lo > 12 {
		every = 2
	}
	for e := int(math.Ceil(lo)); float64(e) <= hi; e++ {
		if e%every != 0 {
			continue
		}
		w := math.Exp2(float64(e))
		line(axisGrey, 1, point{x(w), bottom}, point{x(w), bottom + 5})
		text(point{x(w), bottom + 20}, windowTick(w), 12, "middle")
	}
	// Axes.
	line(axisGrey, 1.5, point{left, top}, point{left, bottom}, point{right, bottom})
	c.shapes = append(c.shapes,
		shape{kind: kindText, pts: []point{{float64(c.W) / 2, 32}}, text: c.Title, size: 18, anchor: "middle", color: black, bold: true},
		shape{kind: kindText, pts: []point{{(left + right) / 2, bottom + 48}}, text: windowAxis(recs, newCounter(o, throughputKinds)) + " (bytes, log scale)", size: 13, anchor: "middle", color: black},
		shape{kind: kindText, pts: []point{{26, (top + bottom) / 2}}, text: "Median Mbit/s", size: 13, anchor: "middle", color: black, rotate: true},
	)

	// One line per setup and offload setting, markers on each measured
	// window; a setup's lines never join another's (Options.Merge).
	ly := top + 10
	for si, st := range setups {
		if len(setups) > 1 {
			text(point{right + 20, ly + 4}, setupName(sp, st), 12, "start")
			ly += 20
		}
		for _, o := range states {
			col := seriesCol[o]
			if si > 0 {
				col = shade(col, si)
			}
			var pts []point
			n := 0
			for _, r := range rows {
				if s := r.Cells[offloadName(o)]; s != nil && r.Setup == st {
					pts = append(pts, point{x(float64(r.Window)), y(s.Median)})
					n += s.Count
				}
			}
			if n == 0 {
				continue
			}
			c.shapes = append(c.shapes, shape{kind: kindLine, pts: pts, color: col, width: 2.5, class: "series", series: offloadName(o)})
			for _, p := range pts {
				c.shapes = append(c.shapes, shape{kind: kindCircle, pts: []point{p}, color: col, width: 4})
			}
			// Legend entry.
			line(col, 2.5, point{right + 20, ly}, point{right + 50, ly})
			c.shapes = append(c.shapes, shape{kind: kindCircle, pts: []point{{right + 35, ly}}, color: col, width: 4})
			text(point{right + 58, ly + 4}, fmt.Sprintf("RX csum %s (n=%d)", offloadName(o), n), 12, "start")
			ly += 22
		}
	}
	return c, nil
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
