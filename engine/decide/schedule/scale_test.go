package schedule

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestRecommend(t *testing.T) {
	avg := Trigger{Name: "rps_per_pod", Type: AverageValue, Target: 50}
	val := Trigger{Name: "queue", Type: Value, Target: 50}
	ok := func(v float64) Reading { return Reading{Value: v, OK: true} }
	for _, c := range []struct {
		name     string
		current  int
		triggers []Trigger
		readings []Reading
		want     int
	}{
		// ceil(120 / 50) = 3.
		{"average value", 2, []Trigger{avg}, []Reading{ok(120)}, 3},
		// ceil(4 × 75 / 50) = 6.
		{"value", 4, []Trigger{val}, []Reading{ok(75)}, 6},
		// At 0 replicas a Value trigger counts one: ceil(1 × 120 / 50) = 3.
		{"value from zero", 0, []Trigger{val}, []Reading{ok(120)}, 3},
		// 105 over 2 pods is 52.5 a pod, 5% over 50: within 10%, stays 2.
		{"within tolerance", 2, []Trigger{avg}, []Reading{ok(105)}, 2},
		// 115 / 2 = 57.5, 15% over: ceil(115 / 50) = 3.
		{"outside tolerance", 2, []Trigger{avg}, []Reading{ok(115)}, 3},
		// The max over triggers: 3 and 6.
		{"max over triggers", 4, []Trigger{avg, val}, []Reading{ok(120), ok(75)}, 6},
		// A missing trigger blocks the decrease the other asks (1 < 3).
		{"missing blocks a decrease", 3, []Trigger{avg, val}, []Reading{ok(40), {}}, 3},
		// ... but not an increase.
		{"missing does not block an increase", 3, []Trigger{avg, val}, []Reading{ok(250), {}}, 5},
		{"NaN blocks", 3, []Trigger{avg, val}, []Reading{ok(40), ok(math.NaN())}, 3},
		{"Inf blocks", 3, []Trigger{avg, val}, []Reading{ok(40), ok(math.Inf(1))}, 3},
		{"negative blocks", 3, []Trigger{avg, val}, []Reading{ok(40), ok(-1)}, 3},
		{"nothing usable keeps current", 3, []Trigger{avg}, []Reading{{}}, 3},
		// Zero load: ceil(0 / 50) = 0, the metrics agree to zero.
		{"zero", 2, []Trigger{avg}, []Reading{ok(0)}, 0},
	} {
		got, why := Recommend(c.current, c.triggers, c.readings, 0.1)
		if got != c.want {
			t.Errorf("%s: %d, want %d (%s)", c.name, got, c.want, why)
		}
	}
	_, why := Recommend(2, []Trigger{avg, val}, []Reading{ok(120), {}}, 0.1)
	if !strings.Contains(why, "rps_per_pod: 120 against target 50 (AverageValue): 3") || !strings.Contains(why, "queue: no usable value (missing)") {
		t.Fatalf("why: %s", why)
	}
}

var t0 = utc("2026-01-15T12:00:00Z")

func TestStabilize(t *testing.T) {
	for _, c := range []struct {
		name             string
		current, desired int
		up, down         time.Duration
		history          []Recommendation
		want             int
	}{
		// The max over the last 300 s (8) is the least it falls to.
		{"down window", 8, 3, 0, 300 * time.Second, []Recommendation{{t0.Add(-200 * time.Second), 8}, {t0.Add(-100 * time.Second), 6}}, 8},
		// Outside the window, ignored: max(3, 6) = 6.
		{"down window expired", 8, 3, 0, 300 * time.Second, []Recommendation{{t0.Add(-400 * time.Second), 9}, {t0.Add(-100 * time.Second), 6}}, 6},
		// The min over the last 60 s (4) is the most it rises to.
		{"up window", 2, 10, 60 * time.Second, 0, []Recommendation{{t0.Add(-30 * time.Second), 4}}, 4},
		{"no windows", 5, 2, 0, 0, []Recommendation{{t0.Add(-time.Second), 9}}, 2},
	} {
		got, keep := Stabilize(t0, c.current, c.desired, c.up, c.down, c.history)
		if got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
		if last := keep[len(keep)-1]; last.Replicas != c.desired || !last.At.Equal(t0) {
			t.Errorf("%s: this recommendation not kept: %+v", c.name, keep)
		}
	}
}

