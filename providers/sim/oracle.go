package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/setpoint-dev/setpoint/cue/spec"
)

// The hindsight bound. An oracle knows every request the world will make
// (arrival time and service time) and chooses, for each minute of the
// trace, how many pods are ready through it. Its pods are started ahead of
// need, so each is ready from the first second of its minute, and each pod
// started after the trace began is paid for from its start (startup
// seconds before it is ready); the pods ready at the trace's start are paid
// from the start, as every other replay's initial pods are. Requests are
// served exactly as the world serves them (the same arrivals, the same
// random choice of pod, the same servers), and a schedule is admissible
// when no second's exact trailing-minute p99 is over the target: the
// metric every replay is judged by, at 0%.
//
// The search is greedy in time, with backtracking: minute by minute, the
// fewest pods under which none of the minute's seconds is over, given the
// minutes before; when no count up to the cap clears a minute (the window
// still holds the previous minute's late requests) the previous minute gets
// one pod more and is searched again, up to maxBacktrack minutes back. The
// best constant schedule is searched too (the cheapest fixed count at 0%
// over), and the oracle is the cheaper of the two, so it is never above
// it. Greedy is not guaranteed to be the least of all schedules (more pods
// in one minute could allow fewer in the next), so the oracle is an upper
// bound on that least; ratios to it understate how far a policy is from
// the true optimum, never overstate it.

// Bounds of the oracle's search.
const (
	// MaxOracleArrivals bounds the requests the oracle keeps in memory (16
	// bytes each): it replays every minute several times.
	MaxOracleArrivals = 10_000_000
	// maxBacktrack bounds how many minutes back a stuck minute may raise,
	// and backtracksPerMinute the raises of a whole search (each replays a
	// minute or more), so a schedule nothing clears ends in bounded time.
	maxBacktrack        = 5
	backtracksPerMinute = 20
	// maxReactiveFloors bounds the reactive replays (each is the whole
	// trace once).
	maxReactiveFloors = 32
)

// Oracle is the hindsight bound for one workload.
type Oracle struct {
	// Replicas is the ready pods in each minute (the last may be partial).
	Replicas []int `json:"replicas"`
	// PodSeconds is what the schedule costs: each minute's pods for its
	// seconds, plus startup seconds for every pod started after the
	// trace's start.
	PodSeconds float64 `json:"podSeconds"`
	Starts     int     `json:"starts"`
	// Constant is the cheapest constant count at 0% over (0: none up to
	// the cap), and Greedy whether the greedy schedule beat it.
	Constant int  `json:"constant"`
	Greedy   bool `json:"greedy"`
	// Backtracks counts the minutes raised after a later one was stuck.
	Backtracks int `json:"backtracks"`
	// Reactive is the reactive family: a controller that can only react
	// to the load it has seen, given the oracle's capacity per pod, at
	// each floor of pods kept (see oracleWorld.reactive).
	Reactive []ReactivePoint `json:"reactive,omitempty"`
}

// ReplicaHours is the oracle's cost in pod-hours.
func (o Oracle) ReplicaHours() float64 { return o.PodSeconds / 3600 }

// oracleArrival is a request as the oracle replays it: when it came, its
// service time (seconds).
type oracleArrival struct {
	at, service float64
}

// oracleState is everything serving depends on at a minute's start.
type oracleState struct {
	pods  []oraclePod
	route rand.PCG
	ring  [60]oracleSec
	n     int64 // requests in the trailing minute
	over  int64 // of which over the target
}

type oracleSec struct{ n, over int32 }

// oraclePod is a pod of a replay: its servers and the second it became
// ready (which scaleDown ranks it by, as the world does).
type oraclePod struct {
	free    servers
	readyAt int
}

func (s *oracleState) clone() *oracleState {
	c := &oracleState{route: s.route, ring: s.ring, n: s.n, over: s.over, pods: make([]oraclePod, len(s.pods))}
	for i, p := range s.pods {
		c.pods[i] = oraclePod{free: append(servers(nil), p.free...), readyAt: p.readyAt}
	}
	return c
}

