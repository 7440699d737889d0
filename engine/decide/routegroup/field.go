// Package routegroup computes a RouteGroup's field: from each backend's
// filtered queue, latency and error signals, a pressure; from the
// pressures, inverse-pressure weights and slot targets that sum exactly to
// the table size; a bounded (viscous) step from the current slots towards
// the targets, shrunk when the observed split drifts away from the weights,
// and damped so noise cannot trade slots back and forth (DampedStep); and
// the group's regime and admission. It is pure and deterministic: the
// eBPF provider's 200 ms loop and the sim world call Step with the time
// passed in, and the same inputs give the same field on every node.
package routegroup

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// Regime is the group's posture, from its share-weighted mean pressure.
type Regime string

// Regimes.
const (
	Laminar    Regime = "laminar"
	Transition Regime = "transition"
	Crisis     Regime = "crisis"
	Recovery   Regime = "recovery"
)

// Admission modes the dataplane enforces on new connects.
type Mode string

// Admission modes.
const (
	Normal Mode = "normal" // every connect passes
	Soft   Mode = "soft"   // a fraction of new connects is shed
	Hard   Mode = "hard"   // connects beyond a budget per second are refused
)

// Guard actions of the monotonic skew guard.
const (
	GuardNone   = ""
	GuardShrink = "shrink" // Δmax shrank by the factor k this tick
	GuardHold   = "hold"   // Δmax could shrink no further: no step this tick
)

// PressureFloor is ε in the inverse-pressure weights 1/(P+ε): it keeps an
// idle backend (P = 0) from taking every slot from one that is barely
// loaded, so weights stay within 1/ε of each other's order.
const PressureFloor = 0.1

// laminarBelow is the fraction of transitionAbove the mean pressure must
// fall under to leave transition: a band, so a pressure hovering at the
// threshold does not flip the regime every tick.
const laminarBelow = 0.9

// ReverseHold is how long a backend's slot count, once it has moved one
// way, is kept from moving back unless the backend must shed (DampedStep).
// A flap is a share moving one way and back within this window; held,
// a healthy backend's queue blip moves its count once, and the count
// comes back a hold later, never within.
const ReverseHold = 10 * time.Second

// Params are a RouteGroup's knobs, resolved from its spec.
type Params struct {
	// Slots is the table size (prime for Maglev).
	Slots int `json:"slots"`
	// Alpha is the EWMA's weight of the newest sample, in (0, 1].
	Alpha float64 `json:"alpha"`
	// Pressure weights and references: P = Wq·Q/Qref + Wl·L/Lref + We·clip(E/Eref, 0, ErrorClip).
	WQueue     float64 `json:"weightQueue"`
	WLatency   float64 `json:"weightLatency"`
	WErrors    float64 `json:"weightErrors"`
	QueueRef   float64 `json:"refQueue"`
	LatencyRef float64 `json:"refLatencySeconds"`
	ErrorRef   float64 `json:"refErrorRate"`
	ErrorClip  float64 `json:"errorClip"`
	// An error ratio above PenaltyAbove adds PenaltyAdd to the pressure.
	PenaltyAbove float64 `json:"penaltyAbove"`
	PenaltyAdd   float64 `json:"penaltyAdd"`
	// A backend whose queue reaches QueueLimit within Horizon (at its
	// current positive rate of growth) counts as crisis. 0: off.
	QueueLimit float64       `json:"queueLimit,omitempty"`
	Horizon    time.Duration `json:"horizonNanos"`
	// MaxSlotsPerTick is Δmax: the most one backend's slot count moves.
	MaxSlotsPerTick int `json:"maxSlotsPerTick"`
	// The skew guard: skew worsening by more than SkewEpsilon shrinks
	// Δmax by SkewShrink; fewer than MinConnects connects in a tick leave
	// the skew unknown (a share of a handful of connects is noise).
	SkewEpsilon float64 `json:"skewEpsilon"`
	SkewShrink  float64 `json:"skewShrink"`
	MinConnects uint64  `json:"minConnects"`
	// Regime thresholds on the share-weighted mean pressure.
	TransitionAbove float64 `json:"transitionAbove"`
	CrisisAbove     float64 `json:"crisisAbove"`
	RecoveryTicks   int     `json:"recoveryTicks"`
	// Admission: the fraction shed in soft mode, the budget per second in
	// hard mode.
	SoftShed   float64 `json:"softShed"`
	HardBudget float64 `json:"hardBudgetPerSecond"`
}