// The HPA documentation's examples, recomputed.
func TestLimit(t *testing.T) {
	down := Rules{Select: SelectMax, Policies: []Policy{{Pods, 4, 60 * time.Second}, {Percent, 10, 60 * time.Second}}}
	up := Rules{Select: SelectMax, Policies: []Policy{{Percent, 100, 15 * time.Second}, {Pods, 4, 15 * time.Second}}}
	for _, c := range []struct {
		name             string
		current, desired int
		rules            Rules
		events           []Event
		want             int
		bound            string
	}{
		// 80 → 10: Pods allows 76, Percent int(80 × 0.9) = 72; Max takes
		// the larger change: 72.
		{"down, percent wins above 40", 80, 10, down, nil, 72, "Percent 10 per 1m0s"},
		// 72 → 10 a period later: 68 or int(64.8) = 64.
		{"down, next period", 72, 10, down, []Event{{t0.Add(-61 * time.Second), -8}}, 64, "Percent 10 per 1m0s"},
		// Within the period the 8 already removed count: from 80 again,
		// the limit is 72, which it is at: no further change.
		{"down, change made within the period", 72, 10, down, []Event{{t0.Add(-30 * time.Second), -8}}, 72, "Percent 10 per 1m0s"},
		// Below 40, Pods wins: 30 → 26 (Percent: int(27)).
		{"down, pods wins below 40", 30, 10, down, nil, 26, "Pods 4 per 1m0s"},
		// Min picks the smaller change: 80 → 76.
		{"down, select min", 80, 10, Rules{Select: SelectMin, Policies: down.Policies}, nil, 76, "Pods 4 per 1m0s"},
		// Up from 1: Percent allows 2, Pods 5; Max: 5.
		{"up, pods wins when small", 1, 20, up, nil, 5, "Pods 4 per 15s"},
		// Up from 10: 20 or 14; Max: 20.
		{"up, percent wins when large", 10, 40, up, nil, 20, "Percent 100 per 15s"},
		{"up, select min", 10, 40, Rules{Select: SelectMin, Policies: up.Policies}, nil, 14, "Pods 4 per 15s"},
		// Up within its period: 4 added 5 s ago; from 6: Percent allows
		// ceil(2 × 2) = 4, Pods 2 + 4 = 6: no more now.
		{"up, change made within the period", 6, 40, up, []Event{{t0.Add(-5 * time.Second), 4}}, 6, "Pods 4 per 15s"},
		{"within the limit", 10, 12, up, nil, 12, ""},
		{"disabled", 5, 2, Rules{Select: SelectDisabled, Policies: down.Policies}, nil, 5, "scale down disabled"},
		{"no policies: no limit", 80, 1, Rules{Select: SelectMax}, nil, 1, ""},
	} {
		got, bound := Limit(t0, c.current, c.desired, c.rules, c.events)
		if got != c.want || bound != c.bound {
			t.Errorf("%s: %d (%q), want %d (%q)", c.name, got, bound, c.want, c.bound)
		}
	}
}

// A bound holds for any history: a policy's limit is never exceeded
// within its period, whatever was done before in it.
func TestLimitNeverExceedsAPeriod(t *testing.T) {
	rules := Rules{Select: SelectMax, Policies: []Policy{{Pods, 3, 60 * time.Second}}}
	current := 10
	var events []Event
	now := t0
	for step := range 20 {
		now = now.Add(7 * time.Second)
		next, _ := Limit(now, current, 1000, rules, events)
		events = append(events, Event{now, next - current})
		current = next
		added := changeWithin(now, 60*time.Second, events)
		if added > 3 {
			t.Fatalf("step %d: %d added within a minute, the policy allows 3", step, added)
		}
	}
}

