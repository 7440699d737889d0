package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/values"
)

// oracleFor builds the oracle's replay of workload c over tr.
func oracleFor(t *testing.T, tr *Trace, c spec.SimWorkload, target time.Duration) *oracleWorld {
	t.Helper()
	w, err := NewWithTrace(spec.SimConfig{Seed: 7, Workloads: []spec.SimWorkload{c}}, tr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ow, err := newOracleWorld(w.wls[0], target, len(tr.Rate))
	if err != nil {
		t.Fatal(err)
	}
	return ow
}

// TestOracleServesAsTheWorld replays per-minute schedules through the
// world itself (its Deployment's replicas set at each minute's start, pods
// ready at once) and through the oracle's replay, and compares every
// second: its requests and those over the target must be the same, or the
// oracle would be judging a different world. Two workloads: a busy one
// (380 → 560 → 380 req/s, 5 servers a pod) and a quiet one near its
// threshold (30–50 req/s, one server a pod, 100 ms each, target 1 s) where
// one request routed to another pod changes a second's count; the
// schedules rise and fall, including by several pods at once (pods tied on
// the second they became ready, which the world and the replay must pick
// from alike).
func TestOracleServesAsTheWorld(t *testing.T) {
	busy := constTrace(380, 600)
	for i := range busy.Rate {
		busy.Rate[i] = 380 + 180*math.Sin(math.Pi*float64(i)/600)
	}
	quiet := constTrace(30, 1200)
	for i := range quiet.Rate {
		quiet.Rate[i] = 40 + 10*math.Sin(2*math.Pi*float64(i)/300)
	}
	fast := deployment("checkout", 4)
	fast.PerPodRPS, fast.ServiceTime, fast.Startup = 120, spec.Duration(40*time.Millisecond), 0
	fast.Targets = []spec.Duration{spec.Duration(250 * time.Millisecond)}
	slow := deployment("checkout", 4)
	slow.PerPodRPS, slow.ServiceTime, slow.Startup = 10, spec.Duration(100*time.Millisecond), 0
	slow.Targets = []spec.Duration{spec.Duration(time.Second)}
	for _, c := range []struct {
		tr    *Trace
		wl    spec.SimWorkload
		sched []int
	}{
		{busy, fast, []int{4, 4, 4, 4, 4, 4, 4, 4, 4, 4}},
		{busy, fast, []int{6, 6, 6, 6, 6, 6, 6, 6, 6, 6}},
		{busy, fast, []int{4, 5, 6, 7, 7, 6, 6, 5, 4, 3}},
		{busy, fast, []int{3, 6, 4, 7, 5, 8, 4, 6, 5, 4}},
		{quiet, slow, []int{8, 6, 9, 5, 11, 7, 6, 10, 5, 8, 6, 9, 7, 5, 11, 6, 8, 5, 7, 6}},
	} {
		t.Run(fmt.Sprint(c.sched), func(t *testing.T) {
			wl := c.wl
			wl.Replicas = c.sched[0]
			w, err := NewWithTrace(spec.SimConfig{Seed: 7, Workloads: []spec.SimWorkload{wl}}, c.tr, Options{})
			if err != nil {
				t.Fatal(err)
			}
			target := wl.Targets[0].D()
			type sec struct{ n, over int32 }
			var world []sec
			for s := range len(c.tr.Rate) {
				if s%60 == 0 {
					w.wls[0].deploy.attrs[AttrReplicas] = values.CountOf(int64(c.sched[s/60]))
				}
				w.AdvanceTo(w.Start().Add(time.Duration(s+1) * time.Second))
				r := w.wls[0].tracker.ring[s%60]
				world = append(world, sec{r.n, r.over[0]})
			}
			rep, _ := w.Report("shop", "checkout")
			differ := 0
			got, measured := oracleFor(t, c.tr, wl, target).evaluateSeconds(perSecond(c.sched, len(c.tr.Rate)), func(s int, n, over int32) {
				if (sec{n, over}) != world[s] {
					if differ++; differ <= 5 {
						t.Errorf("second %d: the replay served %d requests, %d over; the world %d, %d", s, n, over, world[s].n, world[s].over)
					}
				}
			})
			if want := rep.Targets[0].OverExact; got != want || measured != rep.Measured {
				t.Fatalf("the oracle's replay has %d seconds over of %d measured, the world %d of %d (%d seconds differ)", got, measured, want, rep.Measured, differ)
			}
			var late int32
			for _, s := range world {
				late += s.over
			}
			if late == 0 || rep.Targets[0].OverExact == len(c.tr.Rate) {
				t.Fatalf("%d requests late, %d seconds over: the schedule does not test the routing", late, rep.Targets[0].OverExact)
			}
		})
	}
}

// perSecond spreads a per-minute schedule over n seconds.
func perSecond(sched []int, n int) []int {
	out := make([]int, n)
	for s := range out {
		out[s] = sched[s/60]
	}
	return out
}

// handTrace is an arrival trace of whole minutes, each second holding
// burst[m] requests at its start, every request costing the same.
func handTrace(t *testing.T, bursts []int) *Trace {
	t.Helper()
	var per []int
	for _, n := range bursts {
		for range 60 {
			per = append(per, n)
		}
	}
	return secondsTrace(t, per, 0)
}

// secondsTrace is an arrival trace holding per[s] requests at the start
// of second s, every request costing the same, cut to until (0: all); it
// ends with the last second that has a request.
func secondsTrace(t *testing.T, per []int, until time.Duration) *Trace {
	t.Helper()
	var b strings.Builder
	b.WriteString("TIMESTAMP,ContextTokens,GeneratedTokens\n")
	base := time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC)
	for s, n := range per {
		at := base.Add(time.Duration(s) * time.Second)
		for range n {
			fmt.Fprintf(&b, "%s,10,0\n", at.Format("2006-01-02 15:04:05.0000000"))
		}
	}
	return loadCSV(t, b.String(), TraceOptions{Until: until})
}