// oracleWorld replays one workload's requests for the oracle.
type oracleWorld struct {
	secs    [][]oracleArrival // by second
	servers int
	startup float64
	target  float64
	seed    uint64
}

// FindOracle searches the hindsight bound of the workload namespace/name
// of cfg over the first seconds of tr (0: all of it) — tr and cfg as the
// run had them, so the requests are the run's — against a p99 target, with
// at most maxPods pods. It fails when the workload is not in cfg or its
// requests are too many to keep; ok is false when no schedule up to
// maxPods meets the target (not even maxPods from start to end).
func FindOracle(cfg spec.SimConfig, tr *Trace, o Options, namespace, name string, target time.Duration, maxPods, seconds int) (Oracle, bool, error) {
	maxPods = min(max(maxPods, 1), MaxPodsPerWorkload)
	// The workload alone, with nothing scaling it: only its requests and
	// how a pod serves them are used. Its kind, namespace and name stay:
	// they seed its draws.
	cfg.RouteGroups, cfg.Nodes, cfg.Fleets = nil, nil, nil
	var one []spec.SimWorkload
	for _, c := range cfg.Workloads {
		if c.Namespace == namespace && c.Name == name {
			c.HPA, c.Knative, c.Replicas = nil, nil, 1
			one = append(one, c)
		}
	}
	if len(one) != 1 {
		return Oracle{}, false, fmt.Errorf("oracle: no sim workload %s/%s", namespace, name)
	}
	cfg.Workloads = one
	w, err := NewWithTrace(cfg, tr, o)
	if err != nil {
		return Oracle{}, false, fmt.Errorf("oracle: %w", err)
	}
	if seconds <= 0 || seconds > len(tr.Rate) {
		seconds = len(tr.Rate)
	}
	ow, err := newOracleWorld(w.wls[0], target, seconds)
	if err != nil {
		return Oracle{}, false, err
	}
	return ow.search(maxPods)
}

// maxOracleArrivals is MaxOracleArrivals (a test lowers it).
var maxOracleArrivals = MaxOracleArrivals

// newOracleWorld collects the first seconds of a fresh workload's
// requests, as the world would make them.
func newOracleWorld(wl *workload, target time.Duration, seconds int) (*oracleWorld, error) {
	if seconds <= 0 {
		return nil, fmt.Errorf("oracle: the trace is empty")
	}
	ow := &oracleWorld{servers: wl.servers, startup: float64(wl.startup), target: target.Seconds(), seed: wl.src.seed}
	var buf []arrival
	total := 0
	for s := range seconds {
		buf = wl.src.second(s, buf[:0])
		if total += len(buf); total > maxOracleArrivals {
			return nil, fmt.Errorf("oracle: the workload makes more than %d requests, more than the oracle keeps", maxOracleArrivals)
		}
		sec := make([]oracleArrival, len(buf))
		for i, a := range buf {
			sec[i] = oracleArrival{at: a.at, service: a.cost * wl.svc}
		}
		ow.secs = append(ow.secs, sec)
	}
	return ow, nil
}

// start is the state before the first second with r pods.
func (ow *oracleWorld) start(r int) *oracleState {
	s := &oracleState{route: *rand.NewPCG(ow.seed, routeStream)}
	s.resize(r, ow.servers, 0)
	return s
}

// resize makes the pods r at second sec: new ones idle and ready from
// sec (started ahead of it), removed ones picked as the world picks them.
func (s *oracleState) resize(r, c, sec int) {
	for len(s.pods) < r {
		s.pods = append(s.pods, oraclePod{free: newServers(c), readyAt: sec})
	}
	if len(s.pods) > r {
		s.pods = scaleDown(s.pods, r, sec, func(p oraclePod) int { return p.readyAt })
	}
}

