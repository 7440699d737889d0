package routegroup

import (
	"math"
	"slices"
	"testing"
	"time"
)

// defaults are the spec's defaults.
func defaults() Params {
	return Params{
		Slots: 65537, Alpha: 0.3,
		WQueue: 1, WLatency: 1, WErrors: 2,
		QueueRef: 10, LatencyRef: 0.1, ErrorRef: 0.01, ErrorClip: 10,
		PenaltyAbove: 0.05, PenaltyAdd: 5,
		Horizon:         2 * time.Second,
		MaxSlotsPerTick: 2000, SkewEpsilon: 0.02, SkewShrink: 0.5, MinConnects: 100,
		TransitionAbove: 1, CrisisAbove: 2, RecoveryTicks: 10,
		SoftShed: 0.2, HardBudget: 100,
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestPressure(t *testing.T) {
	p := defaults()
	for _, c := range []struct {
		name       string
		q, l, e, w float64
	}{
		{"each term half its reference", 5, 0.05, 0.005, 0.5 + 0.5 + 2*0.5},
		{"errors clipped at 10, penalty above 5%", 0, 0.2, 0.2, 2 + 2*10 + 5},
		{"at the penalty threshold: no penalty", 0, 0, 0.05, 2 * 5},
		{"negative error ratio clipped to 0", 0, 0, -1, 0},
		{"negative queue counts as 0", -3, 0, 0, 0},
	} {
		if got := p.Pressure(c.q, c.l, c.e); !near(got, c.w) {
			t.Errorf("%s: Pressure(%g, %g, %g) = %g, want %g", c.name, c.q, c.l, c.e, got, c.w)
		}
	}
}

func TestFilters(t *testing.T) {
	if got := EWMA(0.3, 10, 20, true); !near(got, 13) {
		t.Errorf("EWMA(0.3, 10, 20) = %g, want 13", got)
	}
	if got := EWMA(0.3, 10, 20, false); got != 20 {
		t.Errorf("first EWMA = %g, want the sample 20", got)
	}
	if got := Rate(2, 4, 500*time.Millisecond); !near(got, 4) {
		t.Errorf("Rate(2→4 in 0.5s) = %g, want 4/s", got)
	}
	if got := Rate(4, 2, time.Second); got != 0 {
		t.Errorf("shrinking Rate = %g, want 0", got)
	}
	if got := Rate(2, 4, 0); got != 0 {
		t.Errorf("Rate over no time = %g, want 0", got)
	}
	for _, c := range []struct {
		q, v, limit float64
		h           time.Duration
		want        bool
	}{
		{6, 4, 10, time.Second, true},                   // (10−6)/4 = 1 s ≤ 1 s
		{6, 4, 10, 999 * time.Millisecond, false},       // 1 s > 0.999 s
		{10, 0, 10, time.Second, true},                  // at the limit
		{9, 0, 10, time.Hour, false},                    // not growing
		{100, 100, 0, time.Hour, false},                 // off
		{0, 1, 10, 10 * time.Second, true},              // 10 s ≤ 10 s
		{0, 0.999, 10, 10 * time.Second, false},         // 10.01 s
		{9.5, 1e9, 10, time.Nanosecond * 1000, true},    // tiny horizon, huge rate
		{-1, 0.5, 10, 20 * time.Second, false},          // 22 s > 20 s
		{-1, 0.55, 10, 20 * time.Second, true},          // 20 s
		{5, math.Inf(1), 10, time.Nanosecond, true},     // infinite rate saturates at once
		{5, 1, math.Inf(1), 1000 * time.Hour, false},    // no finite limit
		{5, 1, 10, 0, false},                            // no horizon: only at the limit
		{10.5, 0, 10, 0, true},                          // over the limit
		{0, 0, 10, 0, false},                            // idle
		{9, 1, 10, time.Second, true},                   // exactly 1 s
		{9, 0.5, 10, time.Second, false},                // 2 s
		{9.9, 0.1, 10, time.Second, true},               // 1 s (rounding)
		{2, 15, 10, 999 * time.Millisecond, true},       // 0.533 s
		{2, 15, 10, 500 * time.Millisecond, false},      // 0.533 s > 0.5 s
		{2, 15, 10, 533334 * time.Microsecond, true},    // just over 8/15 s
		{2, 15, 10, 533333 * time.Microsecond, false},   // just under
		{2, 15, 10, 2 * time.Second, true},              // the default horizon
		{2, -15, 10, 2 * time.Second, false},            // shrinking (Rate never returns this)
		{2, 15, 2, 2 * time.Second, true},               // at a limit of 2
		{1.999, 0, 2, 2 * time.Second, false},           // just under, not growing
		{1.999, 1e-6, 2, 2 * time.Second, false},        // 1000 s away
		{1.999, 1e-3, 2, 2 * time.Second, true},         // 1 s away
		{1.999, 1e-3, 2, 999 * time.Millisecond, false}, // 1 s away, 0.999 s horizon
	} {
		if got := Saturates(c.q, c.v, c.limit, c.h); got != c.want {
			t.Errorf("Saturates(q=%g, v=%g, limit=%g, horizon=%s) = %v, want %v", c.q, c.v, c.limit, c.h, got, c.want)
		}
	}
}

func TestWeightsAndApportion(t *testing.T) {
	w := Weights([]float64{0, 0.9})
	if !near(w[0], 10.0/11) || !near(w[1], 1.0/11) {
		t.Errorf("Weights(0, 0.9) = %v, want 10/11, 1/11 (1/(P+0.1) normalised)", w)
	}
	if w := Weights([]float64{3, 3, 3, 3}); !near(w[2], 0.25) {
		t.Errorf("equal pressures: %v, want 0.25 each", w)
	}
	for _, c := range []struct {
		w     []float64
		total int
		want  []int
	}{
		{[]float64{1, 1, 1}, 10, []int{4, 3, 3}},                    // tie: lowest index
		{[]float64{0.5, 0.3, 0.2}, 7, []int{4, 2, 1}},               // 3.5 2.1 1.4
		{[]float64{10.0 / 11, 1.0 / 11}, 65537, []int{59579, 5958}}, // 59579.09 5957.91
		{[]float64{0, 0}, 5, []int{3, 2}},                           // no weight: even
		{[]float64{1, 0, 0}, 65537, []int{65537, 0, 0}},
		{[]float64{}, 7, []int{}},
	} {
		got := Apportion(c.w, c.total)
		if !slices.Equal(got, c.want) {
			t.Errorf("Apportion(%v, %d) = %v, want %v", c.w, c.total, got, c.want)
		}
	}
}

func TestViscousStep(t *testing.T) {
	for _, c := range []struct {
		cur, target []int
		dmax        int
		want        []int
	}{
		// Clipped to −20, +20, +20: gains (40) shrink to the losses (20).
		{[]int{100, 0, 0}, []int{40, 30, 30}, 20, []int{80, 10, 10}},
		{[]int{50, 50}, []int{10, 90}, 100, []int{10, 90}},
		// Losses (−5, −5) shrink to the one gain (+3): 2 and 1 by largest remainder.
		{[]int{10, 10, 0}, []int{5, 5, 10}, 3, []int{8, 9, 3}},
		{[]int{7, 4}, []int{7, 4}, 1, []int{7, 4}},
	} {
		got := ViscousStep(c.cur, c.target, c.dmax)
		if !slices.Equal(got, c.want) {
			t.Errorf("ViscousStep(%v → %v, Δmax %d) = %v, want %v", c.cur, c.target, c.dmax, got, c.want)
		}
	}
}

func TestRegimes(t *testing.T) {
	p := defaults()
	p.RecoveryTicks = 3
	for _, c := range []struct {
		prev     Regime
		calm     int
		mean     float64
		want     Regime
		wantCalm int
	}{
		{Laminar, 0, 0.95, Laminar, 0},
		{Laminar, 0, 1.0, Transition, 0},
		{Transition, 0, 0.95, Transition, 0}, // inside the band
		{Transition, 0, 0.89, Laminar, 0},
		{Transition, 0, 2.0, Crisis, 0},
		{Laminar, 0, 5, Crisis, 0},
		// crisisAbove 2: crisis holds down to 0.9 × 2 = 1.8.
		{Crisis, 0, 1.85, Crisis, 0},
		{Crisis, 0, 1.8, Crisis, 0},
		{Crisis, 0, 1.79, Recovery, 0},
		{Crisis, 0, 1.5, Recovery, 0},
		{Crisis, 0, 0.5, Recovery, 1},
		{Recovery, 1, 0.5, Recovery, 2},
		{Recovery, 2, 0.5, Laminar, 0},
		{Recovery, 2, 1.2, Recovery, 0}, // not calm: starts again
		{Recovery, 2, 2.5, Crisis, 0},
	} {
		got, calm := NextRegime(p, c.prev, c.calm, c.mean)
		if got != c.want || calm != c.wantCalm {
			t.Errorf("NextRegime(%s, calm %d, P̄ %g) = %s, %d; want %s, %d", c.prev, c.calm, c.mean, got, calm, c.want, c.wantCalm)
		}
	}
	for _, c := range []struct {
		r    Regime
		n    int
		want Admission
	}{
		{Laminar, 3, Admission{Mode: Normal}},
		{Transition, 3, Admission{Mode: Normal}},
		{Transition, 1, Admission{Mode: Soft, Shed: 0.2}},
		{Crisis, 3, Admission{Mode: Hard, Budget: 100}},
		{Recovery, 3, Admission{Mode: Soft, Shed: 0.2}},
	} {
		if got := AdmissionFor(p, c.r, c.n); got != c.want {
			t.Errorf("AdmissionFor(%s, %d backends) = %+v, want %+v", c.r, c.n, got, c.want)
		}
	}
}

func TestJitterIsBoundedAndDeterministic(t *testing.T) {
	every := 200 * time.Millisecond
	lo, hi := every, every
	for tick := range uint64(10000) {
		j := Jitter("shop/checkout-vip", tick, every, 0.05)
		if j != Jitter("shop/checkout-vip", tick, every, 0.05) {
			t.Fatalf("tick %d: jitter differs between calls", tick)
		}
		if j < every-10*time.Millisecond || j > every+10*time.Millisecond {
			t.Fatalf("tick %d: period %s outside 200ms ± 5%%", tick, j)
		}
		lo, hi = min(lo, j), max(hi, j)
	}
	// It must jitter at all, and across most of its range.
	if hi-lo < 18*time.Millisecond {
		t.Errorf("periods span only %s..%s", lo, hi)
	}
	if Jitter("a", 1, every, 0.05) == Jitter("b", 1, every, 0.05) && Jitter("a", 2, every, 0.05) == Jitter("b", 2, every, 0.05) {
		t.Error("two groups tick in phase")
	}
}

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func q(name string, queue float64) Sample { return Sample{Name: name, Queue: queue} }

// A two-backend group on an 11-slot table, worked by hand.
func TestStepByHand(t *testing.T) {
	p := defaults()
	p.Slots, p.MaxSlotsPerTick = 11, 2
	st, d := Step(p, State{}, t0, []Sample{q("b", 9), q("a", 0)})
	// P = (0, 0.9) → w = (10/11, 1/11) → targets 10, 1; a first table takes them.
	if !slices.Equal(d.Names, []string{"a", "b"}) || !slices.Equal(d.Slots, []int{10, 1}) || !slices.Equal(d.Targets, []int{10, 1}) {
		t.Fatalf("tick 1: names %v targets %v slots %v, want [a b] [10 1] [10 1]", d.Names, d.Targets, d.Slots)
	}
	st, d = Step(p, st, t0.Add(200*time.Millisecond), []Sample{q("a", 9), q("b", 0)})
	// EWMA: a 0.3·9 = 2.7 → P 0.27; b 0.7·9 = 6.3 → P 0.63.
	// w ∝ 1/0.37, 1/0.73 → 0.66363, 0.33637 → 7.29999, 3.70001 → targets 7, 4.
	// Δ = −3, +3, clipped to ±2 → 8, 3.
	if !near(d.Pressure[0], 0.27) || !near(d.Pressure[1], 0.63) {
		t.Errorf("tick 2 pressure %v, want [0.27 0.63]", d.Pressure)
	}
	if !slices.Equal(d.Targets, []int{7, 4}) || !slices.Equal(d.Slots, []int{8, 3}) || d.Moved != 2 {
		t.Errorf("tick 2: targets %v slots %v moved %d, want [7 4] [8 3] 2", d.Targets, d.Slots, d.Moved)
	}
	// P̄ = 8/11·0.27 + 3/11·0.63 = 0.36818.
	if !near(d.MeanPressure, 8.0/11*0.27+3.0/11*0.63) || d.Regime != Laminar || d.Admission.Mode != Normal {
		t.Errorf("tick 2: P̄ %g regime %s admission %s", d.MeanPressure, d.Regime, d.Admission.Mode)
	}
	_, d = Step(p, st, t0.Add(400*time.Millisecond), []Sample{q("a", 9), q("b", 0)})
	// EWMA: a 0.3·9 + 0.7·2.7 = 4.59, b 0.7·6.3 = 4.41 → w ∝ 1/0.559, 1/0.541
	// → 5.41, 5.59 → targets 5, 6; from 8, 3 clipped to ±2 → 6, 5.
	if !slices.Equal(d.Targets, []int{5, 6}) || !slices.Equal(d.Slots, []int{6, 5}) {
		t.Errorf("tick 3: targets %v slots %v, want [5 6] [6 5]", d.Targets, d.Slots)
	}
}

func TestRemovedBackendsSlotsGoAtOnce(t *testing.T) {
	p := defaults()
	p.Slots, p.MaxSlotsPerTick = 11, 1
	prev := State{At: t0, Backends: []Backend{{Name: "a", Slots: 6, Seen: true}, {Name: "b", Slots: 3, Seen: true}, {Name: "c", Slots: 2, Seen: true}}}
	_, d := Step(p, prev, t0.Add(time.Second), []Sample{q("a", 0), q("b", 0)})
	// Equal pressures → 5.5 each → targets 6, 5; c's 2 slots go to b (the
	// one short), beyond Δmax 1: nothing may route to c.
	if !slices.Equal(d.Slots, []int{6, 5}) || !slices.Equal(d.Names, []string{"a", "b"}) {
		t.Errorf("slots %v for %v, want [6 5] for [a b]", d.Slots, d.Names)
	}
	if d.Moved != 2 {
		t.Errorf("moved %d, want 2", d.Moved)
	}
}

func TestMissingMetricsHoldPressure(t *testing.T) {
	p := defaults()
	p.Slots = 101
	st, _ := Step(p, State{}, t0, []Sample{q("a", 5), q("b", 0)})
	st, d := Step(p, st, t0.Add(time.Second), []Sample{{Name: "a", Missing: true}, q("b", 0), {Name: "c", Queue: math.NaN()}})
	// a holds 0.5; c, never measured, takes the measured mean (b's 0).
	if !near(d.Pressure[0], 0.5) || d.Pressure[2] != 0 {
		t.Errorf("pressure %v, want a held at 0.5 and c at the measured mean 0", d.Pressure)
	}
	if !st.Backends[0].Flagged || st.Backends[1].Flagged || !st.Backends[2].Flagged {
		t.Errorf("flags %+v, want a and c flagged", st.Backends)
	}
	if len(d.Reasons) < 2 {
		t.Errorf("reasons %q, want one per flagged backend", d.Reasons)
	}
}

func counted(name string, connects uint64) Sample { return Sample{Name: name, Connects: connects} }

func TestSkewGuard(t *testing.T) {
	p := defaults()
	p.Slots, p.MaxSlotsPerTick = 101, 4
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * 200 * time.Millisecond) }
	st, d := Step(p, State{}, at(0), []Sample{counted("a", 0), counted("b", 0)})
	if d.SkewKnown {
		t.Fatal("tick 1: skew known without a previous count")
	}
	st, d = Step(p, st, at(1), []Sample{counted("a", 60), counted("b", 40)})
	if !d.SkewKnown || !near(d.Skew, 0.1) || d.Guard != GuardNone {
		t.Fatalf("tick 2: skew %g known %v guard %q, want 0.1 (60%% against 50%%), no guard", d.Skew, d.SkewKnown, d.Guard)
	}
	st, d = Step(p, st, at(2), []Sample{counted("a", 140), counted("b", 60)})
	// 80/20: skew 0.3 > 0.1 + 0.02 → Δmax 4 → 2.
	if !near(d.Skew, 0.3) || d.Guard != GuardShrink || d.DeltaMax != 2 {
		t.Fatalf("tick 3: skew %g guard %q Δmax %d, want 0.3 shrink 2", d.Skew, d.Guard, d.DeltaMax)
	}
	st, d = Step(p, st, at(3), []Sample{counted("a", 141), counted("b", 60)})
	if d.SkewKnown || d.DeltaMax != 2 {
		t.Fatalf("tick 4: 1 connect (< 100): skew known %v, Δmax %d; want unknown, Δmax kept", d.SkewKnown, d.DeltaMax)
	}
	st, d = Step(p, st, at(4), []Sample{counted("a", 191), counted("b", 110)})
	// 50/50 after an unknown tick: nothing to compare, Δmax grows back.
	if d.Guard != GuardNone || d.DeltaMax != 4 {
		t.Fatalf("tick 5: guard %q Δmax %d, want none and 4", d.Guard, d.DeltaMax)
	}
	_ = st
}

