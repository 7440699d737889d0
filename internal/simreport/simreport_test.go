package simreport

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"html"
	"image"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// sampleWorkload is a day-like run: a traffic wave, a main variant that
// scales with it and a fixed baseline whose p99 blows through the target
// at the peak, with a no-traffic gap in the middle.
func sampleWorkload(name string, n int) Workload {
	step := 30 * time.Second
	main := Series{Variant: "setpoint", P99Exact: make([]float64, n)}
	fixed := Series{Variant: "fixed 9 pods"}
	for _, s := range []*Series{&main, &fixed} {
		s.Replicas = make([]float64, n)
		s.RPS = make([]float64, n)
		s.P99 = make([]float64, n)
	}
	var markers []Marker
	for i := range n {
		rps := 200 + 150*math.Sin(float64(i)/float64(n)*2*math.Pi)
		main.RPS[i], fixed.RPS[i] = rps, rps
		main.Replicas[i] = math.Ceil(rps / 60)
		fixed.Replicas[i] = 9
		main.P99[i] = 0.120 + 0.02*math.Sin(float64(i)/7)
		main.P99Exact[i] = main.P99[i] * 0.93
		fixed.P99[i] = 0.080 * math.Exp(rps/120)
		if i%40 == 0 {
			markers = append(markers, Marker{At: time.Duration(i) * step, Applied: i%80 == 0, Text: "minReplicas 2 → 3"})
		}
		// Held decisions come every evaluation, several per step.
		markers = append(markers, Marker{At: time.Duration(i)*step + time.Second}, Marker{At: time.Duration(i)*step + 2*time.Second})
	}
	for i := n / 3; i < n/3+n/20; i++ {
		for _, s := range []*Series{&main, &fixed} {
			s.RPS[i], s.P99[i] = math.NaN(), math.NaN()
		}
		main.P99Exact[i] = math.NaN()
	}
	// A zero p99 has no place on the log axis and must not break it.
	main.P99[n/2], main.P99Exact[n/2] = 0, 0
	return Workload{
		Name:    name,
		Target:  250 * time.Millisecond,
		Start:   time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC),
		Step:    step,
		Series:  []Series{main, fixed},
		Markers: markers,
	}
}

func sampleReport() Report {
	w2 := sampleWorkload("shop/<script>alert(1)</script>", 300)
	// A whole series without data must draw nothing and not fail.
	for i := range w2.Series[1].P99 {
		w2.Series[1].P99[i] = math.NaN()
	}
	w2.Series[1].Variant = "HPA alone"
	return Report{
		Title:     "Run <1> & friends",
		Table:     "variant      breaches  pod-hours\nsetpoint     0         41.5\nHPA <alone>  12        38.0\n",
		Workloads: []Workload{sampleWorkload("shop/checkout", 2880), w2},
	}
}

func TestWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "report")
	r := sampleReport()
	files, err := Write(dir, r)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"shop-checkout.svg", "shop-checkout.png", "shop-script-alert-1-script.svg", "shop-script-alert-1-script.png", "index.html"}
	var got []string
	for _, f := range files {
		got = append(got, filepath.Base(f))
		if filepath.Dir(f) != dir {
			t.Errorf("%s is not in %s", f, dir)
		}
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() == 0 {
			t.Errorf("%s is empty", f)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("files = %v, want %v", got, want)
	}

	for i, w := range r.Workloads {
		checkPNG(t, files[2*i+1])
		checkSVG(t, files[2*i], w)
	}
	checkIndex(t, files[4], r)
}

func checkPNG(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	// 10in × 9in at 100 dpi.
	if b := img.Bounds(); b.Dx() != 1000 || b.Dy() != 900 {
		t.Errorf("%s is %dx%d, want 1000x900", path, b.Dx(), b.Dy())
	}
	if len(data) > 1<<20 {
		t.Errorf("%s is %d bytes, want under 1 MiB", path, len(data))
	}
	if colours := countColours(img, 3); colours < 3 {
		t.Errorf("%s has %d colours, want a drawing", path, colours)
	}
}

// countColours counts distinct colours, stopping at limit.
func countColours(img image.Image, limit int) int {
	seen := map[[4]uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, a := img.At(x, y).RGBA()
			seen[[4]uint32{r, g, bl, a}] = true
			if len(seen) >= limit {
				return len(seen)
			}
		}
	}
	return len(seen)
}