// minute serves seconds [from, to) in s and reports whether any of them
// had its trailing-minute p99 over the target.
func (ow *oracleWorld) minute(s *oracleState, from, to int) (over bool) {
	route := rand.New(&s.route)
	for sec := from; sec < to; sec++ {
		c := &s.ring[sec%60]
		s.n -= int64(c.n)
		s.over -= int64(c.over)
		*c = oracleSec{}
		for _, a := range ow.secs[sec] {
			p := s.pods[route.IntN(len(s.pods))].free
			c.n++
			finish, ok := p.take(a.at, a.service, a.at+MaxWait)
			if !ok || finish-a.at > ow.target {
				c.over++
			}
		}
		s.n += int64(c.n)
		s.over += int64(c.over)
		if p99Over(s.n, s.over) {
			over = true
		}
	}
	return over
}

// evaluate replays a per-minute schedule and counts the seconds over the
// target, for tests and for the constant search.
func (ow *oracleWorld) evaluate(replicas []int) (overSeconds int) {
	ready := make([]int, len(ow.secs))
	for sec := range ready {
		ready[sec] = replicas[sec/60]
	}
	over, _ := ow.evaluateSeconds(ready, nil)
	return over
}

// evaluateSeconds replays a schedule of ready pods given second by second
// and counts the seconds over the target, and those measured (with a
// request in their trailing minute), as the world's report counts them;
// each, if not nil, sees every second's own requests and those of them
// over the target.
func (ow *oracleWorld) evaluateSeconds(ready []int, each func(sec int, n, over int32)) (overSeconds, measured int) {
	s := ow.start(ready[0])
	for sec, r := range ready {
		s.resize(r, ow.servers, sec)
		if ow.minute(s, sec, sec+1) {
			overSeconds++
		}
		if s.n > 0 {
			measured++
		}
		if each != nil {
			c := s.ring[sec%60]
			each(sec, c.n, c.over)
		}
	}
	return overSeconds, measured
}

// ReactivePoint is one member of the reactive family: a controller that
// can only react to the load it has seen, keeping Floor pods at all times
// (see reactive for the exact definition). OverPct is its share of
// measured seconds over the target, ReplicaHours the pods it paid for.
type ReactivePoint struct {
	Floor        int     `json:"floor"`
	OverPct      float64 `json:"overPct"`
	ReplicaHours float64 `json:"replicaHours"`
}

// reactiveWindow is the seconds of arrivals a reactive controller's rate
// is taken over: the second itself and the four before it.
const reactiveWindow = 5

// reactive is the reactive family for the oracle's schedule sched: what a
// controller that sees the load only as it comes, and starts pods only
// when it has seen their need, does at each floor of pods kept. It is
// defined second by second, causally:
//
//   - rate(t) is the arrivals of the trailing five seconds [t−4, t] over
//     the seconds counted (fewer at the trace's start: t+1 of them while
//     t < 4).
//   - K, the requests a second one pod serves, is the tightest packing the
//     oracle proved enough for a whole minute: the most, over the minutes
//     m with sched[m] > 0, of minute m's arrivals over its seconds, over
//     sched[m]. This is hindsight about a pod's capacity only (the
//     controller is given a perfect capacity model), never about the load
//     to come.
//   - need(t) = max(1, ceil(rate(t)/K − 1e-9)): the pods the load seen by
//     t needs, knowing nothing of the rest of the minute (1 throughout
//     when K is 0: no minute with pods has a request).
//   - At floor f, at second t, the controller runs max(f, need(t)) pods and
//     pays for each from that second: paid = Σ_t max(f, need(t)). A pod
//     started at t is ready startup seconds later and a drop takes pods
//     away at once (the newest first), so the pods ready at t are
//     ready(t) = max(f, min of need(u) for u in [max(t−startup, 0), t]); the
//     pods at the trace's start were ready already.
//
// ready is replayed as the oracle's schedule is (evaluateSeconds), and each
// point is OverPct = 100·over/measured seconds and ReplicaHours =
// paid/3600. The floors run from 1 to the highest need(t) of the trace (at
// most maxReactiveFloors), stopping at the first floor never over: a
// higher one costs more and cannot do better. need(t) and the readiness
// before the floor are computed once for every floor.
func (ow *oracleWorld) reactive(sched []int) []ReactivePoint {
	need := ow.reactiveNeed(ow.perPodRate(sched))
	if len(need) == 0 {
		return nil
	}
	base := slidingMin(need, int(ow.startup))
	var out []ReactivePoint
	ready := make([]int, len(need))
	for floor := 1; floor <= min(slices.Max(need), maxReactiveFloors); floor++ {
		paid := reactiveAt(need, base, floor, ready)
		over, measured := ow.evaluateSeconds(ready, nil)
		pt := ReactivePoint{Floor: floor, ReplicaHours: paid / 3600}
		if measured > 0 {
			pt.OverPct = 100 * float64(over) / float64(measured)
		}
		out = append(out, pt)
		if over == 0 {
			break // a higher floor costs more and cannot do better
		}
	}
	return out
}