// A backend degrading moves the weights; a split that follows the table
// the last tick steered to is no worsening, so Δmax stays whole.
func TestSkewIsAgainstTheWeightsSteeredTo(t *testing.T) {
	p := defaults()
	p.Slots, p.MaxSlotsPerTick = 101, 4
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * 200 * time.Millisecond) }
	st, _ := Step(p, State{}, at(0), []Sample{counted("a", 0), counted("b", 0)})
	st, d := Step(p, st, at(1), []Sample{counted("a", 50), counted("b", 50)})
	if !d.SkewKnown || d.Skew != 0 {
		t.Fatalf("tick 2: skew %g known %v, want 0", d.Skew, d.SkewKnown)
	}
	// a's queue jumps and the weights move to about 0.2 : 0.8 (targets
	// 20 : 81). The split is still 50/50, as the table in force says: a
	// skew against the new weights (0.3) would have halved Δmax.
	a := counted("a", 100)
	a.Queue = 10
	_, d = Step(p, st, at(2), []Sample{a, counted("b", 100)})
	if !d.SkewKnown || d.Skew != 0 || d.Guard != GuardNone || d.DeltaMax != 4 {
		t.Fatalf("tick 3: skew %g guard %q Δmax %d, want 0, none and 4 (weights %v)", d.Skew, d.Guard, d.DeltaMax, d.Weights)
	}
	if d.Targets[0] != 20 || d.Slots[0] != 51-4 {
		t.Errorf("slots %v: a should give up Δmax = 4 of its 51 toward its target 20 (targets %v)", d.Slots, d.Targets)
	}
}

