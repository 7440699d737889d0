package sim

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// arrivalCSV is an arrival trace of n rows over d seconds, bursty: the
// arrivals of each second come together in its first tenth, and every
// tenth second holds ten times as many. Token counts cycle 100, 200, 300.
func arrivalCSV(d int) (string, int) {
	var b strings.Builder
	b.WriteString("TIMESTAMP,ContextTokens,GeneratedTokens\n")
	base := time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC)
	n := 0
	for s := 0; s < d; s++ {
		k := 2
		if s%10 == 0 {
			k = 20
		}
		for i := 0; i < k; i++ {
			at := base.Add(time.Duration(s)*time.Second + time.Duration(i)*time.Millisecond)
			fmt.Fprintf(&b, "%s,%d,0\n", at.Format("2006-01-02 15:04:05.0000000"), 100*(n%3+1))
			n++
		}
	}
	return b.String(), n
}

func loadCSV(t *testing.T, src string, o TraceOptions) *Trace {
	t.Helper()
	tr, err := readTrace(strings.NewReader(src), o)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// replay counts a source's arrivals per second over the whole trace.
func replaySource(t *testing.T, tr *Trace, scaling string, k, thin, share float64, seed uint64) ([]float64, []arrival) {
	t.Helper()
	src, err := newSource(tr, scaling, "", k, thin, share, ShiftWhole, seed)
	if err != nil {
		t.Fatal(err)
	}
	var all []arrival
	per := make([]float64, len(tr.Rate))
	var buf []arrival
	for s := range tr.Rate {
		buf = src.second(s, buf[:0])
		for i, a := range buf {
			if a.at < float64(s) || a.at >= float64(s+1) || i > 0 && a.at < buf[i-1].at {
				t.Fatalf("second %d: arrival at %v out of its second or out of order", s, a.at)
			}
		}
		per[s] = float64(len(buf))
		all = append(all, buf...)
	}
	return per, all
}

func sum(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s
}

// cv is the coefficient of variation of xs.
func cv(xs []float64) float64 {
	m := sum(xs) / float64(len(xs))
	var v float64
	for _, x := range xs {
		v += (x - m) * (x - m)
	}
	return math.Sqrt(v/float64(len(xs))) / m
}

// TestSuperpositionPreservesCountAndRate: K whole copies replay exactly K
// times the trace's arrivals (each copy wraps at the end, so none is
// lost), which is K times its mean rate; they are time-shifted copies, so
// the bursts do not all coincide as clones' do.
func TestSuperpositionPreservesCountAndRate(t *testing.T) {
	csv, n := arrivalCSV(600)
	tr := loadCSV(t, csv, TraceOptions{RateScale: 8})
	if tr.Arrivals != n || sum(tr.Rate) != float64(8*n) {
		t.Fatalf("trace: %d arrivals, rates summing to %v; want %d and %d", tr.Arrivals, sum(tr.Rate), n, 8*n)
	}
	per, all := replaySource(t, tr, ScaleSuperpose, 8, 1, 1, 1)
	if got := sum(per); got != float64(8*n) {
		t.Errorf("superposed: %v arrivals, want 8 × %d", got, n)
	}
	if mean := sum(per) / float64(len(per)); mean != 8*float64(n)/600 {
		t.Errorf("mean rate %v, want %v", mean, 8*float64(n)/600)
	}
	clonePer, _ := replaySource(t, tr, ScaleClone, 8, 1, 1, 1)
	if got := sum(clonePer); got != float64(8*n) {
		t.Errorf("cloned: %v arrivals, want 8 × %d", got, n)
	}
	// Clones keep the trace's CV; independent shifted copies lower it.
	if base := cv(tr.Rate); math.Abs(cv(clonePer)-base) > 1e-9 || cv(per) > 0.7*base {
		t.Errorf("CV: trace %.3f, clone %.3f, superposed %.3f", base, cv(clonePer), cv(per))
	}
	// The costs are the tokens over their mean: the mean cost is 1.
	var c float64
	for _, a := range all {
		c += a.cost
	}
	if m := c / float64(len(all)); math.Abs(m-1) > 1e-9 {
		t.Errorf("mean cost %v, want 1", m)
	}
	// The same seed replays the same arrivals; another shifts them
	// elsewhere.
	again, _ := replaySource(t, tr, ScaleSuperpose, 8, 1, 1, 1)
	other, _ := replaySource(t, tr, ScaleSuperpose, 8, 1, 1, 2)
	if fmt.Sprint(again) != fmt.Sprint(per) || fmt.Sprint(other) == fmt.Sprint(per) {
		t.Error("superposition is not a function of its seed")
	}
	// A fraction of a copy is a thinned copy: 2.5 × n ± 5 sd.
	frac, _ := replaySource(t, tr, ScaleSuperpose, 2.5, 1, 1, 1)
	if sd := math.Sqrt(float64(n) * 0.25); math.Abs(sum(frac)-2.5*float64(n)) > 5*sd {
		t.Errorf("rateScale 2.5: %v arrivals, want %v ± %.0f", sum(frac), 2.5*float64(n), 5*sd)
	}
}

// TestSuperposedCopiesAreShifted: with two copies, second s holds the
// trace's second s and its second s − offset (wrapping).
func TestSuperposedCopiesAreShifted(t *testing.T) {
	csv, _ := arrivalCSV(100)
	tr := loadCSV(t, csv, TraceOptions{})
	src, err := newSource(tr, ScaleSuperpose, "", 2, 1, 1, ShiftWhole, 3)
	if err != nil {
		t.Fatal(err)
	}
	off := src.offsets[1]
	if src.offsets[0] != 0 || off <= 0 || off >= 100 {
		t.Fatalf("offsets %v", src.offsets)
	}
	for s := 0; s < 100; s++ {
		b := (s - off + 100) % 100
		want := tr.Rate[s] + tr.Rate[b]
		if got := len(src.second(s, nil)); float64(got) != want {
			t.Fatalf("second %d: %d arrivals, want %v (seconds %d and %d)", s, got, want, s, b)
		}
	}
}

// TestThinningIsSeededAndExplicit: thin keeps each arrival with its
// probability, drawn from the seed: the same seed keeps the same ones.
func TestThinningIsSeededAndExplicit(t *testing.T) {
	var rows strings.Builder
	rows.WriteString("TIMESTAMP\n")
	base := time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < 10000; i++ {
		rows.WriteString(base.Add(time.Duration(i) * 10 * time.Millisecond).Format("2006-01-02 15:04:05.0000000"))
		rows.WriteString("\n")
	}
	tr := loadCSV(t, rows.String(), TraceOptions{Thin: 0.3})
	if sum(tr.Rate) != 3000 {
		t.Errorf("the trace's rates are the expectation: %v, want 3000", sum(tr.Rate))
	}
	count := func(seed uint64) []float64 {
		per, _ := replaySource(t, tr, ScaleSuperpose, 1, 0.3, 1, seed)
		return per
	}
	a, b, c := count(7), count(7), count(8)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Error("same seed, different arrivals")
	}
	if fmt.Sprint(a) == fmt.Sprint(c) {
		t.Error("different seeds gave the same thinning")
	}
	// Binomial(10000, 0.3): mean 3000, sd 46; 5 sd either way.
	if n := sum(a); n < 2770 || n > 3230 {
		t.Errorf("kept %v of 10000 at p=0.3", n)
	}
	if per, _ := replaySource(t, tr, ScaleSuperpose, 1, 1, 1, 7); sum(per) != 10000 {
		t.Errorf("no thinning must keep every arrival: %v", sum(per))
	}
}