func TestScaleAndHistory(t *testing.T) {
	b := Behavior{
		Up:   Rules{Select: SelectMax, Policies: []Policy{{Pods, 4, 15 * time.Second}}},
		Down: Rules{Stabilization: 300 * time.Second, Select: SelectMin, Policies: []Policy{{Percent, 50, 30 * time.Second}}},
	}
	var h History
	// 2 → 20 wanted: +4 by the Pods policy, and the max 5 after it.
	n, h, why := Scale(t0, 2, 20, 0, 5, b, h)
	if n != 5 || !strings.Contains(why, "6 by policy Pods 4 per 15s") || !strings.Contains(why, "max 5") {
		t.Fatalf("up: %d %s", n, why)
	}
	h = Applied(t0, 2, 5, h)
	// A minute later the raw recommendation is 1, but the window holds
	// the 20 of a minute ago: no decrease.
	n, h, why = Scale(t0.Add(time.Minute), 5, 1, 0, 5, b, h)
	if n != 5 || !strings.Contains(why, "raw 1, stabilized 5") {
		t.Fatalf("down inside the window: %d %s", n, why)
	}
	// Past the window (5 min after the 20): 50% of 5 is int(2.5) = 2.
	n, h, why = Scale(t0.Add(301*time.Second), 5, 1, 0, 5, b, h)
	if n != 2 {
		t.Fatalf("down after the window: %d %s", n, why)
	}
	if len(h.Recommendations) > 3 || len(h.Events) != 0 {
		t.Fatalf("history not trimmed: %+v", h)
	}
}

func TestDecideCombines(t *testing.T) {
	avg := []Trigger{{Name: "rps", Type: AverageValue, Target: 50}}
	ok := func(v float64) []Reading { return []Reading{{Value: v, OK: true}} }
	b := Behavior{Up: Rules{Select: SelectMax}, Down: Rules{Select: SelectMin}}
	for _, c := range []struct {
		name     string
		zero     Zero
		current  int
		min      int
		readings []Reading
		want     int
	}{
		// At zero the metrics do not run: the 0→N decision wakes it.
		{"wake from zero", Zero{Proposed: 1}, 0, 0, ok(500), 1},
		{"asleep stays asleep", Zero{Idle: true, Proposed: 0}, 0, 0, ok(500), 0},
		// Awake: ceil(300 / 50) = 6.
		{"awake, metrics size it", Zero{Proposed: 2}, 2, 0, ok(300), 6},
		// Awake, little load: ceil(20 / 50) = 1, atStart 2 holds.
		{"awake, at least atStart", Zero{Proposed: 2}, 3, 0, ok(20), 2},
		// Idle and the metrics say 0: both agree, to zero.
		{"idle, metrics agree", Zero{Idle: true, Proposed: 0}, 2, 0, ok(0), 0},
		// Idle but the metrics want ceil(120 / 50) = 3: they veto.
		{"idle, metrics veto", Zero{Idle: true, Proposed: 0}, 2, 0, ok(120), 3},
		// Idle with a little load: ceil(10 / 50) = 1, at least 1.
		{"idle, metrics keep one", Zero{Idle: true, Proposed: 0}, 2, 0, ok(10), 1},
		// Idle with min 2: max(2, metrics).
		{"idle, min", Zero{Idle: true, Proposed: 2}, 4, 2, ok(0), 2},
		// Idle, the metric missing: no decrease.
		{"idle, no data", Zero{Idle: true, Proposed: 0}, 3, 0, []Reading{{}}, 3},
	} {
		got, _, why := Decide(Input{Now: t0, Zero: c.zero, Current: c.current, Min: c.min, Max: 10, AtStart: 2,
			Triggers: avg, Readings: c.readings, Tolerance: 0.1, Behavior: b})
		if got != c.want {
			t.Errorf("%s: %d, want %d (%s)", c.name, got, c.want, why)
		}
	}
}