// A queue's rate after a tick without metrics is over the time since it
// was last seen: 0 → 10 over 2 s is 5/s, not 10/s.
func TestRateSpansAMissingSample(t *testing.T) {
	p := defaults()
	p.Alpha, p.QueueLimit, p.Horizon = 1, 25, 2*time.Second
	q := func(v float64) Sample { return Sample{Name: "a", Queue: v} }
	st, _ := Step(p, State{}, t0, []Sample{q(0), {Name: "b"}})
	st, _ = Step(p, st, t0.Add(time.Second), []Sample{{Name: "a", Missing: true}, {Name: "b"}})
	// 10 + 5/s × 2 s = 20 < 25: no crisis. At 10/s it would be 30.
	st, _ = Step(p, st, t0.Add(2*time.Second), []Sample{q(10), {Name: "b"}})
	if st.Backends[0].Crisis {
		t.Errorf("queue 0 → 10 over 2 s (one of them without metrics) read as saturating within 2 s")
	}
	// 10 → 18 in 1 s: 18 + 8 × 2 = 34 ≥ 25.
	st, _ = Step(p, st, t0.Add(3*time.Second), []Sample{q(18), {Name: "b"}})
	if !st.Backends[0].Crisis {
		t.Errorf("queue 10 → 18 in 1 s toward 25 within 2 s: no crisis")
	}
}

