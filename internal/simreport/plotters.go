package simreport

import (
	"math"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// gapLine is a line that breaks at NaN. gonum's own plotter.Line
// refuses NaN outright, and here a gap carries meaning (no traffic, no
// data) that bridging it or drawing it as zero would misstate.
type gapLine struct {
	xs, ys []float64 // NaN in ys separates runs
	step   bool      // hold each value until the next sample
	style  draw.LineStyle
}

// newGapLine scales vals for display (seconds to ms, say), turns every
// value the axis cannot show into a gap — non-finite ones always, and
// non-positive ones when positiveOnly because the log axis has no place
// for them — records the shown values in rng, and thins long series.
func newGapLine(vals []float64, stepMin, scale float64, positiveOnly, step bool, style draw.LineStyle, rng *span) *gapLine {
	ys := make([]float64, len(vals))
	for i, v := range vals {
		v *= scale
		if !finite(v) || positiveOnly && v <= 0 {
			ys[i] = math.NaN()
			continue
		}
		ys[i] = v
		rng.add(v)
	}
	xs, ys := thin(ys, stepMin)
	return &gapLine{xs: xs, ys: ys, step: step, style: style}
}

// thin places ys at their times and, beyond maxDrawn points, keeps only
// the lowest and highest value of each bucket (in time order), so spikes
// and dips survive where plain sampling would skip them. A bucket with
// no value at all stays a gap; a gap narrower than a bucket is under a
// pixel wide and is lost.
func thin(ys []float64, stepMin float64) (xs, out []float64) {
	n := len(ys)
	if n <= maxDrawn {
		xs = make([]float64, n)
		for i := range xs {
			xs[i] = float64(i) * stepMin
		}
		return xs, ys
	}
	size := (n + maxBuckets - 1) / maxBuckets
	xs = make([]float64, 0, 2*maxBuckets)
	out = make([]float64, 0, 2*maxBuckets)
	for start := 0; start < n; start += size {
		end := min(start+size, n)
		lo, hi := -1, -1
		for i := start; i < end; i++ {
			if math.IsNaN(ys[i]) {
				continue
			}
			if lo < 0 || ys[i] < ys[lo] {
				lo = i
			}
			if hi < 0 || ys[i] > ys[hi] {
				hi = i
			}
		}
		switch {
		case lo < 0:
			xs, out = append(xs, float64(start)*stepMin), append(out, math.NaN())
		case lo == hi:
			xs, out = append(xs, float64(lo)*stepMin), append(out, ys[lo])
		default:
			a, b := min(lo, hi), max(lo, hi)
			xs, out = append(xs, float64(a)*stepMin, float64(b)*stepMin), append(out, ys[a], ys[b])
		}
	}
	return xs, out
}

func (l *gapLine) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	dot := draw.GlyphStyle{Color: l.style.Color, Radius: l.style.Width, Shape: draw.CircleGlyph{}}
	var run []vg.Point
	flush := func() {
		switch len(run) {
		case 0:
		case 1:
			// A value with gaps on both sides has no neighbour to draw a
			// line to; a dot keeps it from vanishing.
			c.DrawGlyph(dot, run[0])
		default:
			c.StrokeLines(l.style, c.ClipLinesXY(run)...)
		}
		run = run[:0]
	}
	for i, y := range l.ys {
		if math.IsNaN(y) {
			flush()
			continue
		}
		pt := vg.Point{X: trX(l.xs[i]), Y: trY(y)}
		if l.step && len(run) > 0 {
			run = append(run, vg.Point{X: pt.X, Y: run[len(run)-1].Y})
		}
		run = append(run, pt)
	}
	flush()
}

// hline is the p99 target: a dashed line across the panel, labelled at
// its right end so the number is readable without the legend.
type hline struct {
	y     float64
	style draw.LineStyle
	label string
	text  text.Style
}

func (h *hline) Plot(c draw.Canvas, p *plot.Plot) {
	_, trY := p.Transforms(&c)
	y := trY(h.y)
	c.StrokeLine2(h.style, c.Min.X, y, c.Max.X, y)
	sty := h.text
	sty.XAlign = draw.XRight
	sty.YAlign = draw.YBottom
	c.FillText(sty, vg.Point{X: c.Max.X - vg.Points(3), Y: y + vg.Points(2)}, h.label)
}

type markerLayer struct {
	xs, ys []float64
	glyph  draw.GlyphStyle
}

func (m *markerLayer) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	for i := range m.xs {
		c.DrawGlyph(m.glyph, vg.Point{X: trX(m.xs[i]), Y: trY(m.ys[i])})
	}
}

// placeMarkers puts each marker on the main variant's replica line,
// within the time axis [xmin, xmax] (minutes).
//
// Held markers can come every evaluation; drawn one per Step bucket
// (coarser on long runs, so at most maxHeldBuckets) they still show when
// and how long setpoint held, without thousands of overlapping crosses.
// Applied markers are thinned only where they would overlap to within a
// fraction of a pixel, which bounds the figure's size however many
// changes a run makes.
func placeMarkers(w *Workload, n int, xmin, xmax float64) (applied, held *markerLayer) {
	applied = &markerLayer{glyph: draw.GlyphStyle{Color: appliedColor, Radius: vg.Points(4), Shape: draw.PyramidGlyph{}}}
	held = &markerLayer{glyph: draw.GlyphStyle{Color: heldColor, Radius: vg.Points(2.5), Shape: draw.CrossGlyph{}}}
	if len(w.Markers) == 0 {
		return applied, held
	}
	level := replicaLevels(w, n)
	at := func(d time.Duration) float64 {
		if len(level) == 0 {
			return 0
		}
		i := int(d / w.Step)
		return level[min(max(i, 0), len(level)-1)]
	}
	heldBucket := w.Step
	if n > maxHeldBuckets {
		heldBucket *= time.Duration((n + maxHeldBuckets - 1) / maxHeldBuckets)
	}
	appliedWidth := (xmax - xmin) / maxAppliedMarks
	seenHeld := make(map[int64]bool)
	seenApplied := make(map[int64]bool)
	for _, m := range w.Markers {
		layer := applied
		if m.Applied {
			b := min(max(int64(math.Floor((m.At.Minutes()-xmin)/appliedWidth)), 0), maxAppliedMarks-1)
			if seenApplied[b] {
				continue
			}
			seenApplied[b] = true
		} else {
			b := int64(m.At / heldBucket)
			if m.At < 0 && m.At%heldBucket != 0 {
				b-- // floor, so the bucket just before Start is its own
			}
			if seenHeld[b] {
				continue
			}
			seenHeld[b] = true
			layer = held
		}
		layer.xs = append(layer.xs, m.At.Minutes())
		layer.ys = append(layer.ys, at(m.At))
	}
	return applied, held
}

// replicaLevels is the main variant's replica count at each step, with
// gaps filled from the last known value (or, before the first one, the
// first): a marker during a gap is still drawn where the line was.
// Nil when there is no value at all; markers then sit on the axis.
func replicaLevels(w *Workload, n int) []float64 {
	if len(w.Series) == 0 || n == 0 {
		return nil
	}
	src := w.Series[0].Replicas
	level := make([]float64, n)
	first := math.NaN()
	last := math.NaN()
	for i, v := range src {
		if finite(v) {
			last = v
			if math.IsNaN(first) {
				first = v
			}
		}
		level[i] = last
	}
	if math.IsNaN(first) {
		return nil
	}
	for i := 0; i < n && math.IsNaN(level[i]); i++ {
		level[i] = first
	}
	return level
}
