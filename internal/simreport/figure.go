package simreport

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"

	xfont "golang.org/x/image/font"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

const (
	figWidth  = 10 * vg.Inch
	figHeight = 9 * vg.Inch
	// pngDPI gives a 1000×900 image: sharp enough to read tick labels,
	// and a few hundred kilobytes at most for line art.
	pngDPI = 100

	// maxDrawn bounds the vertices per drawn line. The data area is
	// under a thousand pixels wide, so more points add file size and
	// drawing time but nothing visible.
	maxDrawn   = 2000
	maxBuckets = maxDrawn / 2

	// maxHeldBuckets and maxAppliedMarks bound the markers for the same
	// reason.
	maxHeldBuckets  = 1000
	maxAppliedMarks = 2000

	maxLegendLabel = 60
	maxTitle       = 90
)

var (
	sansFont = font.Font{Typeface: "Liberation", Variant: "Sans"}
	boldFont = font.Font{Typeface: "Liberation", Variant: "Sans", Weight: xfont.WeightBold}

	// palette is chosen for contrast on white and between neighbours;
	// variants beyond its length reuse it with a dash pattern.
	palette = []color.RGBA{
		{0x1b, 0x5e, 0xc4, 0xff}, // blue: the main variant
		{0xe6, 0x7e, 0x00, 0xff}, // orange
		{0x2e, 0x9e, 0x4f, 0xff}, // green
		{0xc8, 0x2a, 0x6b, 0xff}, // crimson
		{0x7b, 0x4f, 0xc9, 0xff}, // violet
		{0x8c, 0x5a, 0x2b, 0xff}, // brown
		{0x00, 0x9e, 0xa8, 0xff}, // teal
		{0x9a, 0x9a, 0x00, 0xff}, // olive
		{0xe0, 0x6f, 0xb4, 0xff}, // pink
		{0x55, 0x55, 0x55, 0xff}, // dark grey
	}
	targetColor  = color.RGBA{0x10, 0x10, 0x10, 0xff}
	appliedColor = color.RGBA{0xcc, 0x22, 0x22, 0xff}
	heldColor    = color.RGBA{0x99, 0x99, 0x99, 0xff}
	gridColor    = color.RGBA{0xe4, 0xe4, 0xe4, 0xff}
)

func textStyle(f font.Font, size vg.Length) text.Style {
	return text.Style{
		Color:   color.Black,
		Font:    font.From(f, size),
		Handler: plot.DefaultTextHandler,
	}
}

// render draws w once per output format. gonum/plot reports some bad
// states (such as a non-positive value on a log axis) by panicking; a
// report is a by-product of a simulation and must not take it down, so
// a panic becomes an error.
func render(w *Workload) (svgData, pngData []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("drawing figure: %v", p)
		}
	}()
	fig := buildFigure(w)

	sc := vgsvg.New(figWidth, figHeight)
	fig.draw(draw.New(sc))
	var sb bytes.Buffer
	if _, err := sc.WriteTo(&sb); err != nil {
		return nil, nil, fmt.Errorf("encoding SVG: %w", err)
	}

	ic := vgimg.NewWith(vgimg.UseWH(figWidth, figHeight), vgimg.UseDPI(pngDPI))
	fig.draw(draw.New(ic))
	var pb bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: ic}).WriteTo(&pb); err != nil {
		return nil, nil, fmt.Errorf("encoding PNG: %w", err)
	}
	return sb.Bytes(), pb.Bytes(), nil
}

type legendItem struct {
	label string
	line  *draw.LineStyle
	glyph *draw.GlyphStyle
}

type figure struct {
	title, subtitle string
	legend          []legendItem
	panels          [3]*plot.Plot
}

func variantStyle(i int) draw.LineStyle {
	st := draw.LineStyle{Color: palette[i%len(palette)], Width: vg.Points(1.1)}
	if i == 0 {
		st.Width = vg.Points(1.8)
	}
	if i >= len(palette) {
		st.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
	}
	return st
}