func TestSkewGuardHolds(t *testing.T) {
	p := defaults()
	p.Slots, p.MaxSlotsPerTick = 101, 1
	a := Sample{Name: "a", Connects: 0}
	b := Sample{Name: "b", Connects: 0}
	st, _ := Step(p, State{}, t0, []Sample{a, b})
	a.Connects, b.Connects = 50, 50
	st, _ = Step(p, st, t0.Add(time.Second), []Sample{a, b})
	before := slices.Clone([]int{st.Backends[0].Slots, st.Backends[1].Slots})
	// a degrades (targets move) and the split worsens: Δmax 1 cannot
	// shrink, so the step holds.
	a.Connects, a.Queue, b.Connects = 150, 50, 50
	_, d := Step(p, st, t0.Add(2*time.Second), []Sample{a, b})
	if d.Guard != GuardHold || !slices.Equal(d.Slots, before) {
		t.Errorf("guard %q slots %v, want hold at %v", d.Guard, d.Slots, before)
	}
	if slices.Equal(d.Targets, before) {
		t.Fatalf("targets %v did not move: the hold is not tested", d.Targets)
	}
}

func TestCounterResetLeavesSkewUnknown(t *testing.T) {
	p := defaults()
	st, _ := Step(p, State{}, t0, []Sample{counted("a", 500), counted("b", 500)})
	_, d := Step(p, st, t0.Add(time.Second), []Sample{counted("a", 10), counted("b", 900)})
	if d.SkewKnown {
		t.Errorf("a counter that went back (a reloaded program) gave skew %g", d.Skew)
	}
}

