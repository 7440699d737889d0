package routegroup

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestDampedStepByHand: each rule of the damping, and each way out of it,
// on counts small enough to follow; each row names what it shows.
func TestDampedStepByHand(t *testing.T) {
	now := t0.Add(time.Minute)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	up := func(at time.Time, target int) Motion { return Motion{Dir: 1, MovedAt: at, Target: target} }
	down := func(at time.Time, target int) Motion { return Motion{Dir: -1, MovedAt: at, Target: target} }
	urgent := func(m Motion) Motion { m.Urgent = true; return m }
	for _, c := range []struct {
		name        string
		cur, target []int
		dmax        int
		m           []Motion
		want        []int
		held        int
	}{
		{"never moved: as ViscousStep", []int{50, 50}, []int{40, 60}, 20, []Motion{{}, {}}, []int{40, 60}, 0},
		// a went up and b down 5 s ago: going back now is a reversal
		// within the hold, both ways.
		{"reversal within the hold: held", []int{50, 50}, []int{40, 60}, 20,
			[]Motion{up(ago(5*time.Second), 60), down(ago(5*time.Second), 40)}, []int{50, 50}, 20},
		{"the hold ends after ReverseHold", []int{50, 50}, []int{40, 60}, 20,
			[]Motion{up(ago(ReverseHold), 60), down(ago(ReverseHold), 40)}, []int{40, 60}, 0},
		{"a move stamped later than now holds nothing", []int{50, 50}, []int{40, 60}, 20,
			[]Motion{up(now.Add(time.Second), 60), down(now.Add(time.Second), 40)}, []int{40, 60}, 0},
		// a went down 1 s ago with target 45, now 40: the pull grows.
		{"going on while the target advances", []int{50, 50}, []int{40, 60}, 20,
			[]Motion{down(ago(time.Second), 45), up(ago(time.Second), 55)}, []int{40, 60}, 0},
		// a's target was 30, now 40: its pull is waning, as a blip's does.
		{"going on though the target turned back: held", []int{50, 50}, []int{40, 60}, 20,
			[]Motion{down(ago(time.Second), 30), up(ago(time.Second), 70)}, []int{50, 50}, 20},
		// a must shed 20 (reversing its gain of 1 s ago); b's gain is a
		// reversal too, held, and let go to take a's 20.
		{"an urgent loss is never held, and held gains take it", []int{50, 50}, []int{30, 70}, 20,
			[]Motion{urgent(up(ago(time.Second), 60)), down(ago(time.Second), 40)}, []int{30, 70}, 0},
		{"an urgent backend's gain is held as any", []int{50, 50}, []int{60, 40}, 20,
			[]Motion{urgent(down(ago(time.Second), 40)), up(ago(time.Second), 60)}, []int{50, 50}, 20},
		// a sheds 10 (clipped from 20); b (+10) and c (+5) are held
		// reversals: 10 of their 15 let go by largest remainder of
		// 10:5 → 6.67, 3.33 → 6 + 1, 3. Held: 3 of b's, 2 of c's.
		{"held gains let go only as far as the urgent loss needs", []int{60, 20, 20}, []int{40, 35, 25}, 10,
			[]Motion{urgent(up(ago(time.Second), 60)), down(ago(time.Second), 20), down(ago(time.Second), 20)}, []int{50, 27, 23}, 5},
		// b's gain of 10 is free, a's loss held: gains shrink to the losses.
		{"a held loss leaves a free gain nothing to take", []int{50, 50}, []int{40, 60}, 20,
			[]Motion{up(ago(time.Second), 60), {}}, []int{50, 50}, 10},
	} {
		got, held := DampedStep(now, c.cur, c.target, c.dmax, c.m)
		if !slices.Equal(got, c.want) || held != c.held {
			t.Errorf("%s: DampedStep(%v → %v, Δmax %d) = %v, %d held; want %v, %d held", c.name, c.cur, c.target, c.dmax, got, held, c.want, c.held)
		}
	}
}

