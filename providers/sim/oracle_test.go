package sim

import (
	"fmt"
	"math"
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

// TestOracleReactive replays the hand-worked schedule [1 r 1] as a
// controller that can only react gets it (startup 30 s): minute 1's extra
// pods serve only from second 90, so its first 30 s of 9 requests a second
// fall on one pod and are over; paid from their start, the pods cost
// 60 + 60r + 60 pod-seconds at floor 1, and each floor up to r is tried
// until one is never over.
func TestOracleReactive(t *testing.T) {
	tr := handTrace(t, []int{4, 9, 2})
	cfg, c := handPods(250 * time.Millisecond)
	o, ok, err := FindOracle(cfg, tr, Options{}, "shop", "checkout", 250*time.Millisecond, 50, 0)
	if err != nil || !ok {
		t.Fatalf("FindOracle: %v, ok %v", err, ok)
	}
	r := o.Replicas[1]
	pts := oracleFor(t, tr, c, 250*time.Millisecond).reactive(o.Replicas)
	if len(pts) == 0 || pts[0].Floor != 1 || pts[0].ReplicaHours != float64(60+60*r+60)/3600 || pts[0].OverPct <= 0 {
		t.Fatalf("floor 1: %+v, want %v replica-hours and time over", pts, float64(60+60*r+60)/3600)
	}
	last := pts[len(pts)-1]
	if len(pts) > r || last.OverPct != 0 && last.Floor != r {
		t.Fatalf("%+v: want floors up to the first never over, at most %d", pts, r)
	}
	for i, p := range pts[1:] {
		if p.Floor != pts[i].Floor+1 || p.ReplicaHours < pts[i].ReplicaHours {
			t.Fatalf("%+v: floors rise one at a time and cost no less", pts)
		}
	}
}