// TestOracleHandWorked: pods of c = 2 servers (perPodRPS 20 × 100 ms),
// every request 100 ms, target 250 ms, startup 30 s. A pod given k
// requests at once finishes the j-th (from 1) after 100·ceil(j/2) ms, so
// it keeps all within 250 ms when k ≤ 4, whatever the routing.
//   - minute 0: bursts of 4 a second: one pod is enough.
//   - minute 1: bursts of 9: one pod finishes the 5th at 300 ms, and 5 of
//     9 are late each second, so it is over; the oracle replays more pods
//     until it clears (how many depends on the world's random routing: the
//     test replays count−1 and checks it is over).
//   - minute 2: bursts of 2: one pod again.
//
// The cost is by hand: 60·(1 + r + 1) pod-seconds, plus 30 s of startup
// for each of the r − 1 pods started for minute 1.
func TestOracleHandWorked(t *testing.T) {
	tr := handTrace(t, []int{4, 9, 2})
	c := deployment("checkout", 1)
	c.PerPodRPS, c.ServiceTime, c.Startup = 20, spec.Duration(100*time.Millisecond), spec.Duration(30*time.Second)
	c.Targets = []spec.Duration{spec.Duration(250 * time.Millisecond)}
	cfg := spec.SimConfig{Seed: 7, ServiceTimes: ServiceTokens, Workloads: []spec.SimWorkload{c}}
	o, ok, err := FindOracle(cfg, tr, Options{}, "shop", "checkout", 250*time.Millisecond, 50, 0)
	if err != nil || !ok {
		t.Fatalf("FindOracle: %v, ok %v", err, ok)
	}
	if len(o.Replicas) != 3 || o.Replicas[0] != 1 || o.Replicas[2] != 1 || o.Replicas[1] < 2 {
		t.Fatalf("schedule %v: want [1 ≥2 1]", o.Replicas)
	}
	r := o.Replicas[1]
	if want := float64(60*(1+r+1)) + 30*float64(r-1); o.PodSeconds != want || o.Starts != r-1 {
		t.Fatalf("cost %v pod-seconds, %d starts; want %v, %d", o.PodSeconds, o.Starts, want, r-1)
	}
	if !o.Greedy || o.Constant < r {
		t.Fatalf("greedy %v, constant %d: the constant count must be at least minute 1's %d, and dearer", o.Greedy, o.Constant, r)
	}
	ow := oracleFor(t, tr, c, 250*time.Millisecond)
	if n := ow.evaluate(o.Replicas); n != 0 {
		t.Fatalf("the oracle's schedule has %d seconds over", n)
	}
	less := []int{1, r - 1, 1}
	if n := ow.evaluate(less); n == 0 {
		t.Fatalf("%v has no second over: %d pods in minute 1 were not the fewest", less, r)
	}
}

