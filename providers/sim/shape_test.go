package sim

import (
	"math"
	"testing"
)

// TestSuperposeKeepsEnvelope replays the shipped trace as the demo does
// (80 superposed copies) and checks each minute of the world against what
// a bounded shift allows. With copy 0 unshifted and copies 1..K−1 each
// at an offset drawn uniformly from [−S, S] seconds (mirrored at the
// trace's ends), the world's count in minute m is c₀(m) plus K−1
// independent draws of c_off(m), the trace's arrivals in the minute's
// window moved by off. So its mean is c₀(m) + (K−1)·μ(m) and its standard
// deviation √(K−1)·σ(m), μ and σ taken over the 2S+1 offsets; every minute
// must lie within 5 of those deviations of its mean, for S of 30 s, the
// default minute and 5 minutes, seeds 1–5. The whole-trace rotation must
// lose the envelope: its per-minute CV under half the trace's.
func TestSuperposeKeepsEnvelope(t *testing.T) {
	tr, err := LoadTrace("../../specs/traces/azure-llm-conv-2023.csv", TraceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const k = 80
	d := len(tr.Rate)
	per := func(s int) float64 { return float64(tr.first[s+1] - tr.first[s]) }
	// window is the trace's count over minute m's seconds moved back by
	// off, mirrored at the ends, as second() reads them.
	window := func(m, off int) float64 {
		var n float64
		for s := 60 * m; s < 60*m+60; s++ {
			b := s - off
			if b < 0 {
				b = -b - 1
			} else if b >= d {
				b = 2*d - b - 1
			}
			n += per(b)
		}
		return n
	}
	minutes := d / 60
	ts := shapeOf(tr.Rate, k)
	// replay counts the requests a source makes each second.
	replay := func(shift int, seed uint64) []float64 {
		src, err := newSource(tr, ScaleSuperpose, ServiceExponential, k, 1, 1, shift, seed)
		if err != nil {
			t.Fatal(err)
		}
		world := make([]float64, d)
		var buf []arrival
		for s := range d {
			buf = src.second(s, buf[:0])
			world[s] = float64(len(buf))
		}
		return world
	}
	for _, shift := range []int{30, DefaultShift, 300} {
		for _, seed := range []uint64{1, 2, 3, 4, 5} {
			world := replay(shift, seed)
			worldMin := PerMinute(world)
			for m := range minutes {
				var sum, sumSq float64
				for off := -shift; off <= shift; off++ {
					c := window(m, off)
					sum += c
					sumSq += c * c
				}
				n := float64(2*shift + 1)
				mu := sum / n
				sd := math.Sqrt(max(0, sumSq/n-mu*mu)) * math.Sqrt(k-1)
				mean := window(m, 0) + (k-1)*mu
				if got := worldMin[m] * 60; math.Abs(got-mean) > 5*sd {
					t.Errorf("shift %ds seed %d minute %d: the world made %.0f requests, want %.0f ± %.0f (5σ)", shift, seed, m, got, mean, 5*sd)
				}
			}
			if shift > DefaultShift {
				continue // a wider shift smooths more: only the minutes are held
			}
			ws := shapeOf(world, 1)
			if ws.CV < 0.8*ts.CV || ws.CV > 1.2*ts.CV {
				t.Errorf("shift %ds seed %d: the world's per-minute CV %.3f, the trace's %.3f: want within 20%%", shift, seed, ws.CV, ts.CV)
			}
			if ws.Max/ws.Min < 0.8*ts.Max/ts.Min {
				t.Errorf("shift %ds seed %d: the world's per-minute swing %.2f×, the trace's %.2f×", shift, seed, ws.Max/ws.Min, ts.Max/ts.Min)
			}
		}
	}
	// The whole-trace rotation: the same number of copies, flat.
	for _, seed := range []uint64{1, 2, 3, 4, 5} {
		if w := shapeOf(replay(ShiftWhole, seed), 1); w.CV > 0.5*ts.CV {
			t.Errorf("seed %d: the whole rotation kept a per-minute CV of %.3f (the trace's %.3f)", seed, w.CV, ts.CV)
		}
	}
}

// TestShapeAcc checks the per-minute envelope on hand-worked minutes:
// 60, 120 and 180 requests (1, 2 and 3 req/s), a partial minute left out.
func TestShapeAcc(t *testing.T) {
	var a shapeAcc
	for _, n := range []float64{60, 120, 180} {
		for s := range 60 {
			r := 0.0
			if s == 0 {
				r = n
			}
			a.add(r)
		}
	}
	a.add(1000) // a partial minute: not counted
	got := a.shape()
	// Mean 2, variance ((1−2)² + 0 + (3−2)²)/3 = 2/3, CV √(2/3)/2.
	want := Shape{Minutes: 3, Min: 1, Max: 3, Mean: 2, CV: math.Sqrt(2.0/3) / 2}
	if got.Minutes != want.Minutes || got.Min != want.Min || got.Max != want.Max || got.Mean != want.Mean || math.Abs(got.CV-want.CV) > 1e-12 {
		t.Fatalf("shape = %+v, want %+v", got, want)
	}
	// The same three minutes given as rates: the same envelope.
	if m := minutesShape([]float64{1, 2, 3}); m.Minutes != 3 || m.Min != 1 || m.Max != 3 || m.Mean != 2 || math.Abs(m.CV-want.CV) > 1e-12 {
		t.Fatalf("minutesShape = %+v, want %+v", m, want)
	}
}