func TestOneBackendIsAdmissionAndAScaleHint(t *testing.T) {
	p := defaults()
	p.Slots = 7
	_, d := Step(p, State{}, t0, []Sample{q("only", 12)}) // P 1.2: transition
	if !slices.Equal(d.Slots, []int{7}) || d.Regime != Transition || d.Admission.Mode != Soft || !d.ScaleHint {
		t.Errorf("one backend at P 1.2: slots %v regime %s admission %s hint %v; want [7] transition soft hint", d.Slots, d.Regime, d.Admission.Mode, d.ScaleHint)
	}
	_, d = Step(p, State{}, t0, []Sample{q("a", 12), q("b", 12)})
	if d.Admission.Mode != Normal || d.ScaleHint {
		t.Errorf("two backends at P 1.2: admission %s hint %v; want normal, no hint (rerouting is the lever)", d.Admission.Mode, d.ScaleHint)
	}
}

func TestSaturationCountsAsCrisis(t *testing.T) {
	p := defaults()
	p.QueueLimit, p.Horizon = 10, time.Second
	st, _ := Step(p, State{}, t0, []Sample{q("a", 2), q("b", 0)})
	_, d := Step(p, st, t0.Add(200*time.Millisecond), []Sample{q("a", 12), q("b", 0)})
	// a: EWMA 0.3·12 + 0.7·2 = 5, rising (5−2)/0.2 = 15/s, full in 1/3 s ≤ 1 s:
	// its pressure 0.5 lifts to crisisAbove 2.
	if !near(d.Pressure[0], 2) {
		t.Errorf("a's pressure %g, want 2 (crisis)", d.Pressure[0])
	}
	if d.Weights[0] >= d.Weights[1]/10 {
		t.Errorf("weights %v: a should weigh 0.1/2.1 of b", d.Weights)
	}
}