// handPods is the hand-worked tests' workload: pods of c = 2 servers
// (perPodRPS 20 × 100 ms), every request 100 ms, startup 30 s.
func handPods(target time.Duration) (spec.SimConfig, spec.SimWorkload) {
	c := deployment("checkout", 1)
	c.PerPodRPS, c.ServiceTime, c.Startup = 20, spec.Duration(100*time.Millisecond), spec.Duration(30*time.Second)
	c.Targets = []spec.Duration{spec.Duration(target)}
	return spec.SimConfig{Seed: 7, ServiceTimes: ServiceTokens, Workloads: []spec.SimWorkload{c}}, c
}

// TestOracleBacktracks: a minute no count can clear, because the window
// still holds the minute before. Target 150 ms: a pod serves 2 requests at
// once within it, a third waits 100 ms and is late. Minute 0 brings 2
// requests a second and, at second 50, 3: with one pod 1 of the window's
// 103 is late, within the 1% a p99 allows, so one pod clears minute 0.
// Minute 1 is silent until second 110: at second 109 the window holds
// only seconds 50–59 of minute 0, 21 requests with that late one, and
// its p99 is over whatever minute 1 has. Only minute 0 can change that:
// the search must go back and give it more pods.
func TestOracleBacktracks(t *testing.T) {
	var per []int
	for s := range 180 {
		switch {
		case s == 50:
			per = append(per, 3)
		case s >= 60 && s < 110:
			per = append(per, 0)
		default:
			per = append(per, 2)
		}
	}
	tr := secondsTrace(t, per, 0)
	cfg, c := handPods(150 * time.Millisecond)
	o, ok, err := FindOracle(cfg, tr, Options{}, "shop", "checkout", 150*time.Millisecond, 20, 0)
	if err != nil || !ok {
		t.Fatalf("FindOracle: %v, ok %v", err, ok)
	}
	if o.Backtracks == 0 || len(o.Replicas) != 3 || o.Replicas[0] < 2 || o.Replicas[1] != 1 || o.Replicas[2] != 1 || !o.Greedy {
		t.Fatalf("%+v: want minute 0 raised by a backtrack, then one pod", o)
	}
	ow := oracleFor(t, tr, c, 150*time.Millisecond)
	if n := ow.evaluate(o.Replicas); n != 0 {
		t.Fatalf("%v: %d seconds over", o.Replicas, n)
	}
	if n := ow.evaluate([]int{1, 1, 1}); n == 0 {
		t.Fatal("one pod throughout is not over: the case does not need a backtrack")
	}
}

// TestOracleNothingClears: every request takes 1 s against a 250 ms
// target, so no count clears anything: the search says so, and within its
// budget of raises.
func TestOracleNothingClears(t *testing.T) {
	tr := handTrace(t, []int{2, 2, 2})
	cfg, _ := handPods(250 * time.Millisecond)
	cfg.Workloads[0].ServiceTime = spec.Duration(time.Second)
	cfg.Workloads[0].PerPodRPS = 2
	o, ok, err := FindOracle(cfg, tr, Options{}, "shop", "checkout", 250*time.Millisecond, 8, 0)
	if err != nil || ok {
		t.Fatalf("FindOracle: %+v, ok %v, %v: want none found", o, ok, err)
	}
	if o.Backtracks > backtracksPerMinute*3 {
		t.Fatalf("%d raises, over the budget", o.Backtracks)
	}
}