// TestRateTracePoisson: a rate trace replays Poisson arrivals of its
// rate × rateScale × thin × share.
func TestRateTracePoisson(t *testing.T) {
	tr := constTrace(40, 1000)
	per, all := replaySource(t, tr, ScaleSuperpose, 2.5, 0.5, 0.8, 1)
	// Mean 40 × 2.5 × 0.5 × 0.8 = 40 a second: 40,000 ± 5 × 200.
	if n := sum(per); math.Abs(n-40000) > 1000 {
		t.Errorf("%v arrivals, want 40000", n)
	}
	// Poisson: variance = mean (a per-second CV of 1/√40).
	if c := cv(per); math.Abs(c-1/math.Sqrt(40)) > 0.03 {
		t.Errorf("per-second CV %v, want %v", c, 1/math.Sqrt(40))
	}
	var c float64
	for _, a := range all {
		c += a.cost
	}
	if m := c / float64(len(all)); math.Abs(m-1) > 0.03 {
		t.Errorf("mean exponential cost %v, want 1", m)
	}
}

func TestSourceErrors(t *testing.T) {
	csv, _ := arrivalCSV(10)
	tr := loadCSV(t, csv, TraceOptions{})
	for name, c := range map[string]struct {
		tr               *Trace
		scaling, service string
		k                float64
		want             string
	}{
		"no tokens":    {constTrace(1, 10), "", ServiceTokens, 1, "no ContextTokens"},
		"bad service":  {tr, "", "uniform", 1, `serviceTimes "uniform"`},
		"bad scaling":  {tr, "stretch", "", 1, `scaling "stretch"`},
		"too many":     {constTrace(1, 10), ScaleSuperpose, "", MaxCopies + 1, "copies"},
		"too many/sec": {tr, ScaleClone, "", 1e5, "at most 100000 a second"},
	} {
		if _, err := newSource(c.tr, c.scaling, c.service, c.k, 1, 1, DefaultShift, 1); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}