func TestCrisisRefusesBeyondTheBudget(t *testing.T) {
	p := defaults()
	p.Slots = 101
	_, d := Step(p, State{}, t0, []Sample{q("a", 30), q("b", 25)}) // P 3, 2.5
	if d.Regime != Crisis || d.Admission != (Admission{Mode: Hard, Budget: 100}) || !d.ScaleHint {
		t.Errorf("regime %s admission %+v hint %v, want crisis, hard 100/s, a hint", d.Regime, d.Admission, d.ScaleHint)
	}
}

func TestValidate(t *testing.T) {
	if err := defaults().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for name, mut := range map[string]func(*Params){
		"slots":     func(p *Params) { p.Slots = MaxSlots + 2 },
		"alpha":     func(p *Params) { p.Alpha = 0 },
		"negative":  func(p *Params) { p.WLatency = -1 },
		"all zero":  func(p *Params) { p.WQueue, p.WLatency, p.WErrors = 0, 0, 0 },
		"ref":       func(p *Params) { p.LatencyRef = 0 },
		"dmax":      func(p *Params) { p.MaxSlotsPerTick = 0 },
		"shrink":    func(p *Params) { p.SkewShrink = 1 },
		"regimes":   func(p *Params) { p.CrisisAbove = p.TransitionAbove },
		"recovery":  func(p *Params) { p.RecoveryTicks = 0 },
		"budget":    func(p *Params) { p.HardBudget = 0 },
		"shed":      func(p *Params) { p.SoftShed = 1.5 },
		"nan ref":   func(p *Params) { p.QueueRef = math.NaN() },
		"saturates": func(p *Params) { p.QueueLimit = -1 },
	} {
		p := defaults()
		mut(&p)
		if p.Validate() == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// A backend's metrics are the backend's to say: absurd numbers weigh as
// the worst pressure, never as an infinity or NaN in the field.
func TestAbsurdMetricsStayFinite(t *testing.T) {
	p := defaults()
	p.Slots = 101
	for _, set := range [][]Sample{
		{{Name: "a", Latency: 1e308}},
		{{Name: "a", Latency: 1e308}, {Name: "b", Queue: 1e308, ErrorRate: 1e308}},
		{{Name: "a", Latency: 1e308}, {Name: "b"}},
	} {
		st, d := Step(p, State{}, t0, set)
		_, d2 := Step(p, st, t0.Add(time.Second), set)
		for _, dd := range []Decision{d, d2} {
			sum := 0
			for i := range dd.Slots {
				sum += dd.Slots[i]
				if !finite(dd.Weights[i]) || !finite(dd.Pressure[i]) || dd.Slots[i] < 0 {
					t.Fatalf("%+v: weights %v pressure %v slots %v", set, dd.Weights, dd.Pressure, dd.Slots)
				}
			}
			if sum != p.Slots || !finite(dd.MeanPressure) {
				t.Fatalf("%+v: slots %v mean %g", set, dd.Slots, dd.MeanPressure)
			}
		}
	}
	if got := Apportion([]float64{math.NaN(), math.Inf(1), 1}, 10); !slices.Equal(got, []int{0, 0, 10}) {
		t.Errorf("Apportion with NaN and Inf weights = %v, want [0 0 10]", got)
	}
}