// TestOracleBounds: a workload making more requests than the oracle keeps
// is refused before the search, and a trace cut short (150 s) is searched
// over its two and a half minutes, the last paid for its 30 s.
func TestOracleBounds(t *testing.T) {
	cfg, _ := handPods(250 * time.Millisecond)
	defer func(n int) { maxOracleArrivals = n }(maxOracleArrivals)
	maxOracleArrivals = 100
	if _, _, err := FindOracle(cfg, handTrace(t, []int{4, 4}), Options{}, "shop", "checkout", 250*time.Millisecond, 8, 0); err == nil || !strings.Contains(err.Error(), "more than 100 requests") {
		t.Fatalf("over the bound: %v", err)
	}
	maxOracleArrivals = MaxOracleArrivals
	tr := handTrace(t, []int{4, 9, 2})
	o, ok, err := FindOracle(cfg, tr, Options{}, "shop", "checkout", 250*time.Millisecond, 50, 150)
	if err != nil || !ok || len(o.Replicas) != 3 {
		t.Fatalf("150 s: %+v, %v, %v", o, ok, err)
	}
	r := o.Replicas[1]
	if want := float64(60*1+60*r+30*o.Replicas[2]) + 30*float64(o.Starts); o.PodSeconds != want {
		t.Fatalf("cost %v pod-seconds, want %v (schedule %v)", o.PodSeconds, want, o.Replicas)
	}
}

// TestOracleReactive replays the hand-worked schedule [1 r 1] (4, 9 and 2
// requests at the start of each second of three minutes; startup 30 s) as
// the reactive family. r ≥ 3: on two pods one of them gets at least 5 of
// the 9, and the 5th finishes at 300 ms, 1 late in 9 every second, over a
// p99. So K = max(4/1, 9/r, 2/1) = 4 requests a second a pod, and the
// trailing five seconds' rate gives need(t):
//   - 0–59: 4 → 1 pod;
//   - 60–63: (4·4+9)/5 = 5, (3·4+2·9)/5 = 6, 7, 8 → 1.25–2 → 2 pods;
//   - 64–119: 9 → 2.25 → 3 pods;
//   - 120–122: (4·9+2)/5 = 7.6, 6.2, 4.8 → 1.2–1.9 → 2 pods;
//   - 123–179: 3.4, then 2 → 1 pod.
//
// Paid at floor 1: 60 + 4·2 + 56·3 + 3·2 + 57 = 299 pod-seconds; at floor
// 2: 120 + 8 + 168 + 6 + 114 = 416; at floor 3: 3·180 = 540. The floors
// run to the highest need, 3. At floor 1, seconds 60–89 have one pod
// ready (need(59) = 1 is in their startup window) for 9 requests a
// second: over.
func TestOracleReactive(t *testing.T) {
	tr := handTrace(t, []int{4, 9, 2})
	cfg, c := handPods(250 * time.Millisecond)
	o, ok, err := FindOracle(cfg, tr, Options{}, "shop", "checkout", 250*time.Millisecond, 50, 0)
	if err != nil || !ok {
		t.Fatalf("FindOracle: %v, ok %v", err, ok)
	}
	if r := o.Replicas[1]; r < 3 {
		t.Fatalf("schedule %v: minute 1 needs at least 3 pods", o.Replicas)
	}
	pts := oracleFor(t, tr, c, 250*time.Millisecond).reactive(o.Replicas)
	paid := []float64{299, 416, 540}
	if len(pts) == 0 || len(pts) > len(paid) || pts[0].OverPct <= 0 {
		t.Fatalf("%+v: want floors from 1 to at most 3, floor 1 over", pts)
	}
	for i, p := range pts {
		if p.Floor != i+1 || p.ReplicaHours != paid[i]/3600 {
			t.Errorf("point %d: %+v, want floor %d at %v pod-seconds", i, p, i+1, paid[i])
		}
		if i < len(pts)-1 && p.OverPct == 0 {
			t.Errorf("%+v: the family goes on past a floor never over", pts)
		}
	}
}

// tinyWorld is an oracle world of per[s] requests at the start of each
// second s, 100 ms each, on pods of 2 servers (target 250 ms), startup 2 s.
func tinyWorld(per []int) *oracleWorld { return tinyWorldSpread(per, false) }