// TestCompactChangesNothing: over random histories, Stabilize gives the
// same count from the compacted history as from the whole one, at every
// later time, and the compacted history holds at most two entries per
// count.
func TestCompactChangesNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for run := 0; run < 200; run++ {
		var full []Recommendation
		at := t0
		for i := 0; i < 300; i++ {
			at = at.Add(time.Duration(1+rng.IntN(20)) * time.Second)
			full = append(full, Recommendation{At: at, Replicas: 1 + rng.IntN(12)})
		}
		short := Compact(full, 1000)
		if len(short) > 2*12 {
			t.Fatalf("run %d: %d entries kept for 12 counts", run, len(short))
		}
		for _, later := range []time.Duration{0, 30 * time.Second, 2 * time.Minute, 5 * time.Minute, 20 * time.Minute} {
			now := at.Add(later)
			for cur := 1; cur <= 12; cur += 3 {
				for des := 1; des <= 12; des += 4 {
					a, _ := Stabilize(now, cur, des, 3*time.Minute, 5*time.Minute, full)
					b, _ := Stabilize(now, cur, des, 3*time.Minute, 5*time.Minute, short)
					if a != b {
						t.Fatalf("run %d, +%s, %d → %d: %d from the whole history, %d compacted", run, later, cur, des, a, b)
					}
				}
			}
		}
	}
}

// TestRecommendHugeValues: a value far beyond any count (or a tiny
// target) recommends as many as allowed, never an overflowed negative.
func TestRecommendHugeValues(t *testing.T) {
	for _, tr := range []Trigger{{Name: "a", Type: AverageValue, Target: 1e-9}, {Name: "v", Type: Value, Target: 1}} {
		rec, why := Recommend(2, []Trigger{tr}, []Reading{{Value: 1e19, OK: true}}, 0.1)
		if rec != maxCount {
			t.Errorf("%s: %d (%s); want %d", tr.Type, rec, why, maxCount)
		}
	}
}

// TestLimitCountsBothDirections: the replicas at the start of a period are
// current − (scaled up) + (scaled down) within it, as the HPA counts
// them. Each case's numbers are worked out by hand; "one-way" is what
// counting only the direction of the move would give.
func TestLimitCountsBothDirections(t *testing.T) {
	at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
	pods4 := []Policy{{Pods, 4, time.Minute}}
	for _, c := range []struct {
		name             string
		current, desired int
		rules            Rules
		events           []Event
		want             int
		bound            string
	}{
		// 6 → 10 at −40 s, 10 → 6 at −20 s: the period started at
		// 6 − 4 + 4 = 6, Pods 4 allows 10, the whole way. (One-way: the +4
		// alone, from 2: 6, no change.)
		{"up after an up undone", 6, 10, Rules{Select: SelectMax, Policies: pods4},
			[]Event{{at(-40), 4}, {at(-20), -4}}, 10, ""},
		// Mirrored: 6 → 2 at −40 s, 2 → 6 at −20 s; from 6, Pods 4 allows
		// 2. (One-way: from 10, 6, no change.)
		{"down after a down undone", 6, 1, Rules{Select: SelectMin, Policies: pods4},
			[]Event{{at(-40), -4}, {at(-20), 4}}, 2, "Pods 4 per 1m0s"},
		// 4 → 6 at −50 s, 6 → 3 at −10 s: start 3 − 2 + 3 = 4,
		// ceil(4 × 1.5) = 6. (One-way: from 1, ceil(1.5) = 2, under 3.)
		{"percent up, net of both", 3, 10, Rules{Select: SelectMax, Policies: []Policy{{Percent, 50, time.Minute}}},
			[]Event{{at(-50), 2}, {at(-10), -3}}, 6, "Percent 50 per 1m0s"},
		// 4 → 8 at −30 s: start 8 − 4 = 4, int(4 × 0.5) = 2. (One-way:
		// from 8, 4.)
		{"percent down after an up", 8, 1, Rules{Select: SelectMin, Policies: []Policy{{Percent, 50, time.Minute}}},
			[]Event{{at(-30), 4}}, 2, "Percent 50 per 1m0s"},
		// The +4 at −70 s is out of the period, the −2 at −30 s in it:
		// start 8 + 2 = 10, Pods 4 allows 14. (One-way: from 8, 12.)
		{"a down in the period raises the start", 8, 20, Rules{Select: SelectMax, Policies: pods4},
			[]Event{{at(-70), 4}, {at(-30), -2}}, 14, "Pods 4 per 1m0s"},
		// An event exactly a period ago is out of it (the HPA's cut-off is
		// strict): from 10, 14.
		{"the period's edge", 10, 20, Rules{Select: SelectMax, Policies: pods4},
			[]Event{{at(-60), 4}}, 14, "Pods 4 per 1m0s"},
		// Two policies, 6 → 4 at −30 s: Pods 2 per 60 s starts at 6 and
		// allows 8; Percent 50 per 15 s starts at 4 and allows
		// ceil(4 × 1.5) = 6. Max takes 8. (One-way: Pods from 4, 6.)
		{"select max over mixed periods", 4, 20, Rules{Select: SelectMax, Policies: []Policy{{Pods, 2, time.Minute}, {Percent, 50, 15 * time.Second}}},
			[]Event{{at(-30), -2}}, 8, "Pods 2 per 1m0s"},
		// ... and Min takes 6.
		{"select min over mixed periods", 4, 20, Rules{Select: SelectMin, Policies: []Policy{{Pods, 2, time.Minute}, {Percent, 50, 15 * time.Second}}},
			[]Event{{at(-30), -2}}, 6, "Percent 50 per 15s"},
		// More added than the policy allows from the start (an earlier
		// decision under other rules): the limit is below current, which
		// never forces a decrease: it stays.
		{"spent: stays", 9, 12, Rules{Select: SelectMax, Policies: pods4},
			[]Event{{at(-40), 6}, {at(-20), -1}}, 9, "Pods 4 per 1m0s"},
	} {
		got, bound := Limit(t0, c.current, c.desired, c.rules, c.events)
		if got != c.want || bound != c.bound {
			t.Errorf("%s: %d (%q), want %d (%q)", c.name, got, bound, c.want, c.bound)
		}
	}
}

