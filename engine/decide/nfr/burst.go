package nfr

import (
	"fmt"
	"math"
	"time"
)

// Burst memory: how long the capacity a burst needed is kept after it.
// Keeping pods after a burst costs them for as long as they are kept;
// letting them go costs the next burst's first moments, served by too few
// pods until new ones are ready — the keep-alive problem of serverless
// platforms. Neither cost is a constant here: both are read off the
// workload's own recent rates. A window W is replayed over the history:
// at each step the pods held are the most any step of the W before it
// needed, as decided `startup` earlier (what a pod asked for then serves
// now); a step whose rate is over what the held pods serve at full CPU
// makes its requests late. The memory is the shortest W whose replay
// makes no more requests late than the p99 target allows (1%), or, when
// no W does, the shortest that makes as few late as the longest does: a
// burst nothing before it foretold (a flash crowd) is late whatever is
// kept, and keeping more after it buys nothing.

// DefaultStartup is how late new capacity serves when a spec does not say.
const DefaultStartup = 30 * time.Second

// BurstInput is the history burst memory learns from.
type BurstInput struct {
	// Rates are the arrival rate (req/s) at every Step, oldest first.
	Rates []float64
	Step  time.Duration
	// PodRate is what one pod serves at the utilisation sized for
	// (req/s), and FullRate what it serves at full CPU; a pod count is
	// ceil(rate / PodRate), and a step is late when its rate is over
	// count × FullRate.
	PodRate, FullRate float64
	// Startup is how late capacity asked for serves.
	Startup time.Duration
	// LateShare is the share of requests the target lets be late
	// (1 − the quantile).
	LateShare float64
}

// Burst is the memory chosen and what it rests on.
type Burst struct {
	Window time.Duration
	// Late is the share of the history's requests the replay at Window
	// makes late; Budget the share allowed.
	Late, Budget float64
	Why          string
}

// BurstMemory chooses the memory (see the package's burst memory notes).
// It is the whole history's span when the history is too short to replay
// (fewer steps than the startup and one more), and 0 when the inputs make
// no sense (no pod rate): nothing to weigh.
func BurstMemory(in BurstInput) Burst {
	n := len(in.Rates)
	if !(in.PodRate > 0) || !(in.FullRate > 0) || in.Step <= 0 || math.IsInf(in.PodRate, 0) || math.IsInf(in.FullRate, 0) {
		return Burst{Why: "no pod capacity to weigh bursts by"}
	}
	d := int(math.Ceil(float64(in.Startup) / float64(in.Step)))
	span := time.Duration(n) * in.Step
	if n < d+2 {
		return Burst{Window: span, Why: fmt.Sprintf("%d rate samples, too few to weigh: keeping the %s seen", n, span)}
	}
	need := make([]int, n)
	var total float64
	for i, r := range in.Rates {
		if !(r > 0) || math.IsInf(r, 0) {
			continue
		}
		need[i] = int(math.Min(maxSLOReplicas, math.Ceil(r/in.PodRate-1e-9)))
		if i >= d {
			total += r
		}
	}
	budget := in.LateShare * total
	maxW := n - 1 - d
	late := func(w int) float64 { return replayLate(in.Rates, need, d, w, in.FullRate) }
	floor := late(maxW)
	allowed := math.Max(budget, floor)
	// Late requests fall as the window grows (a longer window holds at
	// least as many pods at every step), so the shortest window within
	// the allowance is found by bisection.
	lo, hi := -1, maxW
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if late(mid) <= allowed+1e-9 {
			hi = mid
		} else {
			lo = mid
		}
	}
	b := Burst{Window: time.Duration(hi) * in.Step}
	if total > 0 {
		b.Late, b.Budget = late(hi)/total, in.LateShare
	}
	switch {
	case hi == 0:
		b.Why = fmt.Sprintf("no burst in the last %s came back sooner than %s (the startup) could meet it: no memory", span, in.Startup)
	case floor > budget+1e-9:
		b.Why = fmt.Sprintf("keep %s: bursts no memory foretold make %.1f%% late over %s; keeping longer saves none", b.Window, 100*floor/total, span)
	default:
		b.Why = fmt.Sprintf("keep %s: the shortest memory that keeps late requests at %.2f%% ≤ %g%% over the last %s", b.Window, 100*b.Late, 100*in.LateShare, span)
	}
	return b
}

// replayLate is the requests (rate × steps) late when, at each step i ≥ d,
// the pods held are the most needed at any step of [i−d−w, i−d].
func replayLate(rates []float64, need []int, d, w int, full float64) float64 {
	var late float64
	// A monotone deque of indices whose need decreases: its front is the
	// window's most.
	q := make([]int, 0, w+1)
	for i := d; i < len(rates); i++ {
		j := i - d // the newest step the pods at i were asked for at
		for len(q) > 0 && need[q[len(q)-1]] <= need[j] {
			q = q[:len(q)-1]
		}
		q = append(q, j)
		for q[0] < j-w {
			q = q[1:]
		}
		if r := rates[i]; r > float64(need[q[0]])*full+1e-9 {
			late += r
		}
	}
	return late
}

// Recent is the highest rate of the last window of rates sampled every
// step (the newest included), NaN when there are none.
func Recent(rates []float64, step, window time.Duration) float64 {
	if len(rates) == 0 || step <= 0 {
		return math.NaN()
	}
	k := int(window/step) + 1
	m := math.NaN()
	for _, r := range rates[max(0, len(rates)-k):] {
		if r >= 0 && !math.IsInf(r, 0) && !(r <= m) {
			m = r
		}
	}
	return m
}