func checkSVG(t *testing.T, path string, w Workload) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Decoding to the end both checks well-formedness and collects the
	// text, which is where escaped names come back unescaped.
	dec := xml.NewDecoder(bytes.NewReader(data))
	var textContent strings.Builder
	sawSVG := false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: not XML: %v", path, err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if tok.Name.Local == "svg" {
				sawSVG = true
			}
		case xml.CharData:
			textContent.Write(tok)
			textContent.WriteByte('\n')
		}
	}
	if !sawSVG {
		t.Errorf("%s has no <svg> element", path)
	}
	txt := textContent.String()
	for _, s := range w.Series {
		if !strings.Contains(txt, s.Variant) {
			t.Errorf("%s does not name variant %q", path, s.Variant)
		}
	}
	for _, want := range []string{"target 250ms", w.Name, "minutes from start", "p99 (ms)", "replicas"} {
		if !strings.Contains(txt, want) {
			t.Errorf("%s lacks %q", path, want)
		}
	}
}

func checkIndex(t *testing.T, path string, r Report) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	page := string(data)
	if strings.Contains(page, "<script>") || strings.Contains(page, "<1>") || strings.Contains(page, "<alone>") {
		t.Errorf("index.html has unescaped input:\n%s", page)
	}
	for _, want := range []string{"&lt;script&gt;", "Run &lt;1&gt; &amp; friends", "HPA &lt;alone&gt;"} {
		if !strings.Contains(page, want) {
			t.Errorf("index.html lacks %q", want)
		}
	}
	// Escaping may differ in detail (html/template writes "+" as "&#43;"),
	// so the table is compared as the browser would read it.
	if !strings.Contains(html.UnescapeString(page), "<pre>"+r.Table+"</pre>") {
		t.Errorf("index.html lacks the table in a <pre>")
	}
	for _, ref := range []string{
		`src="shop-checkout.svg"`, `href="shop-checkout.png"`,
		`src="shop-script-alert-1-script.svg"`, `href="shop-script-alert-1-script.png"`,
	} {
		if !strings.Contains(page, ref) {
			t.Errorf("index.html lacks %s", ref)
		}
	}
	if !strings.Contains(html.UnescapeString(page), "minReplicas 2 → 3") {
		t.Errorf("index.html does not list the applied events")
	}
}

func TestWriteOverwritesAndLeavesNoTemporaries(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(other, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := Report{Title: "first", Workloads: []Workload{sampleWorkload("a", 100)}}
	if _, err := Write(dir, r); err != nil {
		t.Fatal(err)
	}
	r.Title = "second"
	r.Workloads[0].Series = r.Workloads[0].Series[:1]
	files, err := Write(dir, r)
	if err != nil {
		t.Fatal(err)
	}
	index, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(index), "second") || strings.Contains(string(index), "first") {
		t.Errorf("index.html was not overwritten")
	}
	svg, err := os.ReadFile(filepath.Join(dir, "a.svg"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(svg), "fixed 9 pods") {
		t.Errorf("a.svg still shows the variant dropped in the second run")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"a.png", "a.svg", "index.html", "notes.txt"}; !slices.Equal(names, want) {
		t.Errorf("dir holds %v, want %v", names, want)
	}
	if len(files) != 3 {
		t.Errorf("Write returned %v, want three files", files)
	}
	if b, _ := os.ReadFile(other); string(b) != "keep" {
		t.Errorf("Write touched an unrelated file")
	}
}

func TestWriteRefuses(t *testing.T) {
	ok := func() Report {
		return Report{Workloads: []Workload{sampleWorkload("shop/checkout", 10)}}
	}
	tooLong := make([]float64, maxPoints+1)
	cases := []struct {
		name   string
		mutate func(*Report)
		want   []string // all must appear in the error
	}{
		{"too many points", func(r *Report) {
			s := &r.Workloads[0].Series[0]
			s.Replicas, s.RPS, s.P99, s.P99Exact = tooLong, tooLong, tooLong, tooLong
		}, []string{"100000"}},
		{"unequal lengths", func(r *Report) {
			r.Workloads[0].Series[1].RPS = r.Workloads[0].Series[1].RPS[:9]
		}, []string{"fixed 9 pods", "RPS"}},
		{"unequal exact", func(r *Report) {
			r.Workloads[0].Series[0].P99Exact = []float64{1}
		}, []string{"P99Exact"}},
		{"too many variants", func(r *Report) {
			w := &r.Workloads[0]
			for len(w.Series) <= maxVariants {
				w.Series = append(w.Series, w.Series[1])
			}
		}, []string{"variants"}},
		{"too many workloads", func(r *Report) {
			for i := len(r.Workloads); i <= maxWorkloads; i++ {
				w := sampleWorkload(fmt.Sprint("w", i), 2)
				r.Workloads = append(r.Workloads, w)
			}
		}, []string{"workloads"}},
		{"empty file name", func(r *Report) {
			r.Workloads[0].Name = "/ü/"
		}, []string{`"/ü/"`}},
		{"name collision", func(r *Report) {
			r.Workloads = append(r.Workloads, sampleWorkload("Shop--Checkout", 10))
		}, []string{`"shop/checkout"`, `"Shop--Checkout"`}},
		{"no step", func(r *Report) {
			r.Workloads[0].Step = 0
		}, []string{"Step"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			r := ok()
			tc.mutate(&r)
			files, err := Write(dir, r)
			if err == nil {
				t.Fatalf("Write succeeded, wrote %v", files)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %s", err, w)
				}
			}
			if _, serr := os.Stat(dir); !errors.Is(serr, os.ErrNotExist) {
				t.Errorf("refused report still created %s", dir)
			}
		})
	}
	// The limits themselves are allowed.
	r := ok()
	w := &r.Workloads[0]
	for len(w.Series) < maxVariants {
		w.Series = append(w.Series, w.Series[1])
	}
	if _, err := Write(t.TempDir(), r); err != nil {
		t.Errorf("%d variants refused: %v", maxVariants, err)
	}
}