// rate is rate(t) of reactive: the arrivals of seconds [t−4, t] (those of
// them in the trace) over the seconds counted.
func (ow *oracleWorld) rate(t int) float64 {
	from := max(t-reactiveWindow+1, 0)
	n := 0
	for s := from; s <= t; s++ {
		n += len(ow.secs[s])
	}
	return float64(n) / float64(t-from+1)
}

// perPodRate is K of reactive: the most requests a second per pod of any
// minute the schedule gives pods, or 0 when none of them has a request.
func (ow *oracleWorld) perPodRate(sched []int) float64 {
	k := 0.0
	for m, r := range sched {
		if r <= 0 || m >= ow.minutes() {
			continue
		}
		n := 0
		for s := 60 * m; s < 60*m+ow.seconds(m); s++ {
			n += len(ow.secs[s])
		}
		k = max(k, float64(n)/float64(ow.seconds(m))/float64(r))
	}
	return k
}

// reactiveNeed is need(t) of reactive for every second, at k requests a
// second per pod (k = 0: one pod throughout).
func (ow *oracleWorld) reactiveNeed(k float64) []int {
	need := make([]int, len(ow.secs))
	for t := range need {
		need[t] = 1
		if k > 0 {
			need[t] = max(1, int(math.Ceil(ow.rate(t)/k-1e-9)))
		}
	}
	return need
}

// slidingMin is, for every t, the least of v[u] for u in
// [max(t−width, 0), t] (a monotone queue: O(len(v)) time and memory).
func slidingMin(v []int, width int) []int {
	out := make([]int, len(v))
	q := make([]int, 0, len(v)) // indices in the window, values rising
	for t, x := range v {
		for len(q) > 0 && v[q[len(q)-1]] >= x {
			q = q[:len(q)-1]
		}
		q = append(q, t)
		if q[0] < t-max(width, 0) {
			q = q[1:]
		}
		out[t] = v[q[0]]
	}
	return out
}

// reactiveAt fills ready with the pods ready each second at a floor, from
// need and its sliding minimum base, and returns the pod-seconds paid.
func reactiveAt(need, base []int, floor int, ready []int) (paid float64) {
	for t := range need {
		ready[t] = max(floor, base[t])
		paid += float64(max(floor, need[t]))
	}
	return paid
}

func (ow *oracleWorld) minutes() int { return (len(ow.secs) + 59) / 60 }

func (ow *oracleWorld) seconds(m int) int { return min(60*m+60, len(ow.secs)) - 60*m }

// constant is the least count at 0% over, by doubling then bisection
// (0 when none up to maxPods).
func (ow *oracleWorld) constant(maxPods int) int {
	sched := make([]int, ow.minutes())
	ok := func(r int) bool {
		for i := range sched {
			sched[i] = r
		}
		return ow.evaluate(sched) == 0
	}
	lo, hi := 0, 1
	for !ok(hi) {
		if hi >= maxPods {
			return 0
		}
		lo, hi = hi, min(2*hi, maxPods)
	}
	return bisect(lo, hi, ok)
}