// tinyWorldSpread is tinyWorld, with each second's requests spread
// evenly over it (the i-th of n at s + i/n) when spread.
func tinyWorldSpread(per []int, spread bool) *oracleWorld {
	ow := &oracleWorld{servers: 2, startup: 2, target: 0.25, seed: 7}
	for s, n := range per {
		sec := make([]oracleArrival, n)
		for i := range sec {
			sec[i] = oracleArrival{at: float64(s), service: 0.1}
			if spread {
				sec[i].at += float64(i) / float64(n)
			}
		}
		ow.secs = append(ow.secs, sec)
	}
	return ow
}

// TestOracleReactiveStops: the family ends at the first floor never over.
// 60 s of 10 requests a second then 60 s of 19, spread evenly, schedule
// [1 2]: K = max(10/1, 19/2) = 10, so need is 1 through second 59 (rate
// 10) and 2 from second 60 (rate (4·10+19)/5 = 11.8, then up to 19), 180
// pod-seconds at floor 1, and the floors could run to 2. But requests
// are never less than 1/19 s (52.6 ms) apart, so whatever pod one is sent
// to has at most one other in service (100 ms each) and a free server:
// nothing waits, nothing is late, floor 1 is never over and is the only
// member.
func TestOracleReactiveStops(t *testing.T) {
	var per []int
	for s := range 120 {
		per = append(per, map[bool]int{true: 10, false: 19}[s < 60])
	}
	ow := tinyWorldSpread(per, true)
	if need := ow.reactiveNeed(ow.perPodRate([]int{1, 2})); slices.Max(need) != 2 {
		t.Fatalf("highest need %d, want 2", slices.Max(need))
	}
	pts := ow.reactive([]int{1, 2})
	if want := (60*1 + 60*2) / 3600.0; len(pts) != 1 || pts[0] != (ReactivePoint{Floor: 1, ReplicaHours: want}) {
		t.Fatalf("%+v: want floor 1 alone, never over, at %v replica-hours", pts, want)
	}
}