// Validate says what is wrong with the knobs: the provider refuses a
// configuration the loop cannot run with.
func (p Params) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if p.Slots < 1 || p.Slots > MaxSlots {
		bad("table of %d slots: want 1..%d", p.Slots, MaxSlots)
	}
	if !(p.Alpha > 0 && p.Alpha <= 1) {
		bad("filter alpha %g: want 0 < alpha <= 1", p.Alpha)
	}
	for _, w := range []struct {
		name string
		v    float64
	}{{"queue", p.WQueue}, {"latency", p.WLatency}, {"errors", p.WErrors}, {"error penalty", p.PenaltyAdd}} {
		if w.v < 0 || math.IsNaN(w.v) || math.IsInf(w.v, 0) {
			bad("pressure weight %s %g: want a finite number >= 0", w.name, w.v)
		}
	}
	if p.WQueue+p.WLatency+p.WErrors == 0 {
		bad("every pressure weight is 0: want at least one above 0")
	}
	for _, r := range []struct {
		name string
		v    float64
	}{{"queue", p.QueueRef}, {"latency", p.LatencyRef}, {"error rate", p.ErrorRef}, {"error clip", p.ErrorClip}} {
		if !(r.v > 0) || math.IsInf(r.v, 0) {
			bad("pressure reference %s %g: want a finite number > 0", r.name, r.v)
		}
	}
	if p.QueueLimit < 0 || p.Horizon < 0 {
		bad("saturation queue limit %g, horizon %s: want neither negative", p.QueueLimit, p.Horizon)
	}
	if p.MaxSlotsPerTick < 1 {
		bad("maxSlotsPerTick %d: want at least 1", p.MaxSlotsPerTick)
	}
	if !(p.SkewShrink > 0 && p.SkewShrink < 1) || !(p.SkewEpsilon >= 0) {
		bad("skew guard epsilon %g, shrink %g: want epsilon >= 0 and 0 < shrink < 1", p.SkewEpsilon, p.SkewShrink)
	}
	if !(p.TransitionAbove > 0 && p.CrisisAbove > p.TransitionAbove) {
		bad("regimes transitionAbove %g, crisisAbove %g: want 0 < transitionAbove < crisisAbove", p.TransitionAbove, p.CrisisAbove)
	}
	if p.RecoveryTicks < 1 {
		bad("recoveryTicks %d: want at least 1", p.RecoveryTicks)
	}
	if !(p.SoftShed >= 0 && p.SoftShed <= 1) || !(p.HardBudget > 0 && p.HardBudget <= MaxHardBudget) {
		bad("admission soft shed %g, hard budget %g/s: want 0..1 and 0 < budget <= %d/s", p.SoftShed, p.HardBudget, MaxHardBudget)
	}
	return errors.Join(errs...)
}

// Sample is one backend's signals at a tick. Connects is the dataplane's
// cumulative count of connects sent to it.
type Sample struct {
	Name      string
	Queue     float64 // requests waiting
	Latency   float64 // p95, seconds
	ErrorRate float64 // ratio
	// Missing says the backend's metrics could not be read this tick: its
	// pressure holds at its last value and it is flagged.
	Missing  bool
	Connects uint64
	// NoConnects says the dataplane's counters were not read: the skew
	// is unknown this tick.
	NoConnects bool
}