// TestBlipMovesOnceAndComesBackAHoldLater: two backends on 101 slots,
// Δmax 10. One tick of queue on a moves 10 slots to b; the blip is spent
// at once (its target turns back), so nothing more moves, and the 10
// come back a hold after they left, not a tick sooner. Undamped they
// would have gone on to 31 : 70 and come back within seconds.
func TestBlipMovesOnceAndComesBackAHoldLater(t *testing.T) {
	p := defaults()
	p.Slots, p.MaxSlotsPerTick = 101, 10
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * 200 * time.Millisecond) }
	// P 0, 0 → 50.5 each → 51, 50 (the tie to the lower index).
	st, d := Step(p, State{}, at(0), []Sample{q("a", 0), q("b", 0)})
	if !slices.Equal(d.Slots, []int{51, 50}) {
		t.Fatalf("tick 0: slots %v, want [51 50]", d.Slots)
	}
	// a's queue 10: EWMA 3 → P 0.3; w ∝ 1/0.4, 1/0.1 → 20.2, 80.8 →
	// targets 20, 81; the first move of either: −10, +10.
	st, d = Step(p, st, at(1), []Sample{q("a", 10), q("b", 0)})
	if !slices.Equal(d.Targets, []int{20, 81}) || !slices.Equal(d.Slots, []int{41, 60}) || d.Damped != 0 {
		t.Fatalf("tick 1: targets %v slots %v damped %d, want [20 81] [41 60] 0", d.Targets, d.Slots, d.Damped)
	}
	// The queue is gone: EWMA 2.1 → P 0.21; w ∝ 1/0.31, 1/0.1 → 24.63,
	// 76.37 → targets 25, 76. Both would go on (−10, +10 → 31, 70), but
	// both targets turned back: held, 20 slots.
	st, d = Step(p, st, at(2), []Sample{q("a", 0), q("b", 0)})
	if !slices.Equal(d.Targets, []int{25, 76}) || !slices.Equal(d.Slots, []int{41, 60}) || d.Damped != 20 {
		t.Fatalf("tick 2: targets %v slots %v damped %d, want [25 76] [41 60] 20", d.Targets, d.Slots, d.Damped)
	}
	// From here the targets come back towards even: a reversal, held
	// until tick 51, 10 s after tick 1's move. There a's P is 0.3·0.7^50
	// ≈ 5e-9, a hair above b's 0: targets 50, 51.
	for i := 3; i <= 51; i++ {
		st, d = Step(p, st, at(i), []Sample{q("a", 0), q("b", 0)})
		want := []int{41, 60}
		if i == 51 {
			want = []int{50, 51}
		}
		if !slices.Equal(d.Slots, want) {
			t.Fatalf("tick %d (%s after the move): slots %v (targets %v), want %v", i, at(i).Sub(at(1)), d.Slots, d.Targets, want)
		}
	}
}

// flaps counts a count's flaps as the issue defines them: a move of more
// than band one way and back by more than band, from its start to its
// return within `within`. Each flap is counted once, from its start.
func flaps(at []time.Time, c []int, band int, within time.Duration) int {
	n := 0
	for i := 0; i < len(c); i++ {
		hi, lo := c[i], c[i]
		for k := i + 1; k < len(c) && at[k].Sub(at[i]) <= within; k++ {
			hi, lo = max(hi, c[k]), min(lo, c[k])
			if hi-c[i] > band && hi-c[k] > band || c[i]-lo > band && c[k]-lo > band {
				n++
				i = k - 1 // the next flap starts where this one ended
				break
			}
		}
	}
	return n
}

func TestFlapsCounter(t *testing.T) {
	s := func(secs ...float64) []time.Time {
		out := make([]time.Time, len(secs))
		for i, x := range secs {
			out[i] = t0.Add(time.Duration(x * float64(time.Second)))
		}
		return out
	}
	for _, c := range []struct {
		name string
		at   []time.Time
		c    []int
		want int
	}{
		{"up 11 and back 11 in 2 s", s(0, 1, 2), []int{100, 111, 100}, 1},
		{"up 11, back 11 at 10 s", s(0, 1, 10), []int{100, 111, 100}, 1},
		{"up 11, back 11 at 10.2 s", s(0, 1, 10.2), []int{100, 111, 100}, 0},
		{"up 10 and back: within the band", s(0, 1, 2), []int{100, 110, 100}, 0},
		{"up 11, back only 10", s(0, 1, 2), []int{100, 111, 101}, 0},
		{"down 20, up 15 in 3 s", s(0, 1, 3), []int{100, 80, 95}, 1},
		{"a drift one way", s(0, 1, 2, 3, 4), []int{100, 110, 120, 130, 140}, 0},
		{"one move, back a hold later", s(0, 0.2, 10.2), []int{100, 90, 100}, 0},
		{"two flaps in a row", s(0, 1, 2, 3, 4), []int{100, 120, 100, 120, 100}, 2},
	} {
		if got := flaps(c.at, c.c, 10, 10*time.Second); got != c.want {
			t.Errorf("%s: %d flaps, want %d", c.name, got, c.want)
		}
	}
}

