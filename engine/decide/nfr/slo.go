package nfr

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
)

// The latency model behind the SLO-driven replicas policy. Each pod is an
// M/M/c FCFS queue: c servers, exponential service of mean s seconds
// (μ = 1/s), and a Poisson share λ/n of the workload's rate, since the load
// balancer spreads requests at random. Everything here is pure arithmetic.

const (
	// MaxUtilisation caps the utilisation UtilisationBound returns. Near
	// saturation the modelled tail grows without bound and is dominated by
	// the model's own assumptions (Poisson arrivals, exponential service,
	// perfect balancing), none of which hold exactly; a few percent of
	// slack costs little and keeps a loose target from packing pods to the
	// edge.
	MaxUtilisation = 0.95

	// DefaultUtilisation is the utilisation sized for when the latency
	// target says nothing usable: there is none, or no number of pods can
	// meet it.
	DefaultUtilisation = 0.7

	// MinCostShare is the smallest share of the mean cost per request that
	// a fitted marginal cost may claim. A slope far below the mean says
	// nearly all CPU is idle overhead, which a noisy fit says more often
	// than a real workload does.
	MinCostShare = 0.25

	// FeedbackGain scales how strongly a measured p99 above target adds
	// replicas beyond the model: the factor grows with the log of the miss
	// so that a twofold miss adds about a third, not double.
	FeedbackGain = 0.5

	// FeedbackMax bounds the feedback factor so one bad measurement (a
	// deploy, a cold cache) cannot multiply the fleet without limit.
	FeedbackMax = 2.0

	// minFitR2 is the fit quality below which the marginal cost is not
	// believed. At 0.5 a fit over 8 noisy minutes of a slow decline read
	// 180–400m of its CPU as idle and priced a request 20% under its cost
	// (and the pods sized on it missed the p99); the mean cost, which
	// counts idle CPU as load, errs on the side of more pods.
	minFitR2 = 0.8

	// minFitSpread is the relative spread of x a fit needs: below it the
	// slope and intercept cannot be told apart.
	minFitSpread = 0.05

	// maxServers bounds c so that ErlangC stays cheap; past a few thousand
	// servers per pod the utilisation bound is pinned at MaxUtilisation
	// anyway.
	maxServers = 10000

	// maxSLOReplicas bounds the replica count before it is converted to an
	// integer, so an absurd input cannot overflow int64.
	maxSLOReplicas = 1e6

	// sizingQuantile is the latency quantile the target is read as.
	sizingQuantile = 0.99
)

// ErlangC is the probability that an arrival waits in an M/M/c queue with
// offered load a = λ/μ Erlangs:
//
//	C(c, a) = (aᶜ/c! · c/(c−a)) / (Σₖ₌₀ᶜ⁻¹ aᵏ/k! + aᶜ/c! · c/(c−a))
//
// computed through the Erlang B recursion B(0) = 1,
// B(k) = a·B(k−1) / (k + a·B(k−1)), and C = c·B / (c − a·(1 − B)), which
// stays within [0, 1] at every step and so neither overflows nor loses
// precision for large c, unlike the factorial form. It is 1 when a ≥ c (the
// queue is unstable and everyone waits) and 0 when a ≤ 0; c < 1 counts as 1.
func ErlangC(c int, a float64) float64 {
	if c < 1 {
		c = 1
	}
	if math.IsNaN(a) {
		return math.NaN()
	}
	if a <= 0 {
		return 0
	}
	n := float64(c)
	if a >= n {
		return 1
	}
	b := 1.0
	for k := 1; k <= c; k++ {
		b = a * b / (float64(k) + a*b)
	}
	return n * b / (n - a*(1-b))
}