// search runs the greedy schedule and the constant one and keeps the
// cheaper.
func (ow *oracleWorld) search(maxPods int) (Oracle, bool, error) {
	n := ow.minutes()
	fixed := ow.constant(maxPods)
	best := Oracle{Constant: fixed, PodSeconds: math.Inf(1)}
	if fixed > 0 {
		best.Replicas = make([]int, n)
		for i := range best.Replicas {
			best.Replicas[i] = fixed
		}
		best.PodSeconds = float64(fixed * len(ow.secs))
	}
	greedy, backtracks, ok := ow.greedy(maxPods)
	if ok {
		g := Oracle{Replicas: greedy, Constant: fixed, Greedy: true, Backtracks: backtracks}
		g.PodSeconds, g.Starts = ow.cost(greedy)
		if g.PodSeconds < best.PodSeconds {
			best = g
		}
	}
	best.Backtracks = backtracks
	if !math.IsInf(best.PodSeconds, 1) {
		best.Reactive = ow.reactive(best.Replicas)
	}
	if math.IsInf(best.PodSeconds, 1) {
		return Oracle{Constant: 0, Backtracks: backtracks}, false, nil
	}
	return best, true, nil
}

// cost is a schedule's pod-seconds and the pods it starts after the
// trace's start.
func (ow *oracleWorld) cost(replicas []int) (podSeconds float64, starts int) {
	for m, r := range replicas {
		podSeconds += float64(r * ow.seconds(m))
		if m > 0 && r > replicas[m-1] {
			starts += r - replicas[m-1]
		}
	}
	return podSeconds + float64(starts)*ow.startup, starts
}

// greedy is the greedy schedule with backtracking (ok false when a minute
// cannot be cleared even by raising those before it).
func (ow *oracleWorld) greedy(maxPods int) (sched []int, backtracks int, ok bool) {
	n := ow.minutes()
	sched = make([]int, n)
	floor := make([]int, n) // raised by backtracking
	for i := range floor {
		floor[i] = 1
	}
	// The state at each minute's start, kept only as far back as a
	// backtrack may go: behind the furthest minute reached by maxBacktrack.
	states := map[int]*oracleState{0: ow.start(0)}
	furthest := 0
	prev := 1
	for m := 0; m < n; {
		r, found := ow.fewest(states[m], m, max(floor[m], 1), maxPods, max(prev, floor[m]))
		if !found {
			// Raise the nearest earlier minute still under the cap.
			back := m - 1
			for back >= 0 && back >= furthest-maxBacktrack && sched[back] >= maxPods {
				back--
			}
			if back < 0 || back < furthest-maxBacktrack || backtracks >= backtracksPerMinute*n {
				return nil, backtracks, false
			}
			backtracks++
			floor[back] = sched[back] + 1
			for i := back + 1; i <= m; i++ {
				floor[i] = 1
			}
			m = back
			prev = floor[back]
			continue
		}
		sched[m] = r
		s := states[m].clone()
		s.resize(r, ow.servers, 60*m)
		ow.minute(s, 60*m, 60*m+ow.seconds(m))
		states[m+1] = s
		prev = r
		m++
		if m > furthest {
			furthest = m
			delete(states, furthest-maxBacktrack-1)
		}
	}
	return sched, backtracks, true
}

// fewest is the fewest pods in [lo, hi] under which minute m, from state
// s, has no second over: from a first guess, down while it holds and up
// (doubling, then bisecting) while it does not. Serving is not exactly
// monotone in the pods (the random choice of pod changes with their
// number), so the count returned is one that was replayed and held.
func (ow *oracleWorld) fewest(s *oracleState, m, lo, hi, guess int) (int, bool) {
	clears := func(r int) bool {
		c := s.clone()
		c.resize(r, ow.servers, 60*m)
		return !ow.minute(c, 60*m, 60*m+ow.seconds(m))
	}
	guess = min(max(guess, lo), hi)
	if clears(guess) {
		return bisect(lo-1, guess, clears), true
	}
	bad := guess
	for step := 1; ; step *= 2 {
		r := min(bad+step, hi)
		if clears(r) {
			return bisect(bad, r, clears), true
		}
		if r == hi {
			return 0, false
		}
		bad = r
	}
}

// bisect narrows a count that does not clear (bad) and one that does
// (good) to neighbours, and returns the one that clears.
func bisect(bad, good int, clears func(int) bool) int {
	for good-bad > 1 {
		mid := (good + bad) / 2
		if clears(mid) {
			good = mid
		} else {
			bad = mid
		}
	}
	return good
}