// Backend is one backend's remembered state.
type Backend struct {
	Name    string  `json:"name"`
	Queue   float64 `json:"queue"`   // EWMA
	Latency float64 `json:"latency"` // EWMA, seconds
	Errors  float64 `json:"errors"`  // EWMA, ratio
	Seen    bool    `json:"seen"`    // the EWMAs hold a sample
	// SeenAt is when: the queue's rate is over the time since, which is
	// more than a tick after a tick without metrics.
	SeenAt   time.Time `json:"seenAt"`
	Pressure float64   `json:"pressure"`
	Weight   float64   `json:"weight"`
	Slots    int       `json:"slots"`
	Connects uint64    `json:"connects"`
	Counted  bool      `json:"counted"` // Connects holds a reading
	Crisis   bool      `json:"crisis"`
	Flagged  bool      `json:"flagged"` // no metrics: pressure held
	// The damping's memory: the target of the last tick, and the way
	// the slot count last moved (+1 up, −1 down; 0 not since the table
	// was laid out) and when.
	Target  int       `json:"target"`
	Dir     int       `json:"dir,omitempty"`
	MovedAt time.Time `json:"movedAt"`
}

// State is what a group's loop remembers from tick to tick.
type State struct {
	Tick     uint64    `json:"tick"`
	At       time.Time `json:"at"`
	Backends []Backend `json:"backends"` // by name
	Regime   Regime    `json:"regime"`
	// Calm counts the ticks in recovery with the mean pressure below
	// transitionAbove.
	Calm int `json:"calm"`
	// DeltaMax is Δmax as the skew guard left it (0: not yet set).
	DeltaMax  int     `json:"deltaMax"`
	Skew      float64 `json:"skew"`
	SkewKnown bool    `json:"skewKnown"`
}

// Admission is what the dataplane enforces on new connects.
type Admission struct {
	Mode Mode `json:"mode"`
	// Shed is the fraction of new connects refused in soft mode.
	Shed float64 `json:"shed,omitempty"`
	// Budget is the connects per second admitted in hard mode.
	Budget float64 `json:"budget,omitempty"`
}

// Decision is one tick's field and why.
type Decision struct {
	Names        []string  `json:"names"`
	Pressure     []float64 `json:"pressure"`
	Weights      []float64 `json:"weights"`
	Targets      []int     `json:"targets"`
	Slots        []int     `json:"slots"`
	MeanPressure float64   `json:"meanPressure"`
	Regime       Regime    `json:"regime"`
	Admission    Admission `json:"admission"`
	Skew         float64   `json:"skew"`
	SkewKnown    bool      `json:"skewKnown"`
	Guard        string    `json:"guard,omitempty"`
	DeltaMax     int       `json:"deltaMax"`
	// Moved is the slot count that changed hands (half the sum of |Δ|).
	Moved int `json:"moved"`
	// Damped is the slot count the damping held back this tick (the sum
	// of the held steps' sizes).
	Damped int `json:"damped,omitempty"`
	// ScaleHint says the group needs more capacity than rerouting gives:
	// crisis, or one backend under pressure.
	ScaleHint bool     `json:"scaleHint,omitempty"`
	Reasons   []string `json:"reasons,omitempty"`
}

// MaxSlots bounds a table: 2¹⁷ − 1, the largest prime table the dataplane
// sizes its maps for.
const MaxSlots = 131071

// MaxBackends bounds the equivalent set.
const MaxBackends = 1024

// Pressure is a backend's composite resistance from its filtered signals.
func (p Params) Pressure(queue, latency, errRate float64) float64 {
	e := clamp(errRate/p.ErrorRef, 0, p.ErrorClip)
	pr := p.WQueue*math.Max(queue, 0)/p.QueueRef + p.WLatency*math.Max(latency, 0)/p.LatencyRef + p.WErrors*e
	if errRate > p.PenaltyAbove {
		pr += p.PenaltyAdd
	}
	// A backend reporting absurd numbers weighs as the worst, never as
	// an infinity that would turn the weights into NaN.
	if !(pr <= MaxPressure) {
		pr = MaxPressure
	}
	return pr
}