// TestLimitFromThePeriodStart: random moves both ways under Pods 3 per
// 60 s each way, a tick every 7 s; at each tick the count a period ago is
// read from the trajectory itself (not from the log), and a move beyond
// the pace goes exactly to that count ± 3 (or stays, when that is behind
// it).
func TestLimitFromThePeriodStart(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	pol := []Policy{{Pods, 3, time.Minute}}
	up, down := Rules{Select: SelectMax, Policies: pol}, Rules{Select: SelectMin, Policies: pol}
	type point struct {
		at time.Time
		n  int
	}
	cur := 10
	traj := []point{{t0, cur}}
	countAt := func(at time.Time) int { // the count once everything at or before at was done
		n := traj[0].n
		for _, p := range traj {
			if !p.at.After(at) {
				n = p.n
			}
		}
		return n
	}
	var events []Event
	now := t0
	for step := range 500 {
		now = now.Add(7 * time.Second)
		des := 1 + rng.IntN(30)
		if des == cur {
			continue
		}
		rules := down
		if des > cur {
			rules = up
		}
		got, _ := Limit(now, cur, des, rules, events)
		start := countAt(now.Add(-time.Minute))
		want := des
		if des > cur && des > start+3 {
			want = max(start+3, cur)
		}
		if des < cur && des < start-3 {
			want = min(start-3, cur)
		}
		if got != want {
			t.Fatalf("step %d: %d → %d wanted, count a minute ago %d: got %d, want %d", step, cur, des, start, got, want)
		}
		if got != cur {
			events = append(events, Event{now, got - cur})
			traj = append(traj, point{now, got})
			cur = got
		}
	}
}