// SojournTail is P(T > t) for the sojourn time T = W + S of an M/M/c FCFS
// queue with c servers of mean service time s and arrival rate λ. The wait
// W is 0 with probability 1 − C and otherwise exponential with rate
// θ = c/s − λ, where C = ErlangC(c, λ·s); S is exponential with rate
// μ = 1/s. So
//
//	P(T > t) = (1 − C)·e^{−μt} + C·(θ·e^{−μt} − μ·e^{−θt}) / (θ − μ)
//
// and, as θ → μ, the second term tends to C·e^{−μt}·(1 + μt). It is 1 when
// the queue is unstable (λ·s ≥ c) and for t ≤ 0. A service time s ≤ 0 takes
// no time, so then the tail is 0 for t > 0. NaN inputs give 1: nothing is
// known to be fast.
func SojournTail(c int, s, lambda, t float64) float64 {
	if c < 1 {
		c = 1
	}
	if math.IsNaN(s) || math.IsNaN(lambda) || math.IsNaN(t) || t <= 0 {
		return 1
	}
	if s <= 0 {
		return 0
	}
	lambda = math.Max(lambda, 0)
	if lambda*s >= float64(c) {
		return 1
	}
	return sojournTail(c, s, lambda, ErlangC(c, lambda*s), t)
}

// sojournTail is SojournTail for a stable queue with t > 0 and C already
// known, so that a search over t computes the Erlang C sum only once.
func sojournTail(c int, s, lambda, erlangC, t float64) float64 {
	mu := 1 / s
	theta := float64(c)/s - lambda
	serviceOnly := math.Exp(-mu * t)
	return (1-erlangC)*serviceOnly + erlangC*hypoexpTail(mu, theta, t)
}

// hypoexpTail is P(X + Y > t) for independent exponentials of rates r1 and
// r2, (r2·e^{−r1·t} − r1·e^{−r2·t}) / (r2 − r1). The textbook form cancels
// catastrophically when r1 ≈ r2 and its exponentials can under- and
// overflow separately when the rates are far apart. The expression is
// symmetric in the two rates, so with lo ≤ hi and d = hi − lo ≥ 0 it can
// be rewritten as
//
//	e^{−lo·t} · (1 + lo·t · φ(d·t)),  φ(x) = (1 − e^{−x}) / x,
//
// where φ lies in (0, 1], is computed from expm1 without cancellation, and
// equals 1 at x = 0, which is exactly the Erlang-2 limit e^{−lo·t}(1 + lo·t).
// The relative threshold only avoids dividing zero by zero; below it φ
// differs from 1 by less than 1e-12.
func hypoexpTail(r1, r2, t float64) float64 {
	lo, hi := math.Min(r1, r2), math.Max(r1, r2)
	x := (hi - lo) * t
	phi := 1.0
	if hi-lo > 1e-12*hi && x > 0 {
		phi = -math.Expm1(-x) / x
	}
	return math.Exp(-lo*t) * (1 + lo*t*phi)
}