// MaxPressure caps a backend's pressure: far beyond any regime
// threshold, finite so weights and means stay numbers.
const MaxPressure = 1e6

// EWMA filters x into prev with weight alpha; the first sample is taken
// as it is.
func EWMA(alpha, prev, x float64, seen bool) float64 {
	if !seen {
		return x
	}
	return alpha*x + (1-alpha)*prev
}

// Rate is the positive-only derivative: how fast a filtered signal grows
// per second; shrinking or an empty interval is 0.
func Rate(prev, cur float64, dt time.Duration) float64 {
	if dt <= 0 {
		return 0
	}
	return math.Max(0, (cur-prev)/dt.Seconds())
}

// Saturates says whether a queue at q growing at v per second reaches
// limit within horizon (or has).
func Saturates(q, v, limit float64, horizon time.Duration) bool {
	if limit <= 0 {
		return false
	}
	if q >= limit {
		return true
	}
	return v > 0 && (limit-q)/v <= horizon.Seconds()
}

// Weights are inverse-pressure weights, summing to 1.
func Weights(pressure []float64) []float64 {
	w := make([]float64, len(pressure))
	sum := 0.0
	for i, p := range pressure {
		if !(p <= MaxPressure) {
			p = MaxPressure
		}
		w[i] = 1 / (math.Max(p, 0) + PressureFloor)
		sum += w[i]
	}
	for i := range w {
		w[i] /= sum
	}
	return w
}

// Apportion splits total in proportion to weights by largest remainder:
// each gets the floor of its share, and the rest go one each to the
// largest fractional parts (ties to the lower index). The result sums to
// total exactly.
func Apportion(weights []float64, total int) []int {
	out := make([]int, len(weights))
	if len(weights) == 0 {
		return out
	}
	weights = slices.Clone(weights)
	sum := 0.0
	for i, w := range weights {
		if !finite(w) || w < 0 {
			weights[i] = 0
		}
		sum += weights[i]
	}
	if sum == 0 || !finite(sum) {
		weights = slices.Repeat([]float64{1}, len(weights))
		sum = float64(len(weights))
	}
	frac := make([]float64, len(weights))
	given := 0
	for i, w := range weights {
		exact := math.Max(w, 0) / sum * float64(total)
		out[i] = int(math.Floor(exact))
		frac[i] = exact - float64(out[i])
		given += out[i]
	}
	order := make([]int, len(weights))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(frac[b], frac[a]) })
	// Rounding error can leave the floors a hair over or under total:
	// walk the order giving (or, from its end, taking) one at a time.
	for k := 0; given < total; k = (k + 1) % len(order) {
		out[order[k]]++
		given++
	}
	for k := len(order) - 1; given > total; k = (k + len(order) - 1) % len(order) {
		if out[order[k]] > 0 {
			out[order[k]]--
			given--
		}
	}
	return out
}