func buildFigure(w *Workload) *figure {
	f := &figure{title: clean(w.Name, maxTitle)}
	n := 0
	if len(w.Series) > 0 {
		n = len(w.Series[0].Replicas)
	}
	stepMin := w.Step.Minutes()

	var sub []string
	if !w.Start.IsZero() {
		sub = append(sub, "start "+w.Start.UTC().Format("2006-01-02 15:04:05 UTC"))
	}
	if w.Step > 0 {
		sub = append(sub, "step "+w.Step.String())
	}
	f.subtitle = strings.Join(sub, ", ")

	// The time axis is shared, so its range is fixed up front from the
	// samples and every marker rather than left to each panel.
	xmin, xmax := 0.0, float64(max(n-1, 0))*stepMin
	for _, m := range w.Markers {
		x := m.At.Minutes()
		xmin, xmax = math.Min(xmin, x), math.Max(xmax, x)
	}
	if xmax <= xmin {
		xmax = xmin + 1
	}

	rep := newPanel("replicas", xmin, xmax)
	rps := newPanel("requests/s", xmin, xmax)
	lat := newPanel("p99 (ms)", xmin, xmax)
	f.panels = [3]*plot.Plot{rep, rps, lat}

	for i, s := range w.Series {
		f.legend = append(f.legend, legendItem{label: clean(s.Variant, maxLegendLabel), line: ptr(variantStyle(i))})
	}
	exact := variantStyle(0)
	exact.Width = vg.Points(1)
	exact.Dashes = []vg.Length{vg.Points(1.5), vg.Points(2)}
	if len(w.Series) > 0 && w.Series[0].P99Exact != nil {
		f.legend = append(f.legend, legendItem{label: clean(w.Series[0].Variant, maxLegendLabel) + " exact p99", line: &exact})
	}

	// The main variant is drawn last so it stays on top where lines
	// overlap, which they do whenever a baseline behaves the same.
	repRange, rpsRange, latRange := newSpan(), newSpan(), newSpan()
	for k := range w.Series {
		i := (k + 1) % len(w.Series)
		s := &w.Series[i]
		st := variantStyle(i)
		rep.Add(newGapLine(s.Replicas, stepMin, 1, false, true, st, repRange))
		rps.Add(newGapLine(s.RPS, stepMin, 1, false, false, st, rpsRange))
		lat.Add(newGapLine(s.P99, stepMin, 1000, true, false, st, latRange))
		if i == 0 && s.P99Exact != nil {
			lat.Add(newGapLine(s.P99Exact, stepMin, 1000, true, false, exact, latRange))
		}
	}

	if w.Target > 0 {
		ms := float64(w.Target) / float64(time.Millisecond)
		latRange.add(ms)
		st := draw.LineStyle{Color: targetColor, Width: vg.Points(1.2), Dashes: []vg.Length{vg.Points(5), vg.Points(4)}}
		label := "target " + w.Target.String()
		lat.Add(&hline{y: ms, style: st, label: label, text: textStyle(sansFont, 9)})
		f.legend = append(f.legend, legendItem{label: "p99 " + label, line: &st})
	}

	// Held crosses go under the applied triangles: held decisions are
	// context, applied ones are the story.
	applied, held := placeMarkers(w, n, xmin, xmax)
	if len(held.xs) > 0 {
		rep.Add(held)
		f.legend = append(f.legend, legendItem{label: "held", glyph: &held.glyph})
	}
	if len(applied.xs) > 0 {
		rep.Add(applied)
		f.legend = append(f.legend, legendItem{label: "applied", glyph: &applied.glyph})
	}

	// plot.Add widens axes only for plotters that report a data range,
	// and none of these do, so the ranges set here are the ones drawn.
	setLinearY(rep, repRange)
	setLinearY(rps, rpsRange)
	setLatencyY(lat, latRange)
	hideXLabels(rep)
	hideXLabels(rps)
	lat.X.Label.Text = "minutes from start"
	return f
}

func ptr[T any](v T) *T { return &v }

func newPanel(ylabel string, xmin, xmax float64) *plot.Plot {
	p := plot.New()
	p.X.Min, p.X.Max = xmin, xmax
	p.Y.Label.Text = ylabel
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = font.From(sansFont, 10)
		a.Tick.Label.Font = font.From(sansFont, 9)
		a.Tick.Length = vg.Points(5)
		a.Padding = vg.Points(2)
	}
	p.X.Tick.Marker = minuteTicks{labels: true}
	p.Add(grid{})
	return p
}