// TestHealthyPairUnderNoiseNeverFlaps: two healthy backends (pressure
// always below transitionAbove) whose queues are noise, ticking every
// 200 ms ± 5% for ten minutes, twenty times over. Their slots move, but
// neither backend's count ever moves back within ReverseHold of its last
// move, so no share moves 1% of the table one way and back within 10 s.
// Undamped, the same noise flaps them thousands of times.
func TestHealthyPairUnderNoiseNeverFlaps(t *testing.T) {
	p := defaults()
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 7))
		mean := []float64{0.05, 0.3, 1}[seed%3]
		var st State
		now := t0
		var at []time.Time
		var counts [2][]int
		moved := 0
		for tick := range 3000 {
			s := make([]Sample, 2)
			for i, name := range []string{"a", "b"} {
				// A geometric queue of the mean, at most 5: P at most
				// 0.2 + 5·(1/10 + 1/300/0.1) ≈ 0.87, below 1.
				q := 0.0
				for q < 5 && r.Float64() < mean/(1+mean) {
					q++
				}
				s[i] = Sample{Name: name, Queue: q, Latency: 0.02 + q/300}
			}
			var d Decision
			st, d = Step(p, st, now, s)
			for i := range 2 {
				if d.Pressure[i] >= p.TransitionAbove {
					t.Fatalf("seed %d tick %d: pressure %v: the noise is not healthy", seed, tick, d.Pressure)
				}
				counts[i] = append(counts[i], d.Slots[i])
			}
			at = append(at, now)
			moved += d.Moved
			now = now.Add(Jitter("noise", uint64(tick), 200*time.Millisecond, 0.05))
		}
		if moved == 0 {
			t.Fatalf("seed %d: nothing moved: the property is not tested", seed)
		}
		for i, c := range counts {
			if n := flaps(at, c, p.Slots/100, 10*time.Second); n != 0 {
				t.Errorf("seed %d (mean queue %g): backend %d flapped %d times", seed, mean, i, n)
			}
			dir, last := 0, time.Time{}
			for k := 1; k < len(c); k++ {
				if c[k] == c[k-1] {
					continue
				}
				turn := 1
				if c[k] < c[k-1] {
					turn = -1
				}
				if dir == -turn && at[k].Sub(last) < ReverseHold {
					t.Errorf("seed %d: backend %d moved back %s after its last move (%d → %d)", seed, i, at[k].Sub(last), c[k-1], c[k])
				}
				dir, last = turn, at[k]
			}
		}
	}
}

