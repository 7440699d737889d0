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
	cfg := spec.SimConfig{Seed: 7, Workloads: []spec.SimWorkload{c}}
	w, err := NewWithTrace(cfg, tr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	wl := w.wls[0]
	ow := &oracleWorld{servers: wl.servers, startup: float64(wl.startup), target: target.Seconds(), seed: wl.src.seed}
	var buf []arrival
	for s := range tr.Rate {
		buf = wl.src.second(s, buf[:0])
		sec := make([]oracleArrival, len(buf))
		for i, a := range buf {
			sec[i] = oracleArrival{at: a.at, service: a.cost * wl.svc}
		}
		ow.secs = append(ow.secs, sec)
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
			got := oracleFor(t, c.tr, wl, target).evaluateSeconds(perSecond(c.sched, len(c.tr.Rate)), func(s int, n, over int32) {
				if (sec{n, over}) != world[s] {
					if differ++; differ <= 5 {
						t.Errorf("second %d: the replay served %d requests, %d over; the world %d, %d", s, n, over, world[s].n, world[s].over)
					}
				}
			})
			if want := rep.Targets[0].OverExact; got != want {
				t.Fatalf("the oracle's replay has %d seconds over, the world %d (%d seconds differ)", got, want, differ)
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

// handTrace is an arrival trace of three minutes, each second holding
// burst[m] requests at its start, every request costing the same.
func handTrace(t *testing.T, bursts []int) *Trace {
	t.Helper()
	var b strings.Builder
	b.WriteString("TIMESTAMP,ContextTokens,GeneratedTokens\n")
	base := time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC)
	for m, n := range bursts {
		for s := range 60 {
			at := base.Add(time.Duration(60*m+s) * time.Second)
			for range n {
				fmt.Fprintf(&b, "%s,10,0\n", at.Format("2006-01-02 15:04:05.0000000"))
			}
		}
	}
	return loadCSV(t, b.String(), TraceOptions{})
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
	o, ok, err := FindOracle(cfg, tr, Options{}, "shop", "checkout", 250*time.Millisecond, 50)
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