// hideXLabels keeps the tick marks, which line up with the panel below,
// but drops their numbers: one labelled time axis is enough.
func hideXLabels(p *plot.Plot) {
	p.X.Tick.Marker = minuteTicks{}
}

// minuteTicks puts the time axis's major ticks at whole clock intervals
// (10 minutes, an hour, six hours...) rather than at gonum's 1-2-5
// steps, which on a day-long run land on minute 400 and 800.
type minuteTicks struct{ labels bool }

var minuteSteps = []float64{1, 2, 5, 10, 15, 20, 30, 60, 120, 180, 240, 360, 480, 720, 1440, 2880, 4320, 10080, 20160, 43200}

func (t minuteTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	if step := pickMinuteStep(hi - lo); step > 0 {
		for v := math.Ceil(lo/(step/2)) * (step / 2); v <= hi; v += step / 2 {
			tk := plot.Tick{Value: v}
			if math.Mod(math.Abs(v), step) == 0 {
				tk.Label = formatNumber(v)
			}
			ticks = append(ticks, tk)
		}
	} else {
		ticks = plot.DefaultTicks{}.Ticks(lo, hi)
	}
	if !t.labels {
		for i := range ticks {
			ticks[i].Label = ""
		}
	}
	return ticks
}

// pickMinuteStep returns the smallest clock interval giving at most ten
// major ticks, or 0 for spans too short or too long for clock intervals.
func pickMinuteStep(span float64) float64 {
	if span < 5 {
		return 0
	}
	for _, s := range minuteSteps {
		if span/s <= 10 {
			return s
		}
	}
	return 0
}

// grid draws light lines at the major ticks. gonum's grid finds them by
// their labels, so it would draw nothing on the unlabelled time axes of
// the upper panels.
type grid struct{}

func (grid) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	st := draw.LineStyle{Color: gridColor, Width: vg.Points(0.5)}
	for _, tk := range (minuteTicks{labels: true}).Ticks(p.X.Min, p.X.Max) {
		if tk.Label != "" {
			x := trX(tk.Value)
			c.StrokeLine2(st, x, c.Min.Y, x, c.Max.Y)
		}
	}
	for _, tk := range p.Y.Tick.Marker.Ticks(p.Y.Min, p.Y.Max) {
		if tk.Label != "" {
			y := trY(tk.Value)
			c.StrokeLine2(st, c.Min.X, y, c.Max.X, y)
		}
	}
}

// span is the range of the values a panel shows.
type span struct{ lo, hi float64 }

func newSpan() *span { return &span{lo: math.Inf(1), hi: math.Inf(-1)} }

func (s *span) add(v float64) {
	s.lo, s.hi = math.Min(s.lo, v), math.Max(s.hi, v)
}

func (s *span) empty() bool { return s.lo > s.hi }

// setLinearY starts the axis at zero, where pods and request rates are
// read from, and leaves headroom above the highest value for the
// applied-marker triangles.
func setLinearY(p *plot.Plot, s *span) {
	lo, hi := 0.0, 1.0
	if !s.empty() {
		lo = math.Min(0, s.lo)
		hi = math.Max(s.hi, lo+1) * 1.08
	}
	p.Y.Min, p.Y.Max = lo, hi
}

// setLatencyY uses a log axis, because a bad variant's p99 can be
// orders of magnitude above the target and would flatten everyone else
// on a linear one.
func setLatencyY(p *plot.Plot, s *span) {
	if s.empty() {
		p.Y.Min, p.Y.Max = 0, 1
		return
	}
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = logTicks{}
	p.Y.Min, p.Y.Max = s.lo/1.3, s.hi*1.3
}