// TestOracleReactiveArithmetic works the reactive family's definition by
// hand on 70 seconds, startup 2 s, schedule [1 3]. Arrivals: second 0 has
// 6, second 1 none, seconds 2–59 two each (122 in minute 0); seconds
// 60–69 have 2 2 12 12 12 12 12 5 3 3 (75 in 10 s). K = max(122/60/1,
// 75/10/3) = max(2.03, 2.5) = 2.5 requests a second a pod.
//
// rate(t) averages [t−4, t], fewer seconds at the start; need(t) =
// max(1, ceil(rate/2.5)); ready at floor 1 is the least need of [t−2, t]:
//
//	t   window           rate       rate/K  need  ready(f1)  ready(f3)
//	0   6                6/1 = 6    2.4     3     3          3
//	1   6 0              6/2 = 3    1.2     2     2          3
//	2   6 0 2            8/3        1.07    2     2          3
//	3   6 0 2 2          10/4 = 2.5 1       1     1          3
//	4   6 0 2 2 2        12/5 = 2.4 0.96    1     1          3
//	5   0 2 2 2 2        8/5 = 1.6  0.64    1     1          3
//	60  2 2 2 2 2        2          0.8     1     1          3
//	62  2 2 2 2 12       4          1.6     2     1          3
//	63  2 2 2 12 12      6          2.4     3     1          3
//	64  2 2 12 12 12     8          3.2     4     2          3
//	65  2 12 12 12 12    10         4       4     3          3
//	66  12 12 12 12 12   12         4.8     5     4          4
//	67  12 12 12 12 5    10.6       4.24    5     4          4
//	68  12 12 12 5 3     8.8        3.52    4     4          4
//	69  12 12 5 3 3      7          2.8     3     3          3
//
// (At 3 and 65 rate/K is 1 and 4 exactly: that many pods, none more.)
// need is 3 2 2, then 1 for seconds 3–61 (59 of them), then 2 3 4 4 5 5 4
// 3 (30). Paid: floor 1 = 7 + 59 + 30 = 96 pod-seconds; floor 2 = 7 + 118
// + 30 = 155; floor 3 = 9 + 177 + (3 3 4 4 5 5 4 3 =) 31 = 217; floor 4 =
// 12 + 236 + (4 4 4 4 5 5 4 4 =) 34 = 282; floor 5 = 5·70 = 350.
func TestOracleReactiveArithmetic(t *testing.T) {
	per := []int{6, 0}
	for range 58 {
		per = append(per, 2)
	}
	per = append(per, 2, 2, 12, 12, 12, 12, 12, 5, 3, 3)
	ow := tinyWorld(per)
	sched := []int{1, 3}
	k := ow.perPodRate(sched)
	if k != 2.5 {
		t.Fatalf("K = %v, want 2.5", k)
	}
	need := ow.reactiveNeed(k)
	base := slidingMin(need, int(ow.startup))
	ready1, ready3 := make([]int, len(need)), make([]int, len(need))
	paid1, paid3 := reactiveAt(need, base, 1, ready1), reactiveAt(need, base, 3, ready3)
	for _, c := range []struct {
		t                    int
		rate                 float64
		need, ready1, ready3 int
	}{
		{0, 6, 3, 3, 3},
		{1, 3, 2, 2, 3},
		{2, 8.0 / 3, 2, 2, 3},
		{3, 2.5, 1, 1, 3},
		{4, 2.4, 1, 1, 3},
		{5, 1.6, 1, 1, 3},
		{60, 2, 1, 1, 3},
		{62, 4, 2, 1, 3},
		{63, 6, 3, 1, 3},
		{64, 8, 4, 2, 3},
		{65, 10, 4, 3, 3},
		{66, 12, 5, 4, 4},
		{67, 10.6, 5, 4, 4},
		{68, 8.8, 4, 4, 4},
		{69, 7, 3, 3, 3},
	} {
		if r := ow.rate(c.t); math.Abs(r-c.rate) > 1e-12 || need[c.t] != c.need || ready1[c.t] != c.ready1 || ready3[c.t] != c.ready3 {
			t.Errorf("second %d: rate %v, need %d, ready %d at floor 1 and %d at floor 3; want %v, %d, %d, %d",
				c.t, r, need[c.t], ready1[c.t], ready3[c.t], c.rate, c.need, c.ready1, c.ready3)
		}
	}
	if paid1 != 96 || paid3 != 217 {
		t.Errorf("paid %v pod-seconds at floor 1 and %v at floor 3, want 96 and 217", paid1, paid3)
	}
	// The family: floors from 1 up to the highest need, 5, each paid as
	// above. Floor 1 is over: at second 62, 12 requests at once find one
	// pod ready, whose 2 servers finish the j-th after 100·ceil(j/2) ms,
	// so 6 are late among the trailing minute's 130 (more than 1%).
	pts := ow.reactive(sched)
	want := []float64{96, 155, 217, 282, 350}
	if len(pts) == 0 || len(pts) > len(want) || pts[0].OverPct <= 0 {
		t.Fatalf("%+v: want floors 1 to at most 5, floor 1 over", pts)
	}
	for i, p := range pts {
		if p.Floor != i+1 || p.ReplicaHours != want[i]/3600 {
			t.Errorf("point %d: %+v, want floor %d at %v pod-seconds", i, p, i+1, want[i])
		}
	}
}

// TestOracleReactiveCausal: need(u), and the pods ready and paid for at u,
// depend on no arrival after u. Random traces (0–20 requests a second,
// random schedules giving K) are cut at random seconds t and everything
// after t drawn again: every second up to t must be unchanged. K is held:
// it is the controller's capacity model, given, not learned from the load.
func TestOracleReactiveCausal(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	changed := false
	for trial := range 20 {
		per := make([]int, 120+rng.IntN(200))
		for s := range per {
			per[s] = rng.IntN(21)
		}
		ow := tinyWorld(per)
		ow.startup = float64(rng.IntN(30))
		sched := make([]int, ow.minutes())
		for m := range sched {
			sched[m] = 1 + rng.IntN(4)
		}
		k := ow.perPodRate(sched)
		need := ow.reactiveNeed(k)
		base := slidingMin(need, int(ow.startup))
		cut := rng.IntN(len(per) - 1)
		after := append([]int(nil), per[:cut+1]...)
		for range len(per) - cut - 1 {
			after = append(after, rng.IntN(21))
		}
		ow2 := tinyWorld(after)
		ow2.startup = ow.startup
		need2 := ow2.reactiveNeed(k)
		base2 := slidingMin(need2, int(ow2.startup))
		for u := 0; u <= cut; u++ {
			if need2[u] != need[u] || base2[u] != base[u] {
				t.Fatalf("trial %d, cut at %d: second %d needs %d (ready %d) after a change at seconds > %d, %d (%d) before",
					trial, cut, u, need2[u], base2[u], cut, need[u], base[u])
			}
		}
		if !slices.Equal(need, need2) {
			changed = true
		}
	}
	if !changed {
		t.Fatal("no change after the cut changed any need: the test tests nothing")
	}
}