// Step runs one tick: samples name the equivalent set as it is now (a
// backend gone from it loses its slots at once; a new one starts at 0).
func Step(p Params, prev State, now time.Time, samples []Sample) (State, Decision) {
	samples = slices.Clone(samples)
	slices.SortFunc(samples, func(a, b Sample) int { return cmp.Compare(a.Name, b.Name) })
	samples = slices.CompactFunc(samples, func(a, b Sample) bool { return a.Name == b.Name })
	n := len(samples)
	// A backend's state of the last tick by name (by index: a map of
	// Backends would allocate one each, too large to sit in the map).
	byName := make(map[string]int, len(prev.Backends))
	for i, b := range prev.Backends {
		byName[b.Name] = i
	}
	old := func(name string) Backend {
		if i, ok := byName[name]; ok {
			return prev.Backends[i]
		}
		return Backend{}
	}
	var dt time.Duration
	if !prev.At.IsZero() {
		dt = now.Sub(prev.At)
	}
	next := State{Tick: prev.Tick + 1, At: now, Regime: prev.Regime, Calm: prev.Calm, DeltaMax: prev.DeltaMax}
	if next.Regime == "" {
		next.Regime = Laminar
	}
	if next.DeltaMax <= 0 || next.DeltaMax > p.MaxSlotsPerTick {
		next.DeltaMax = p.MaxSlotsPerTick
	}
	d := Decision{Names: make([]string, n), Pressure: make([]float64, n)}
	bs := make([]Backend, n)
	var reasons []string
	known, knownSum := 0, 0.0
	for i, s := range samples {
		b := old(s.Name)
		b.Name = s.Name
		d.Names[i] = s.Name
		if s.Missing || !finite(s.Queue, s.Latency, s.ErrorRate) {
			b.Flagged = true
			bs[i] = b
			continue
		}
		b.Flagged = false
		q := EWMA(p.Alpha, b.Queue, s.Queue, b.Seen)
		v := 0.0
		if b.Seen {
			since := dt
			if !b.SeenAt.IsZero() {
				since = now.Sub(b.SeenAt)
			}
			v = Rate(b.Queue, q, since)
		}
		b.Queue, b.Latency, b.Errors = q, EWMA(p.Alpha, b.Latency, s.Latency, b.Seen), EWMA(p.Alpha, b.Errors, s.ErrorRate, b.Seen)
		b.Seen, b.SeenAt = true, now
		b.Pressure = p.Pressure(b.Queue, b.Latency, b.Errors)
		b.Crisis = Saturates(b.Queue, v, p.QueueLimit, p.Horizon)
		if b.Crisis {
			// Saturation ahead counts as crisis now: the backend is
			// weighted as one in crisis, before its queue is full.
			b.Pressure = math.Max(b.Pressure, p.CrisisAbove)
			reasons = append(reasons, fmt.Sprintf("%s: queue %.3g reaches its limit %g within %s", s.Name, b.Queue, p.QueueLimit, p.Horizon))
		}
		bs[i] = b
		known++
		knownSum += b.Pressure
	}
	for i := range bs {
		if bs[i].Flagged {
			if !bs[i].Seen {
				// Never measured: the mean of the measured ones, so it
				// neither attracts nor repels traffic.
				bs[i].Pressure = 0
				if known > 0 {
					bs[i].Pressure = knownSum / float64(known)
				}
			}
			reasons = append(reasons, fmt.Sprintf("%s: no metrics, pressure held at %.3g", bs[i].Name, bs[i].Pressure))
		}
		d.Pressure[i] = bs[i].Pressure
	}
	d.Weights = Weights(d.Pressure)
	d.Targets = Apportion(d.Weights, p.Slots)

	// Skew: the observed split of the connects since the last tick against
	// the weights that tick steered to. Against this tick's weights, a
	// backend degrading would read as a worsening split and shrink Δmax
	// exactly when the field must move.
	var delta []uint64
	var total uint64
	countersOK := n > 0
	for i, s := range samples {
		b := old(s.Name)
		if s.NoConnects || !b.Counted || s.Connects < b.Connects {
			countersOK = false
		}
		if !s.NoConnects {
			bs[i].Connects, bs[i].Counted = s.Connects, true
		} else {
			bs[i].Counted = false
		}
	}
	if countersOK {
		delta = make([]uint64, n)
		for i, s := range samples {
			delta[i] = s.Connects - old(s.Name).Connects
			total += delta[i]
		}
	}
	hold := false
	if countersOK && total >= max(p.MinConnects, 1) {
		for i := range samples {
			d.Skew = math.Max(d.Skew, math.Abs(float64(delta[i])/float64(total)-old(samples[i].Name).Weight))
		}
		d.SkewKnown = true
		if prev.SkewKnown && d.Skew > prev.Skew+p.SkewEpsilon {
			shrunk := int(math.Floor(float64(next.DeltaMax) * p.SkewShrink))
			if shrunk < 1 {
				hold = true
				d.Guard = GuardHold
				next.DeltaMax = 1
			} else {
				d.Guard = GuardShrink
				next.DeltaMax = shrunk
			}
			reasons = append(reasons, fmt.Sprintf("skew %.3f worsened from %.3f by more than %g: Δmax %d", d.Skew, prev.Skew, p.SkewEpsilon, next.DeltaMax))
		} else if next.DeltaMax < p.MaxSlotsPerTick {
			// Not worsening: Δmax grows back by the same factor.
			next.DeltaMax = min(p.MaxSlotsPerTick, int(math.Ceil(float64(next.DeltaMax)/p.SkewShrink)))
		}
	}
	next.Skew, next.SkewKnown = d.Skew, d.SkewKnown
	d.DeltaMax = next.DeltaMax

	// The step from the current slots.
	cur := make([]int, n)
	have := 0
	for i := range bs {
		cur[i] = old(bs[i].Name).Slots
		have += cur[i]
	}
	fresh := len(prev.Backends) == 0 || tableSize(prev.Backends) != p.Slots
	switch {
	case fresh:
		d.Slots = slices.Clone(d.Targets)
	default:
		if freed := p.Slots - have; freed > 0 {
			// A removed backend's slots go at once (nothing may route to
			// it), to the backends short of their targets.
			cur = placeFreed(cur, d.Targets, freed)
			reasons = append(reasons, fmt.Sprintf("%d slots of removed backends handed out", freed))
		}
		if hold {
			d.Slots = cur
		} else {
			m := make([]Motion, n)
			for i := range bs {
				// Urgent at transitionAbove: a saturation forecast (its
				// pressure lifted to crisisAbove) and the error penalty
				// (by default) put a backend there.
				o := old(bs[i].Name)
				m[i] = Motion{Dir: o.Dir, MovedAt: o.MovedAt, Target: o.Target, Urgent: d.Pressure[i] >= p.TransitionAbove}
			}
			d.Slots, d.Damped = DampedStep(now, cur, d.Targets, next.DeltaMax, m)
			if d.Damped > 0 {
				reasons = append(reasons, fmt.Sprintf("damping held %d slots: a count moves back no sooner than %s after it moved, nor on once its target turned back, unless its backend's pressure reaches %g", d.Damped, ReverseHold, p.TransitionAbove))
			}
		}
	}
	for i := range bs {
		bs[i].Slots = d.Slots[i]
		bs[i].Weight = d.Weights[i]
		bs[i].Target = d.Targets[i]
		delta := d.Slots[i] - old(bs[i].Name).Slots
		if delta != 0 && !fresh {
			// (Laying a table out is no move: nothing was routed by one.)
			bs[i].Dir, bs[i].MovedAt = cmp.Compare(delta, 0), now
		}
		d.Moved += abs(delta)
	}
	for _, b := range prev.Backends {
		if !slices.Contains(d.Names, b.Name) {
			d.Moved += b.Slots
		}
	}
	d.Moved /= 2
	next.Backends = bs

	// Regime and admission.
	for i := range bs {
		if p.Slots > 0 {
			d.MeanPressure += float64(d.Slots[i]) / float64(p.Slots) * d.Pressure[i]
		}
	}
	next.Regime, next.Calm = NextRegime(p, prev.Regime, prev.Calm, d.MeanPressure)
	d.Regime = next.Regime
	d.Admission = AdmissionFor(p, d.Regime, n)
	d.ScaleHint = d.Regime == Crisis || (n == 1 && d.Regime != Laminar)
	if d.ScaleHint {
		reasons = append(reasons, fmt.Sprintf("mean pressure %.3g in %s with %d backend(s): more capacity needed", d.MeanPressure, d.Regime, n))
	}
	d.Reasons = reasons
	return next, d
}