func TestFileBase(t *testing.T) {
	for in, want := range map[string]string{
		"shop/checkout":   "shop-checkout",
		"Shop/Check Out":  "shop-check-out",
		"/a//b/":          "a-b",
		"ns/<script>x":    "ns-script-x",
		"ü":               "",
		"app_v2.1":        "app-v2-1",
		"---":             "",
		"über/café-bar-9": "ber-caf-bar-9",
	} {
		if got := fileBase(in); got != want {
			t.Errorf("fileBase(%q) = %q, want %q", in, got, want)
		}
	}
	if got := fileBase(strings.Repeat("a-", 200)); len(got) > maxBaseLen || strings.HasSuffix(got, "-") {
		t.Errorf("long name gave %q", got)
	}
}

// TestThinKeepsExtremesAndGaps checks the reduction of long series: a
// one-sample spike must survive, and so must a wide gap.
func TestThinKeepsExtremesAndGaps(t *testing.T) {
	n := 50_000
	ys := make([]float64, n)
	for i := range ys {
		ys[i] = 1
	}
	ys[12_345] = 99
	for i := 30_000; i < 31_000; i++ {
		ys[i] = math.NaN()
	}
	xs, out := thin(ys, 0.5)
	if len(xs) != len(out) || len(out) > maxDrawn {
		t.Fatalf("thin gave %d/%d points, want equal and at most %d", len(xs), len(out), maxDrawn)
	}
	if i := slices.Index(out, 99); i < 0 || xs[i] != 12_345*0.5 {
		t.Errorf("spike lost or misplaced")
	}
	gap := false
	for i, y := range out {
		if math.IsNaN(y) && xs[i] >= 15_000 && xs[i] < 15_500 {
			gap = true
		}
	}
	if !gap {
		t.Errorf("gap lost")
	}
	if !slices.IsSorted(xs) {
		t.Errorf("x not in time order")
	}
}

func TestHeldMarkersThinned(t *testing.T) {
	w := sampleWorkload("a", 100)
	applied, held := placeMarkers(&w, 100, 0, 99*w.Step.Minutes())
	if len(held.xs) != 100 {
		t.Errorf("%d held crosses for 100 steps with two held events each, want 100", len(held.xs))
	}
	if len(applied.xs) != 2 {
		t.Errorf("%d applied markers, want 2", len(applied.xs))
	}
	for i, y := range applied.ys {
		idx := int(applied.xs[i] / w.Step.Minutes())
		if y != w.Series[0].Replicas[idx] {
			t.Errorf("applied marker %d at %v replicas, want the main variant's %v", i, y, w.Series[0].Replicas[idx])
		}
	}
}

// TestWriteWithoutData covers workloads that have nothing to draw: no
// variants at all, or a main variant without a single value. Both must
// still produce a figure, with empty panels rather than an error.
func TestWriteWithoutData(t *testing.T) {
	nan := []float64{math.NaN(), math.NaN(), math.NaN()}
	r := Report{Workloads: []Workload{
		{Name: "nothing"},
		{
			Name: "all-nan", Target: time.Second, Step: time.Minute,
			Series:  []Series{{Variant: "setpoint", Replicas: nan, RPS: nan, P99: nan, P99Exact: nan}},
			Markers: []Marker{{At: time.Minute, Applied: true, Text: "x"}, {At: 90 * time.Second}},
		},
	}}
	files, err := Write(t.TempDir(), r)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 5 {
		t.Fatalf("wrote %v, want five files", files)
	}
	checkPNG(t, files[3])
}

func TestAppliedMarkersBounded(t *testing.T) {
	w := sampleWorkload("a", 100)
	w.Markers = nil
	for i := range 50_000 {
		w.Markers = append(w.Markers, Marker{At: time.Duration(i) * w.Step / 500, Applied: true})
	}
	applied, _ := placeMarkers(&w, 100, 0, 100*w.Step.Minutes())
	if len(applied.xs) == 0 || len(applied.xs) > maxAppliedMarks {
		t.Errorf("%d applied triangles drawn for 50000 events, want 1..%d", len(applied.xs), maxAppliedMarks)
	}
}