// TestOracleReactiveMidMinute: the load rises fivefold at second 40 of
// minute 2 (4 requests at the start of each second, then 20 from second
// 160 to 239, then 4 again), pods of 2 servers at 100 ms, target 250 ms,
// startup 20 s. K = 4 (minutes 0–1, one pod for 4 a second), so need is 1
// through second 159; the reactive controller at floor 1 starts pods from
// second 160 and has one ready until 180: 20 requests at once on 2
// servers, the j-th done after 100·ceil(j/2) ms, 16 of them late each
// second, and seconds 160–179 are over. The old definition (a minute's
// pods started at its first second, ready from 140) had the oracle's
// pods for minute 2 ready at the onset, and none of those seconds over.
func TestOracleReactiveMidMinute(t *testing.T) {
	var per []int
	for s := range 300 {
		per = append(per, map[bool]int{true: 20, false: 4}[s >= 160 && s < 240])
	}
	tr := secondsTrace(t, per, 0)
	target := 250 * time.Millisecond
	cfg, c := handPods(target)
	cfg.Workloads[0].Startup = spec.Duration(20 * time.Second)
	c.Startup = cfg.Workloads[0].Startup
	o, ok, err := FindOracle(cfg, tr, Options{}, "shop", "checkout", target, 50, 0)
	if err != nil || !ok {
		t.Fatalf("FindOracle: %v, ok %v", err, ok)
	}
	ow := oracleFor(t, tr, c, target)
	if k := ow.perPodRate(o.Replicas); k != 4 {
		t.Fatalf("K = %v (schedule %v), want 4", k, o.Replicas)
	}
	need := ow.reactiveNeed(4)
	ready := make([]int, len(need))
	reactiveAt(need, slidingMin(need, 20), 1, ready)
	old := make([]int, len(need))
	for s := range old {
		old[s] = o.Replicas[s/60]
		for m := max(s-20, 0) / 60; m < s/60; m++ {
			old[s] = min(old[s], o.Replicas[m])
		}
	}
	onset := func(ready []int) (over int) {
		for _, v := range overBySecond(ow, ready)[160:180] {
			if v {
				over++
			}
		}
		return over
	}
	if n := onset(ready); n == 0 || ready[160] != 1 || ready[179] != 1 {
		t.Errorf("reactive at floor 1: %d of seconds 160–179 over, %d–%d pods ready: want over, one pod", n, ready[160], ready[179])
	}
	if n := onset(old); n != 0 {
		t.Errorf("the old definition (pods %v) has %d of seconds 160–179 over: the case does not tell them apart", old[155:165], n)
	}
	if pts := ow.reactive(o.Replicas); len(pts) == 0 || pts[0].Floor != 1 || pts[0].OverPct <= 0 {
		t.Errorf("%+v: want floor 1 over", pts)
	}
}

// overBySecond replays ready second by second and says which seconds'
// trailing-minute p99 is over the target.
func overBySecond(ow *oracleWorld, ready []int) []bool {
	n, late := make([]int64, len(ready)), make([]int64, len(ready))
	ow.evaluateSeconds(ready, func(s int, sn, sover int32) { n[s], late[s] = int64(sn), int64(sover) })
	out := make([]bool, len(ready))
	var wn, wl int64
	for s := range ready {
		wn, wl = wn+n[s], wl+late[s]
		if s >= 60 {
			wn, wl = wn-n[s-60], wl-late[s-60]
		}
		out[s] = p99Over(wn, wl)
	}
	return out
}