func tableSize(bs []Backend) int {
	s := 0
	for _, b := range bs {
		s += b.Slots
	}
	return s
}

// placeFreed gives freed slots to the backends below their targets, in
// proportion to how far below; the deficits always cover them (targets
// sum to the table size).
func placeFreed(cur, target []int, freed int) []int {
	deficit := make([]float64, len(cur))
	for i := range cur {
		deficit[i] = float64(max(0, target[i]-cur[i]))
	}
	add := Apportion(deficit, freed)
	out := slices.Clone(cur)
	for i := range out {
		out[i] += add[i]
	}
	return out
}

// ViscousStep moves each count towards its target by at most dmax,
// keeping the sum: the moves are clipped to ±dmax, then whichever side
// (gains or losses) is larger is scaled down by largest remainder to
// match the other.
func ViscousStep(cur, target []int, dmax int) []int {
	step := make([]int, len(cur))
	for i := range cur {
		step[i] = max(-dmax, min(dmax, target[i]-cur[i]))
	}
	return apply(cur, balance(step))
}

// Motion is what the damping knows of one backend: which way its slot
// count last moved (+1 up, −1 down, 0 not yet) and when, its target of the
// last tick, and whether it must shed now (in Step: its pressure is at or
// above transitionAbove).
type Motion struct {
	Dir     int
	MovedAt time.Time
	Target  int
	Urgent  bool
}