// logTicks labels 1-2-5 steps when the axis spans few decades and only
// powers of ten otherwise; over less than a decade it falls back to
// linear ticks, which still land in the right places on a log axis.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(lo > 0) || !finite(hi) || hi <= lo {
		// Not a log range; the scale will refuse it anyway, this only
		// keeps the loop below from running over the whole int range.
		return plot.DefaultTicks{}.Ticks(lo, hi)
	}
	elo, ehi := int(math.Floor(math.Log10(lo))), int(math.Ceil(math.Log10(hi)))
	few := ehi-elo <= 3
	var ticks []plot.Tick
	labelled := 0
	for e := elo; e <= ehi; e++ {
		for m := 1; m <= 9; m++ {
			v := decimal(m, e)
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || few && (m == 2 || m == 5) {
				t.Label = formatNumber(v)
				labelled++
			}
			ticks = append(ticks, t)
		}
	}
	if labelled < 2 {
		return plot.DefaultTicks{}.Ticks(lo, hi)
	}
	return ticks
}

// decimal returns m×10^e, dividing for negative e so that values such
// as 0.3 come out as the nearest float rather than 0.30000000000000004.
func decimal(m, e int) float64 {
	if e < 0 {
		return float64(m) / math.Pow10(-e)
	}
	return float64(m) * math.Pow10(e)
}

// formatNumber writes tick values without gonum's fixed decimals, so a
// log axis reads 0.5, 1, 2 rather than 0.500, 1.000, 2.000.
func formatNumber(v float64) string {
	return strconv.FormatFloat(v, 'g', 6, 64)
}

// clean makes input text safe to draw: control characters and the two
// noncharacters XML forbids become spaces (a newline would also start a
// second line),
// and overlong labels are cut so a legend row cannot overflow the page.
func clean(s string, limit int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == 0xFFFE || r == 0xFFFF {
			return ' '
		}
		return r
	}, s)
	if limit > 0 {
		if rs := []rune(s); len(rs) > limit {
			s = string(rs[:limit-1]) + "…"
		}
	}
	return s
}

// draw lays the figure out top to bottom: title, legend (wrapped onto as
// many rows as the variants need), then the three panels, aligned so
// their data areas share left and right edges and hence the time axis.
func (f *figure) draw(c draw.Canvas) {
	c.SetColor(color.White)
	c.Fill(c.Rectangle.Path())
	margin := vg.Points(12)
	c = draw.Crop(c, margin, -margin, margin/2, -margin)

	title := textStyle(boldFont, 13)
	title.YAlign = draw.YTop
	c.FillText(title, vg.Point{X: c.Min.X, Y: c.Max.Y}, f.title)
	if f.subtitle != "" {
		sub := textStyle(sansFont, 9)
		sub.Color = color.Gray{Y: 0x55}
		sub.XAlign = draw.XRight
		sub.YAlign = draw.YTop
		c.FillText(sub, vg.Point{X: c.Max.X, Y: c.Max.Y}, f.subtitle)
	}
	top := c.Max.Y - title.Height("M") - vg.Points(6)
	top = f.drawLegend(c, top)

	area := c
	area.Max.Y = top - vg.Points(4)
	plots := [][]*plot.Plot{{f.panels[0]}, {f.panels[1]}, {f.panels[2]}}
	tiles := draw.Tiles{Rows: 3, Cols: 1, PadY: vg.Points(10)}
	for i, row := range plot.Align(plots, tiles, area) {
		f.panels[i].Draw(row[0])
	}
}

// drawLegend draws the legend rows below top and returns where they end.
// A legend of its own, rather than gonum's inside one panel, keeps all
// three panels' data unobstructed.
func (f *figure) drawLegend(c draw.Canvas, top vg.Length) vg.Length {
	if len(f.legend) == 0 {
		return top
	}
	sty := textStyle(sansFont, 9)
	sty.YAlign = draw.YCenter
	var (
		rowH   = vg.Points(14)
		sample = vg.Points(22)
		gap    = vg.Points(4)
		sep    = vg.Points(16)
	)
	x, y := c.Min.X, top-rowH/2
	for _, it := range f.legend {
		w := sample + gap + sty.Width(it.label)
		if x > c.Min.X && x+w > c.Max.X {
			x, y = c.Min.X, y-rowH
		}
		if it.line != nil {
			c.StrokeLine2(*it.line, x, y, x+sample, y)
		}
		if it.glyph != nil {
			c.DrawGlyphNoClip(*it.glyph, vg.Point{X: x + sample/2, Y: y})
		}
		c.FillText(sty, vg.Point{X: x + sample + gap, Y: y}, it.label)
		x += w + sep
	}
	return y - rowH/2
}