// TestStabilizeSeedsCurrent: with no recommendation stored, the current
// count is recorded first (at now), as the HPA does for a target it has
// not seen; a later call with a history does not add it again.
func TestStabilizeSeedsCurrent(t *testing.T) {
	for _, c := range []struct {
		name             string
		current, desired int
		up, down         time.Duration
		want             int
	}{
		// The seed 8 is in the 300 s window: max(3, 8) = 8, no decrease
		// yet.
		{"first scale-down waits", 8, 3, 0, 300 * time.Second, 8},
		// Without windows the seed (at now) is in none of them.
		{"no windows", 8, 3, 0, 0, 3},
		// A scale-up window: min(10, 2) = 2, no increase yet.
		{"first scale-up waits its window", 2, 10, 60 * time.Second, 0, 2},
		// No scale-up window (the default): at once.
		{"first scale-up, no window", 2, 10, 0, 300 * time.Second, 10},
	} {
		got, keep := Stabilize(t0, c.current, c.desired, c.up, c.down, nil)
		if got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
		if c.up+c.down > 0 && (len(keep) != 2 || keep[0] != (Recommendation{t0, c.current}) || keep[1] != (Recommendation{t0, c.desired})) {
			t.Errorf("%s: kept %+v, want the seed then this one", c.name, keep)
		}
	}
	// Past the window the seed is gone: 3.
	_, keep := Stabilize(t0, 8, 3, 0, 300*time.Second, nil)
	if got, _ := Stabilize(t0.Add(301*time.Second), 8, 3, 0, 300*time.Second, keep); got != 3 {
		t.Errorf("after the window: %d, want 3", got)
	}
}

// TestStaleRecommendationsStayGone pins which recommendations are kept:
// one older than both windows is dropped, and does not come back when a
// window is lengthened. (The HPA overwrites one stale slot per sync and
// leaves the others: its 9 at −200 s would count again in a 300 s
// window.) Down window 60 s, no up window.
func TestStaleRecommendationsStayGone(t *testing.T) {
	hist := []Recommendation{{t0.Add(-200 * time.Second), 9}, {t0.Add(-120 * time.Second), 7}, {t0.Add(-30 * time.Second), 5}}
	// max(2, 5) = 5: the 9 and the 7 are out of the window, and dropped.
	got, keep := Stabilize(t0, 10, 2, 0, time.Minute, hist)
	want := []Recommendation{{t0.Add(-30 * time.Second), 5}, {t0, 2}}
	if got != 5 || len(keep) != len(want) || keep[0] != want[0] || keep[1] != want[1] {
		t.Fatalf("at t0: %d, kept %+v; want 5, kept %+v", got, keep, want)
	}
	// 10 s later the window is 300 s: it would hold the 9 (−210 s) and the
	// 7 (−130 s); kept are the 5 (−40 s) and the 2 (−10 s): max(2, 5, 2)
	// = 5, not 9.
	if got, _ := Stabilize(t0.Add(10*time.Second), 10, 2, 0, 300*time.Second, keep); got != 5 {
		t.Fatalf("with the window lengthened: %d, want 5 (the dropped 9 stays gone)", got)
	}
}

// TestEventsKeptForEveryPeriod pins which scale events are kept: each
// until it has left the longest period of either direction, since a
// period's start count is current − the ups + the downs made within it.
// (The HPA overwrites an event once it has left its own direction's
// longest period, which can still be within the other direction's.) Up:
// Pods 4 per 15 s; down: Pods 1 per 10 min.
func TestEventsKeptForEveryPeriod(t *testing.T) {
	b := Behavior{
		Up:   Rules{Select: SelectMax, Policies: []Policy{{Pods, 4, 15 * time.Second}}},
		Down: Rules{Select: SelectMax, Policies: []Policy{{Pods, 1, 10 * time.Minute}}},
	}
	at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
	events := []Event{{at(-700), -1}, {at(-60), 4}, {at(-5), 4}}
	kept := KeepEvents(t0, events, b)
	// The −1 at −700 s has left both periods; the +4 at −60 s has left the
	// up period but not the down one.
	if len(kept) != 2 || kept[0] != events[1] || kept[1] != events[2] {
		t.Fatalf("kept %+v; want the two +4s", kept)
	}
	// 13 → 1: the down period started at 13 − 4 − 4 = 5, Pods 1 allows 4.
	// (Without the +4 at −60 s: from 9, 8.)
	if got, bound := Limit(t0, 13, 1, b.Down, kept); got != 4 {
		t.Fatalf("13 → 1: %d (%s), want 4", got, bound)
	}
	// With no policy in either direction nothing reads the log: none kept.
	if kept := KeepEvents(t0, events, Behavior{}); len(kept) != 0 {
		t.Fatalf("no policies: kept %+v, want none", kept)
	}
}