// DampedStep is ViscousStep with damping. A step is held (not taken) when
//   - it would reverse the backend's last move, made less than
//     ReverseHold ago: what a blip moved comes back a hold later;
//   - it would go on with that move though the backend's target has
//     turned back since the last tick: a blip's pull is spent after its
//     first tick, while a backend degrading pulls on.
//
// An urgent backend's loss is never held, nor left without takers: when
// the gains free to move fall short of it, held gains are let go (by
// largest remainder of their sizes) as far as it needs. It returns the
// counts and the slots held (the sum of the held steps' sizes).
func DampedStep(now time.Time, cur, target []int, dmax int, m []Motion) ([]int, int) {
	n := len(cur)
	step, wait := make([]int, n), make([]int, n)
	urgent, freeUp := 0, 0
	for i := range cur {
		want := max(-dmax, min(dmax, target[i]-cur[i]))
		dir := cmp.Compare(want, 0)
		since := now.Sub(m[i].MovedAt)
		recent := m[i].Dir != 0 && since >= 0 && since < ReverseHold
		switch {
		case want == 0:
		case want < 0 && m[i].Urgent:
			step[i] = want
			urgent -= want
		case recent && dir == -m[i].Dir, recent && dir*(target[i]-m[i].Target) < 0:
			wait[i] = want
		default:
			step[i] = want
			freeUp += max(want, 0)
		}
	}
	if short := urgent - freeUp; short > 0 {
		w := make([]float64, n)
		room := 0
		for i, x := range wait {
			if x > 0 {
				w[i], room = float64(x), room+x
			}
		}
		for i, x := range Apportion(w, min(short, room)) {
			step[i] += x
			wait[i] -= x
		}
	}
	held := 0
	for _, x := range wait {
		held += abs(x)
	}
	return apply(cur, balance(step)), held
}

// balance scales down whichever side of the steps (gains or losses) is
// larger, by largest remainder, to match the other, so the counts' sum
// stays.
func balance(step []int) []int {
	up, down := 0, 0
	for _, s := range step {
		if s > 0 {
			up += s
		} else {
			down -= s
		}
	}
	shrink := func(sign int, to int) {
		w := make([]float64, len(step))
		for i := range step {
			if step[i]*sign > 0 {
				w[i] = float64(step[i] * sign)
			}
		}
		part := Apportion(w, to)
		for i := range step {
			if step[i]*sign > 0 {
				step[i] = part[i] * sign
			}
		}
	}
	switch {
	case up > down:
		shrink(1, down)
	case down > up:
		shrink(-1, up)
	}
	return step
}