// TestDegradingBackendDrainsAsUndamped: three settled backends on the
// demo's table (65,537 slots, Δmax 2000); b's latency goes from 20 ms to
// 1 s with a queue that comes and goes every other tick, so its pressure
// and everyone's targets wobble. b is urgent (pressure above
// transitionAbove) from the first tick, so on its way down its count falls
// tick by tick as the undamped step's would, though the others' targets
// turn back every other tick (their gains held, then let go to take b's);
// once there, it never holds more than undamped.
func TestDegradingBackendDrainsAsUndamped(t *testing.T) {
	p := defaults()
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * 200 * time.Millisecond) }
	healthy := func(name string) Sample { return Sample{Name: name, Latency: 0.02} }
	var st State
	var d Decision
	for i := range 60 {
		st, d = Step(p, st, at(i), []Sample{healthy("a"), healthy("b"), healthy("c")})
	}
	// 21845.67 each: the two extra slots to a and b.
	if !slices.Equal(d.Slots, []int{21846, 21846, 21845}) {
		t.Fatalf("settled at %v, want [21846 21846 21845]", d.Slots)
	}
	ref := slices.Clone(d.Slots)
	drained, refDrained := 0, 0
	for i := 60; i < 120; i++ {
		b := Sample{Name: "b", Latency: 1}
		if i%2 == 1 {
			b.Queue, b.Latency = 20, 1.1
		}
		st, d = Step(p, st, at(i), []Sample{healthy("a"), b, healthy("c")})
		ref = ViscousStep(ref, d.Targets, d.DeltaMax)
		if i == 60 {
			// b: latency EWMA 0.02 + 0.3·0.98 = 0.314 → P 3.14; w ∝ 1/0.3,
			// 1/3.24, 1/0.3 → 31318.57, 2899.87, 31318.57 → targets
			// 31319, 2900, 31318; b −2000, a and c +1000 each.
			if !slices.Equal(d.Targets, []int{31319, 2900, 31318}) || !slices.Equal(d.Slots, []int{22846, 19846, 22845}) {
				t.Fatalf("first tick: targets %v slots %v, want [31319 2900 31318] [22846 19846 22845]", d.Targets, d.Slots)
			}
		}
		// On its way down b moves as undamped; where its target turns
		// back up, its gain (a reversal) is held: it only stays lower.
		if d.Slots[1] > ref[1] || ref[1] > d.Targets[1] && d.Slots[1] != ref[1] {
			t.Fatalf("tick %d: b holds %d slots, undamped %d (targets %v)", i-60, d.Slots[1], ref[1], d.Targets)
		}
		if drained == 0 && d.Slots[1] < p.Slots/10 {
			drained = i
		}
		if refDrained == 0 && ref[1] < p.Slots/10 {
			refDrained = i
		}
	}
	if drained == 0 || drained > refDrained {
		t.Errorf("b under 10%% of the table at tick %d, undamped at %d", drained-60, refDrained-60)
	}
	if d.Slots[1] > 4000 {
		t.Errorf("b holds %d slots after 60 ticks of a 1 s latency", d.Slots[1])
	}
}

// TestMustShedRightAfterAGain: b took 10 slots from a's queue blip (a
// reversal of either is held), then, four ticks later, b goes bad. An error
// spike (the penalty) or a saturating queue makes b urgent at once: it
// sheds Δmax that tick, and a's held gain is let go to take it. A latency
// rising slowly is another matter: b's loss is held until its pressure
// reaches transitionAbove (the price of holding reversals: a blip and the
// first ticks of a slow degradation look alike), then sheds at once.
func TestMustShedRightAfterAGain(t *testing.T) {
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * 200 * time.Millisecond) }
	for _, c := range []struct {
		name string
		b    Sample // b's sample from 1 s after the blip
		// the first tick (after the blip) b sheds
		first int
	}{
		// errors EWMA 0.3·0.5 = 0.15 > 5%: P 2·10 + 5 = 25.
		{"an error spike", Sample{Name: "b", ErrorRate: 0.5}, 5},
		// queue 0 → 8 in 0.2 s: EWMA 2.4, rising 12/s, at the limit 5
		// within 1 s: crisis, P lifted to 2.
		{"a saturation forecast", Sample{Name: "b", Queue: 8}, 5},
		// latency 0.15 s: EWMA 0.045, 0.0765, 0.09855, 0.113985 s → P
		// 0.45, 0.765, 0.9855, 1.14: at transitionAbove the fourth tick.
		{"a slow latency", Sample{Name: "b", Latency: 0.15}, 8},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := defaults()
			p.Slots, p.MaxSlotsPerTick = 101, 10
			p.QueueLimit, p.Horizon = 5, time.Second
			st, _ := Step(p, State{}, at(0), []Sample{q("a", 0), q("b", 0)})
			st, d := Step(p, st, at(1), []Sample{q("a", 10), q("b", 0)})
			if !slices.Equal(d.Slots, []int{41, 60}) {
				t.Fatalf("the blip: slots %v, want [41 60]", d.Slots)
			}
			for i := 2; i < 5; i++ {
				st, _ = Step(p, st, at(i), []Sample{q("a", 0), q("b", 0)})
			}
			for i := 5; i <= 12; i++ {
				st, d = Step(p, st, at(i), []Sample{q("a", 0), c.b})
				want := 60
				if i >= c.first {
					want = max(60-10*(i-c.first+1), d.Targets[1])
				}
				if d.Slots[1] != want {
					t.Fatalf("tick %d: b holds %d slots (target %d, pressure %.3g), want %d", i, d.Slots[1], d.Targets[1], d.Pressure[1], want)
				}
			}
		})
	}
}