// SojournQuantile is the q-quantile of the sojourn time T of SojournTail,
// in seconds: the t at which P(T > t) = 1 − q, found by doubling an upper
// bracket and bisecting to a relative precision of 1e-9. It is +Inf when
// the queue is unstable (λ·s ≥ c) and for q ≥ 1, 0 for q ≤ 0 or s ≤ 0, and
// NaN for NaN inputs.
func SojournQuantile(c int, s, lambda, q float64) float64 {
	if c < 1 {
		c = 1
	}
	if math.IsNaN(s) || math.IsNaN(lambda) || math.IsNaN(q) {
		return math.NaN()
	}
	if q <= 0 || s <= 0 {
		return 0
	}
	lambda = math.Max(lambda, 0)
	if q >= 1 || lambda*s >= float64(c) || math.IsInf(s, 1) {
		return math.Inf(1)
	}
	erlangC := ErlangC(c, lambda*s)
	p := 1 - q
	theta := float64(c)/s - lambda
	// The tail decays no slower than the slower of the two exponentials,
	// so their combined mean is the natural first guess for the bracket.
	lo, hi := 0.0, s+1/theta
	for sojournTail(c, s, lambda, erlangC, hi) > p {
		lo, hi = hi, 2*hi
		if math.IsInf(hi, 1) {
			return hi
		}
	}
	for i := 0; i < 200 && hi-lo > 1e-9*hi; i++ {
		mid := lo + (hi-lo)/2
		if sojournTail(c, s, lambda, erlangC, mid) > p {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo + (hi-lo)/2
}

// UtilisationBound is the highest utilisation ρ = λ·s/c in [0, 1) at which
// the q-quantile of the sojourn time, SojournQuantile(c, s, ρ·c/s, q), is at
// most target seconds, capped at MaxUtilisation. The quantile rises
// monotonically with ρ, from s·ln(1/(1−q)) at ρ = 0 (service alone) to
// infinity at ρ = 1, so bisection to 1e-6 finds it; the ρ returned is the
// feasible end of the final bracket. ok is false, with ρ = 0, when even the
// service alone exceeds target, or when an input makes the question
// meaningless (s ≤ 0, target ≤ 0, q outside (0, 1), NaN).
//
// The quantile is at most the target exactly when the tail at the target
// is at most 1 − q (the tail falls as t grows), so each step of the search
// is one Erlang C and one tail, not a search for the quantile. Time only
// enters as target ÷ s (the tail at t depends on μt = t/s and θt =
// c(1 − ρ)·t/s), so the search runs on that ratio and its answers are
// remembered by (c, target ÷ s, q): a plan of many workloads asks the same
// few questions.
func UtilisationBound(c int, s, target, q float64) (rho float64, ok bool) {
	if c < 1 {
		c = 1
	}
	if !(s > 0) || math.IsInf(s, 1) || !(target > 0) || !(q > 0 && q < 1) {
		return 0, false
	}
	if s*math.Log(1/(1-q)) > target {
		return 0, false
	}
	if math.IsInf(target, 1) {
		return MaxUtilisation, true // no utilisation below 1 is too slow
	}
	k := boundKey{c: c, r: target / s, q: q}
	boundsMu.Lock()
	rho, hit := bounds[k]
	boundsMu.Unlock()
	if hit {
		return rho, true
	}
	rho = utilisationBound(c, k.r, q)
	boundsMu.Lock()
	if len(bounds) >= maxBounds {
		clear(bounds) // rare: a plan asks few distinct questions
	}
	bounds[k] = rho
	boundsMu.Unlock()
	return rho, true
}

// utilisationBound is UtilisationBound's search with a service time of 1
// and a target of r service times (feasible: r ≥ ln(1/(1−q))).
func utilisationBound(c int, r, q float64) float64 {
	n := float64(c)
	p := 1 - q
	return highestMeeting(func(rho float64) bool {
		return sojournTail(c, 1, rho*n, ErlangC(c, rho*n), r) <= p
	})
}

// highestMeeting is the highest utilisation in [0, MaxUtilisation] that
// meets a test which holds below some point and fails above it: the cap
// when it meets it, else the feasible end of a bisection to 1e-6.
func highestMeeting(meets func(rho float64) bool) float64 {
	if meets(MaxUtilisation) {
		return MaxUtilisation
	}
	lo, hi := 0.0, MaxUtilisation
	for hi-lo > 1e-6 {
		mid := lo + (hi-lo)/2
		if meets(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// boundKey is a question UtilisationBound answers: c servers, a target of
// r service times, quantile q.
type boundKey struct {
	c    int
	r, q float64
}

// maxBounds bounds the remembered answers (a few MB at most).
const maxBounds = 1 << 14

var (
	boundsMu sync.Mutex
	bounds   = map[boundKey]float64{}
)

// Fit is an ordinary least-squares line y = Intercept + Slope·x over N
// points, with its coefficient of determination R2.
type Fit struct {
	Slope, Intercept, R2 float64
	N                    float64
}

// FitMoments is the least-squares line through n points given their sample
// moments, the means of x, y, x², xy and y²:
//
//	var x = mxx − mx²,  cov = mxy − mx·my,  var y = myy − my²
//	Slope = cov / var x,  Intercept = my − Slope·mx
//	R² = cov² / (var x · var y)   (0 when var y is 0)
//
// ok is false when n < 3, when any input is NaN or infinite, or when
// var x ≤ (0.05·mx)²: with a relative spread in x under 5% the slope and
// intercept trade off against each other and neither means much. The Fit
// returned with ok false carries only N.
func FitMoments(n, mx, my, mxx, mxy, myy float64) (Fit, bool) {
	for _, v := range [...]float64{n, mx, my, mxx, mxy, myy} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return Fit{N: n}, false
		}
	}
	if n < 3 {
		return Fit{N: n}, false
	}
	varX := mxx - mx*mx
	if varX <= 0 || varX <= (minFitSpread*mx)*(minFitSpread*mx) {
		return Fit{N: n}, false
	}
	cov := mxy - mx*my
	varY := myy - my*my
	slope := cov / varX
	fit := Fit{Slope: slope, Intercept: my - slope*mx, N: n}
	if varY > 0 {
		// Rounding in the moments can push the ratio a hair past 1.
		fit.R2 = math.Min(1, cov*cov/(varX*varY))
	}
	return fit, true
}

// FitLine is FitMoments over the points (xs[i], ys[i]); ok is false when
// the slices differ in length or FitMoments rejects the points.
func FitLine(xs, ys []float64) (Fit, bool) {
	if len(xs) != len(ys) {
		return Fit{}, false
	}
	n := float64(len(xs))
	if len(xs) == 0 {
		return Fit{}, false
	}
	var sx, sy, sxx, sxy, syy float64
	for i, x := range xs {
		y := ys[i]
		sx += x
		sy += y
		sxx += x * x
		sxy += x * y
		syy += y * y
	}
	return FitMoments(n, sx/n, sy/n, sxx/n, sxy/n, syy/n)
}

// Cost is the CPU one request costs: PerRequest in millicore-seconds per
// request (equivalently millicores per req/s), Idle the millicores the
// workload burns regardless of traffic, Method "fit" or "mean", and Why the
// arithmetic in words.
type Cost struct {
	PerRequest, Idle float64
	Method, Why      string
}

// MarginalCost is the CPU cost of one more request per second at rps req/s
// and cpuMilli millicores in total. When the fit of CPU against rate is
// usable (fitOK, slope > 0, R² ≥ 0.8) the cost is its slope, so idle CPU
// (the intercept) does not inflate the per-request price, clamped to
//
//	MinCostShare · cpu/rps ≤ PerRequest ≤ cpu/rps
//
// because with non-negative idle CPU the marginal cost cannot exceed the
// mean, and a slope far under it is more likely noise than idle CPU. Any
// other fit falls back to the mean cost cpu/rps, with Why saying why.
// Idle is cpu − PerRequest·rps, never negative. ok is false when rps ≤ 0,
// cpuMilli < 0, or either is NaN or infinite.
func MarginalCost(rps, cpuMilli float64, fit Fit, fitOK bool) (Cost, bool) {
	if !finiteVal(rps) || !finiteVal(cpuMilli) || rps <= 0 || cpuMilli < 0 {
		return Cost{}, false
	}
	mean := cpuMilli / rps
	reject := ""
	switch {
	case !fitOK && fit.N < 3:
		reject = fmt.Sprintf("only %s points to fit", shortNum(fit.N))
	case !fitOK:
		reject = fmt.Sprintf("no usable fit over %s points", shortNum(fit.N))
	case !finiteVal(fit.Slope) || !finiteVal(fit.Intercept) || !finiteVal(fit.R2):
		reject = "fit not finite"
	case fit.Slope <= 0:
		reject = fmt.Sprintf("fit slope %s ≤ 0", shortNum(fit.Slope))
	case fit.R2 < minFitR2:
		reject = fmt.Sprintf("fit R² %.2f < %.1f", fit.R2, minFitR2)
	}
	if reject != "" {
		return Cost{
			PerRequest: mean,
			Method:     "mean",
			Why:        fmt.Sprintf("%s: mean cost %sm/req (%sm / %s req/s)", reject, shortNum(mean), shortNum(cpuMilli), shortNum(rps)),
		}, true
	}
	per := fit.Slope
	clamp := ""
	if lo := MinCostShare * mean; per < lo {
		per = lo
		clamp = fmt.Sprintf(", slope %s raised to %s%% of mean", shortNum(fit.Slope), shortNum(100*MinCostShare))
	}
	if per > mean {
		per = mean
		clamp = fmt.Sprintf(", slope %s lowered to mean", shortNum(fit.Slope))
	}
	idle := math.Max(0, cpuMilli-per*rps)
	return Cost{
		PerRequest: per,
		Idle:       idle,
		Method:     "fit",
		Why: fmt.Sprintf("marginal %sm/req (fit over %s points, R² %.2f, idle %sm removed%s)",
			shortNum(per), shortNum(fit.N), fit.R2, shortNum(idle), clamp),
	}, true
}

// Feedback is the factor the modelled replica count is multiplied by when
// the measured p99 misses its target:
//
//	clamp(1 + FeedbackGain·ln(p99/target), 1, FeedbackMax)
//
// It never goes below 1: a p99 under target removes no replicas, since
// only the model, not one good measurement, may decide there are too
// many. It is 1 when either argument is ≤ 0, NaN or infinite.
func Feedback(p99, target float64) float64 {
	if !finiteVal(p99) || !finiteVal(target) || p99 <= 0 || target <= 0 {
		return 1
	}
	return math.Min(FeedbackMax, math.Max(1, 1+FeedbackGain*math.Log(p99/target)))
}

// DesignRate is the rate to size for, max(peak, mean, floor·minRPS), and
// which of them won. A NaN, infinite or negative peak or mean is missing
// and skipped, and the floor counts only when floor and minRPS are both
// positive and finite; ties go to peak, then mean. When nothing is left
// the rate is NaN, so that a missing rate is never mistaken for no
// traffic.
func DesignRate(mean, peak, minRPS, floor float64) (rate float64, why string) {
	rate = math.NaN()
	usable := func(v float64) bool { return finiteVal(v) && v >= 0 }
	if usable(peak) {
		rate, why = peak, fmt.Sprintf("peak %s req/s", shortNum(peak))
	}
	if usable(mean) && !(mean <= rate) {
		rate, why = mean, fmt.Sprintf("mean %s req/s", shortNum(mean))
	}
	if finiteVal(floor) && finiteVal(minRPS) && floor > 0 && minRPS > 0 {
		if f := floor * minRPS; !(f <= rate) {
			rate, why = f, fmt.Sprintf("floor %s%% × %s = %s req/s", shortNum(100*floor), shortNum(minRPS), shortNum(f))
		}
	}
	if math.IsNaN(rate) {
		why = "no rate: mean and peak missing and no floor"
	}
	return rate, why
}

// SLOSizing is the arithmetic of one SLO-driven replica count: the design
// Rate (req/s), the capacity PerPod of one pod at full CPU (req/s, 0 when
// unknown), the Servers c it is modelled with, the utilisation Rho sized
// for, the ServiceTime (s), the Feedback factor, the Raw modelled count
// before feedback, and the Replicas that result. Feasible is false when
// the model shows no number of pods meets the latency target.
type SLOSizing struct {
	Rate, PerPod, Servers, Rho, ServiceTime, Feedback, Raw float64
	Replicas                                               int64
	Feasible                                               bool
}

// SizeForSLO sizes a workload for rate req/s with a p99 target in seconds,
// given its CPU cost per request (millicore-seconds), each pod's CPU
// (millicores), the mean service time of a request (s) and the measured
// p99 (s, ≤ 0 when unknown):
//
//	PerPod   = cpuPerPod / costPerReq              (req/s at 100% CPU)
//	Servers  = max(1, round(PerPod · serviceTime)) (concurrency at that rate, Little's law)
//	Rho      = UtilisationBound(Servers, serviceTime, target, 0.99)
//	Raw      = rate / (Rho · PerPod)
//	Replicas = max(1, ceil(Raw · Feedback(p99, target)))
//
// Rho is DefaultUtilisation when there is no target, when the service time
// is unknown (≤ 0), or when the target is infeasible (UtilisationBound
// not ok, or ok only at ρ = 0); only the last clears Feasible, since adding
// pods cannot shorten the service itself.
// Without a positive, finite capacity (costPerReq or cpuPerPod ≤ 0) one
// pod is as good as any number: PerPod and Raw are 0 and Replicas 1. A
// NaN or negative rate counts as 0. Replicas is capped at 1e6.
func SizeForSLO(rate, costPerReq, cpuPerPod, serviceTime, target float64, p99 float64) SLOSizing {
	if !(rate > 0) {
		rate = 0
	}
	z := SLOSizing{Rate: rate, Servers: 1, Rho: DefaultUtilisation, Feasible: true, Feedback: 1}
	if finiteVal(serviceTime) && serviceTime > 0 {
		z.ServiceTime = serviceTime
	}
	perPod := cpuPerPod / costPerReq
	capacityKnown := finiteVal(costPerReq) && finiteVal(cpuPerPod) && costPerReq > 0 && cpuPerPod > 0 && finiteVal(perPod) && perPod > 0
	if capacityKnown {
		z.PerPod = perPod
		if z.ServiceTime > 0 {
			z.Servers = math.Min(maxServers, math.Max(1, math.Round(perPod*z.ServiceTime)))
		}
	}
	if z.ServiceTime > 0 && finiteVal(target) && target > 0 {
		// A bound of exactly 0 means the target is met only by a pod with
		// no load at all, which no finite number of pods achieves.
		if rho, ok := UtilisationBound(int(z.Servers), z.ServiceTime, target, sizingQuantile); ok && rho > 0 {
			z.Rho = rho
		} else {
			z.Feasible = false
		}
	}
	if finiteVal(target) && target > 0 {
		z.Feedback = Feedback(p99, target)
	}
	return z.at(rate)
}

// at is the same sizing for another rate: the utilisation and a pod's
// capacity do not depend on the rate, so only Rate, Raw and Replicas
// change (and UtilisationBound's search is not run again).
func (z SLOSizing) at(rate float64) SLOSizing {
	if !(rate > 0) {
		rate = 0
	}
	z.Rate, z.Raw = rate, 0
	if z.PerPod > 0 && rate > 0 {
		z.Raw = math.Min(maxSLOReplicas, rate/(z.Rho*z.PerPod))
	}
	z.Replicas = replicasOf(z.Raw, z.Feedback)
	return z
}

// replicasOf is the count a modelled raw count and a feedback factor give:
// at least 1, at most maxSLOReplicas.
func replicasOf(raw, feedback float64) int64 {
	r := math.Ceil(raw*feedback - 1e-9)
	return int64(math.Min(maxSLOReplicas, math.Max(1, r)))
}

func finiteVal(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// shortNum prints a quantity in as few digits as still say something: 388,
// 12.5, 4.2 and 0.031, rather than the float's full expansion. Whole
// numbers print whole, so that counts and round inputs read as given.
func shortNum(v float64) string {
	a := math.Abs(v)
	switch {
	case !finiteVal(v):
		return strconv.FormatFloat(v, 'g', -1, 64)
	case a >= 100 || v == math.Trunc(v):
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case v == 0:
		return "0"
	default:
		return strings.TrimSuffix(strconv.FormatFloat(v, 'g', 2, 64), ".0")
	}
}
