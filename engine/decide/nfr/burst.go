package nfr

import (
	"fmt"
	"math"
	"time"
)

// Burst memory: how long the pods a burst needed are kept after it.
// Keeping them costs them for as long as they are kept; letting them go
// costs the next burst's first moments, served by too few pods until new
// ones are ready — the keep-alive problem of serverless platforms. Neither
// side is a constant here: both are read off the workload's own recent
// rates, one pod count (level) at a time.
//
// For level k, an episode is a run of steps needing at least k pods. The
// gap between two episodes counts only when the next one, met cold, would
// have been late: longer than the startup (nothing released and asked for
// again in less serves sooner), and with the pods the gap itself needed
// unable to serve level k's rate at full CPU (a dip one pod down that the
// utilisation's headroom covers is noise, not a gap). With the gaps
// counted, the episodes recur as a Poisson process would: a mean gap μ and
// a mean episode d, f = 1/(μ + d) episodes a second. Keeping the level for
// T after an episode meets the next one cold with probability e^{−T/μ},
// and a cold episode makes its first `startup` D of requests late, D·R
// for a level of rate R. The p99 target lets a share β = 1% of the
// requests be late, over the history's mean rate R̄: the level is kept for
// the shortest T with
//
//	f · e^{−T/μ} · D · R ≤ β · R̄,  T = μ · ln(f · D · R / (β · R̄))
//
// (0 when the logarithm is not positive, at most the history's span). A
// level seen in one episode only has no gap to learn from and is not kept:
// a burst nothing foretold (a flash crowd) is met as it comes, and keeping
// its pods after it buys nothing the history can show. The memory is the
// highest level still within its keep.

// DefaultStartup is how late new capacity serves when a spec does not say.
const DefaultStartup = 30 * time.Second

// BurstInput is the history burst memory learns from.
type BurstInput struct {
	// Rates are the arrival rate (req/s) at every Step, oldest first.
	Rates []float64
	Step  time.Duration
	// PodRate is what one pod serves at the utilisation sized for
	// (req/s), and FullRate what it serves at full CPU: a step needs
	// ceil(rate / PodRate) pods, and a level of k pods is served by j pods
	// at full CPU when k·PodRate ≤ j·FullRate.
	PodRate, FullRate float64
	// Startup is how late capacity asked for serves.
	Startup time.Duration
	// LateShare is the share of requests the target lets be late
	// (1 − the quantile).
	LateShare float64
}

// Burst is the memory: the Pods kept (0: none beyond what the newest step
// needs), the Level of rate they serve at the sized utilisation, how long
// that level is Kept after its last episode and how long ago that was
// (Since), and Why in words.
type Burst struct {
	Pods        int
	Kept, Since time.Duration
	Why         string
}

// maxLevels bounds the levels weighed (the pod counts a history needs).
const maxLevels = 10_000

// BurstMemory weighs every level the history reached (see the package's
// burst memory notes).
func BurstMemory(in BurstInput) Burst {
	n := len(in.Rates)
	if !(in.PodRate > 0) || !(in.FullRate > 0) || in.Step <= 0 || math.IsInf(in.PodRate, 0) || math.IsInf(in.FullRate, 0) || n == 0 {
		return Burst{Why: "no pod capacity or rates to weigh bursts by"}
	}
	need := make([]int, n)
	top := 0
	var sum float64
	for i, r := range in.Rates {
		if !(r > 0) || math.IsInf(r, 0) {
			continue
		}
		need[i] = int(math.Min(maxLevels, math.Ceil(r/in.PodRate-1e-9)))
		top = max(top, need[i])
		sum += r
	}
	mean := sum / float64(n)
	span := time.Duration(n) * in.Step
	d := in.Startup.Seconds()
	step := in.Step.Seconds()
	best := Burst{Why: fmt.Sprintf("no level the last %s reached came back after a gap it would have been late in: none kept", span)}
	if !(mean > 0) {
		return best
	}
	// From the top down: the first level kept is the memory.
	for k := top; k > need[n-1] && k >= 1; k-- {
		var gaps, eps []float64
		start, end, low := -1, -1, math.MaxInt
		for i, v := range need {
			if v >= k {
				if start < 0 {
					start = i
				} else if end >= 0 && end < i-1 {
					// A gap [end+1, i−1] just ended.
					g := float64(i-1-end) * step
					if g > d && float64(k)*in.PodRate > float64(low)*in.FullRate {
						gaps = append(gaps, g)
						eps = append(eps, float64(end-start+1)*step)
						start = i
					}
				}
				end, low = i, math.MaxInt
			} else if start >= 0 {
				low = min(low, v)
			}
		}
		if start < 0 || len(gaps) == 0 {
			continue
		}
		eps = append(eps, float64(end-start+1)*step)
		mu, ep := meanOf(gaps), meanOf(eps)
		rate := float64(k) * in.PodRate
		x := d * rate / (mu + ep) / (in.LateShare * mean)
		if !(x > 1) {
			continue
		}
		keep := time.Duration(math.Min(mu*math.Log(x), span.Seconds()) * float64(time.Second)).Round(time.Second)
		since := time.Duration(n-1-end) * in.Step
		if since > keep {
			continue
		}
		return Burst{Pods: k, Kept: keep, Since: since,
			Why: fmt.Sprintf("keep %d pods (%s req/s) for %s after it: it came back after %s on average (%s, episodes of %s), and meeting it %s cold %.1f times an hour would make more than %g%% of requests late; last needed %s ago",
				k, num(round1(rate)), keep, dur(mu), plural(len(gaps), "gap"), dur(ep), in.Startup, 3600/(mu+ep), 100*in.LateShare, since)}
	}
	return best
}

func meanOf(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// plural is n and the noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