func apply(cur, step []int) []int {
	out := make([]int, len(cur))
	for i := range cur {
		out[i] = cur[i] + step[i]
	}
	return out
}

// NextRegime moves the regime on the mean pressure, with hysteresis:
// transition is left only below laminarBelow × transitionAbove, and crisis
// passes through recovery until the pressure has stayed below
// transitionAbove for RecoveryTicks ticks.
func NextRegime(p Params, prev Regime, calm int, mean float64) (Regime, int) {
	switch {
	case mean >= p.CrisisAbove:
		return Crisis, 0
	case prev == Crisis && mean >= laminarBelow*p.CrisisAbove:
		// The same band as transition's: a mean hovering at the crisis
		// line does not toggle hard and soft admission every tick.
		return Crisis, 0
	case prev == Crisis || prev == Recovery:
		if mean >= p.TransitionAbove {
			return Recovery, 0
		}
		if calm+1 >= p.RecoveryTicks {
			return Laminar, 0
		}
		return Recovery, calm + 1
	case prev == Transition:
		if mean < laminarBelow*p.TransitionAbove {
			return Laminar, 0
		}
		return Transition, 0
	case mean >= p.TransitionAbove:
		return Transition, 0
	}
	return Laminar, 0
}

// AdmissionFor maps the regime to what the dataplane enforces: crisis
// refuses beyond the budget, recovery sheds softly; transition sheds
// softly only with one backend, where no rerouting can relieve it.
func AdmissionFor(p Params, r Regime, backends int) Admission {
	switch {
	case r == Crisis:
		return Admission{Mode: Hard, Budget: p.HardBudget}
	case r == Recovery, r == Transition && backends == 1:
		return Admission{Mode: Soft, Shed: p.SoftShed}
	}
	return Admission{Mode: Normal}
}

// Jitter is the tick's period every, moved by a bounded deterministic
// offset in ±frac·every drawn from seed and the tick's index, so groups and
// nodes do not tick in phase with each other or with periodic load.
func Jitter(seed string, tick uint64, every time.Duration, frac float64) time.Duration {
	h := fnv64(fnvBasis, seed)
	for i := range 8 {
		h ^= (tick >> (8 * i)) & 0xff
		h *= fnvPrime
	}
	u := float64(h>>11) / (1 << 53) // [0, 1)
	return every + time.Duration((2*u-1)*frac*float64(every))
}

const (
	fnvBasis = 0xcbf29ce484222325
	fnvPrime = 0x100000001b3
)

func fnv64(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

func finite(xs ...float64) bool {
	for _, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}

func clamp(x, lo, hi float64) float64 { return math.Max(lo, math.Min(hi, x)) }

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// Admission bounds. The dataplane's token bucket counts in 1e12ths of a
// connect in a u64, so a bucket holds at most about 1.8e7 connects: the
// burst stays well under that, and the budget's refill per nanosecond
// (budget × 1000 units) stays far from overflow.
const (
	MaxBurst      = 1_000_000
	MaxHardBudget = 10_000_000 // connects per second
)

// ScrapeTimeout is how long a tick waits for its backends' metrics: most
// of a tick, never more than 2 s.
func ScrapeTimeout(every time.Duration) time.Duration {
	return min(every*8/10, 2*time.Second)
}

// MinFailsafe is the shortest failsafe threshold a loop ticking every
// ±jitter can keep clear of: the longest gap between two heartbeats is a
// jittered period plus a full scrape, and one more period leaves room for
// a slow step or a pause, so a healthy agent never trips its own failsafe.
func MinFailsafe(every time.Duration, jitter float64) time.Duration {
	return time.Duration(float64(every)*(1+jitter)) + ScrapeTimeout(every) + every
}
