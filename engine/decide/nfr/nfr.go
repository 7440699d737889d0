// Package nfr decides, for one NFR spec, a replicas lower bound and memory
// requests and limits from measured signals. It is a pure function: inputs
// in, intents with their numbers out.
package nfr

import (
	"fmt"
	"github.com/setpoint-dev/setpoint/providers/workload"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/intent"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/noderes"
)

// Attribute paths of the objects an NFR acts on (package workload's).
var (
	AttrReplicas    = workload.Replicas
	AttrMinReplicas = workload.MinReplicas
	AttrMaxReplicas = workload.MaxReplicas
	AttrTargetCPU   = workload.TargetCPU
	AttrMinScale    = workload.MinScale
	// AttrScaleDownWindow is an HPA's scale-down stabilization window.
	AttrScaleDownWindow = workload.ScaleDownWindow
)

// Dimensions of an NFR.
const (
	Replicas intent.Dimension = "replicas"
	Memory   intent.Dimension = "memory"
	// Autoscaler is what an NFR that owns the count writes of its HPA
	// beside minReplicas (autoscaler.owns: count).
	Autoscaler intent.Dimension = "autoscaler"
)

// ContainerAttr is the path of a container's memory request or limit
// (which: requests or limits).
func ContainerAttr(container, which string) addrs.Path {
	return workload.ContainerAttr(container, which)
}

// Container returns the container a memory path is about, and whether it
// is one.
func Container(p addrs.Path) (string, bool) {
	if !p.HasPrefix(workload.Containers) || p.Last() != addrs.F("memory") {
		return "", false
	}
	return p.Selected("name")
}

// Dimension says which dimension an attribute an NFR writes belongs to:
// container memory, or replicas.
func Dimension(p addrs.Path) intent.Dimension {
	if _, ok := Container(p); ok {
		return Memory
	}
	if p == AttrTargetCPU || p == AttrScaleDownWindow {
		return Autoscaler
	}
	return Replicas
}

// Fixed floors and ceilings of the memory recommendation.
const (
	MiB            = int64(spec.MiB)
	minRequest     = 64 * MiB
	maxRequest     = 4096 * MiB
	minLimit       = 128 * MiB
	maxLimit       = 8192 * MiB
	changeMinBytes = 64 * MiB
	changeMinShare = 0.20
	// NoTraffic is the measured rate below which there is nothing to scale
	// from.
	NoTraffic = 1e-3
)

// Signals are the measurements for one workload; nil means missing, with
// the reason in Missing.
type Signals struct {
	RPS        *float64 // requests per second served
	CPUMilli   *float64 // total CPU of the workload's pods, millicores
	P99        *float64 // seconds
	WorkingSet map[string]float64
	Missing    map[string]string

	// For the slo policy: the peak short-window arrival rate over a
	// recent window (requests/s, refused ones included: they are demand
	// too), the lowest mean latency over a longer one (seconds: the
	// service-time estimate), and the fit of CPU on RPS over it.
	Peak        *float64
	ServiceTime *float64
	Fit         *Fit
	FitOK       bool // Fit has a usable slope (FitMoments)
	// ReadyMin is the fewest pods ready over the p99's window and the
	// minute before it (whose backlog drains into it): the measured p99
	// judges the model only when at least the model's count served both.
	ReadyMin *float64
	// History is the arrival rate (req/s, short window) at every
	// HistoryStep over the recent past, oldest first: what burst memory
	// learns from, and where the peak it keeps is read.
	History     []float64
	HistoryStep time.Duration
}

// Input is everything one decision needs.
type Input struct {
	Spec *spec.NFR
	// Target is the workload (Deployment or KnativeService) as read; HPA
	// the Deployment's autoscaler (HPA.Exists false when there is none).
	Target, HPA providers.Object
	// Node is the workload's node-applied memory (memory.apply: node), as
	// the node agent holds it; its Address is zero when no node agent
	// serves the workload.
	Node    providers.Object
	Signals Signals
	// UserValue is each attribute's value when setpoint first adopted it.
	UserValue map[addrs.Path]values.Value
}

// Note explains a decision not to recommend something.
type Note struct {
	Dimension intent.Dimension
	Text      string
}

// Output is the decision.
type Output struct {
	Intents []intent.Intent
	Notes   []Note
}

// Decide runs both dimensions of one NFR.
func Decide(in Input) Output {
	var out Output
	s := in.Spec
	if s.Spec.Enforcement.Replicas != spec.ModeOff {
		replicas(in, &out)
	}
	if s.Spec.Enforcement.Memory != spec.ModeOff {
		memory(in, &out)
	}
	return out
}

func (o *Output) note(d intent.Dimension, format string, args ...any) {
	o.Notes = append(o.Notes, Note{Dimension: d, Text: fmt.Sprintf(format, args...)})
}

// ReplicasRecommendation is ceil((target / rps) × (cpu / cpuPerPod)), at
// least 1, +1 when p99 is above its target. It returns the recommendation
// and the arithmetic, or ok false with the reason there is none.
func ReplicasRecommendation(targetRPS float64, cpuPerPod spec.MilliCPU, latency time.Duration, sig Signals) (rec int64, why string, ok bool) {
	rps, cpu, why, ok := traffic(sig)
	if !ok {
		return 0, why, false
	}
	raw := (targetRPS / rps) * (cpu / float64(cpuPerPod))
	base := int64(math.Ceil(raw - 1e-9))
	why = fmt.Sprintf("ceil((%s/%s) × (%.0fm/%dm)) = %d", num(targetRPS), num(rps), cpu, cpuPerPod, base)
	if base < 1 {
		base = 1
		why += ", floor 1"
	}
	rec = base
	if latency > 0 {
		switch {
		case sig.P99 == nil:
			why += "; latency " + missing(sig, "p99") + ", no bump"
		case time.Duration(*sig.P99*float64(time.Second)) > latency:
			rec++
			why += fmt.Sprintf(", p99 %s > %s: +1", dur(*sig.P99), latency)
		default:
			why += fmt.Sprintf(", p99 %s ≤ %s", dur(*sig.P99), latency)
		}
	}
	return rec, why, true
}

// SLORec is the slo policy's decision: the Replicas the rate (and a
// backlog's drain) asks for, the Down count a decrease lands on when it is
// above them (the model's sizing with the tolerance's headroom on the
// rate: the hysteresis that keeps a count from flapping on noise), the HPA TargetCPU in percent the sizing runs at (0 when the
// model has none to give), and Why, the arithmetic.
type SLORec struct {
	Replicas, Down, TargetCPU int64
	Why                       string
	// Rising says why Down is higher than the headroom alone makes it:
	// the rate rose over the last minutes by more than the tolerance (""
	// when it did not, or that changes nothing).
	Rising string
}

// SLORecommendation is SLODecision's count and arithmetic.
func SLORecommendation(s spec.NFRSpec, sig Signals) (rec int64, why string, ok bool) {
	r, ok := SLODecision(s, sig, false)
	return r.Replicas, r.Why, ok
}

// SLODecision sizes replicas for the p99 target (the slo policy):
// the rate to serve is the largest of the measured rate, its recent peak
// and the floor share of minRPS; a pod serves cpuPerPod ÷ the marginal CPU
// per request (idle CPU removed) at 100%; it is run at the highest
// utilisation whose p99 meets the target in an M/M/c model of the pod (c =
// the requests it serves at once, from the service time); the count is
// multiplied by the feedback factor when the measured p99 is over the
// target, and raised to drain a backlog the p99 shows. It returns the recommendation and every number it used, or ok
// false with the reason there is none.
//
// With no latency target there is no tail to protect: a workload whose
// own autoscaler follows its load (autoscaled: Knative's, or an HPA the
// NFR gives only a floor) is kept able to serve minRPS, and the load above
// it is its autoscaler's, as it would be without setpoint (sizing the
// floor for measured peaks only pays for pods the autoscaler would add
// anyway, and longer).
func SLODecision(s spec.NFRSpec, sig Signals, autoscaled bool) (SLORec, bool) {
	rps, cpu, why, ok := traffic(sig)
	if !ok {
		return SLORec{Why: why}, false
	}
	var fit Fit
	fitOK := false
	if sig.Fit != nil {
		fit, fitOK = *sig.Fit, sig.FitOK
	}
	cost, ok := MarginalCost(rps, cpu, fit, fitOK)
	if !ok {
		return SLORec{Why: fmt.Sprintf("no replicas recommendation: no CPU cost per request from %s req/s and %.0fm", num(rps), cpu)}, false
	}
	var target, p99, svc float64
	svcWhy := ""
	if s.Latency != nil {
		target = s.Latency.P99.D().Seconds()
		switch {
		case s.Latency.ServiceTime != nil:
			svc, svcWhy = s.Latency.ServiceTime.D().Seconds(), "given"
		case sig.ServiceTime != nil:
			svc, svcWhy = *sig.ServiceTime, "lowest mean latency over 30m"
		}
	}
	if sig.P99 != nil {
		p99 = *sig.P99
	}
	peak := math.NaN()
	if sig.Peak != nil {
		peak = *sig.Peak
	}
	if target == 0 && autoscaled {
		// Able to serve minRPS at the most utilisation the model ever
		// sizes for: with no tail promised, no more headroom than that.
		perPod := float64(s.CPUPerPod) / cost.PerRequest
		if !(perPod > 0) || math.IsInf(perPod, 0) {
			return SLORec{Replicas: 1, Down: 1, Why: fmt.Sprintf("no CPU measured per request (%s): 1 pod serves minRPS %s req/s; no latency target: its autoscaler follows the load above it", cost.Why, num(s.Throughput.MinRPS))}, true
		}
		n := replicasOf(s.Throughput.MinRPS/(MaxUtilisation*perPod), 1)
		return SLORec{Replicas: n, Down: n, Why: fmt.Sprintf("ceil(minRPS %s req/s ÷ (ρ %.2f × %s req/s a pod)) = %d; a pod: %dm ÷ %s; no latency target: its autoscaler follows the load above minRPS",
			num(s.Throughput.MinRPS), MaxUtilisation, num(round1(perPod)), n, s.CPUPerPod, cost.Why)}, true
	}
	// The utilisation and a pod's capacity do not depend on the rate:
	// sized once, at the mean, and read at every other rate below.
	base := SizeForSLO(rps, cost.PerRequest, float64(s.CPUPerPod), svc, target, p99)
	memory, kept := "", 0.0
	startup := DefaultStartup
	if s.Throughput.Startup > 0 {
		startup = s.Throughput.Startup.D()
	}
	if len(sig.History) > 0 {
		// The need now is the most the rate asked for within the last
		// startup: a pod let go sooner than that could not be back in time
		// for the same need (the noise filter with a physical reason). The
		// newest point is the short-window rate now, so a burst is seen as
		// soon as it shows there, not a window later.
		k := 1
		if sig.HistoryStep > 0 {
			k += int(startup / sig.HistoryStep)
		}
		for _, v := range sig.History[max(0, len(sig.History)-k):] {
			if v >= 0 && !(v <= peak) && !math.IsInf(v, 0) {
				peak = v
			}
		}
		// The bursts of the history are weighed by a pod's capacity.
		if base.PerPod > 0 {
			b := BurstMemory(BurstInput{Rates: sig.History, Step: sig.HistoryStep, PodRate: base.Rho * base.PerPod, FullRate: base.PerPod,
				Startup: startup, LateShare: 1 - sizingQuantile})
			kept = float64(b.Pods) * base.Rho * base.PerPod
			memory = "; burst memory: " + b.Why
		}
	}
	peak0 := peak // the need now, before burst memory
	nowRate, _ := DesignRate(rps, peak, s.Throughput.MinRPS, float64(s.Throughput.Floor))
	if kept > nowRate {
		peak = kept
	}
	rate, rateWhy := DesignRate(rps, peak, s.Throughput.MinRPS, float64(s.Throughput.Floor))
	if kept > 0 && peak == kept {
		rateWhy = fmt.Sprintf("burst memory %s req/s", num(round1(kept)))
	}
	z := base.at(rate)
	// A p99 over target while fewer pods than the model's count were ready
	// is what too few pods do, and the model's count is the cure: the
	// feedback, which corrects the model, waits for a window the model's
	// count served whole (so a cold start is not doubled).
	unjudged := ""
	if need := math.Ceil(z.Raw - 1e-9); z.Feedback > 1 && sig.ReadyMin != nil && *sig.ReadyMin < need {
		unjudged = fmt.Sprintf("; p99 %s > %s with %s pods ready in its last two minutes, fewer than the model's %d: no feedback", dur(p99), dur(target), num(*sig.ReadyMin), int64(need))
		z.Feedback, z.Replicas = 1, replicasOf(z.Raw, 1)
	}
	// A backlog: when a rise was met by too few pods, each pod is booked
	// about W = p99 − service time ahead, and with random routing a pod
	// drains only what its share of the rate leaves spare: W·μ ÷ (μ − λ/n)
	// seconds once the n pods serve. The count that drains it within a
	// startup of then is λ ÷ (μ·(1 − W ÷ startup)); from half a startup
	// deep it is held at twice the full-CPU count (draining in 2·W). The
	// model's count, sized for the rate alone, left the flash crowd's
	// backlog a minute or more of late requests after the pods were
	// ready. The p99 is the last minute's, so the count stays up about a
	// minute after the backlog is gone, and any p99 over target counts
	// (a slow dependency too: the count is bounded, the feedback is not
	// undone). It is the count asked for; Down, where a decrease would
	// otherwise land, is the model's.
	drain, drainN := "", int64(0)
	if w := p99 - svc; target > 0 && p99 > target && finiteVal(p99) && w > 0 && z.PerPod > 0 && finiteVal(peak0) && peak0 > 0 {
		f, capped := 1-w/startup.Seconds(), ""
		if f < drainShare {
			f, capped = drainShare, ", at most twice the full-CPU count"
		}
		if n := replicasOf(peak0/(f*z.PerPod), 1); n > z.Replicas {
			drain = fmt.Sprintf("; backlog: p99 %s, %s of it queueing: ceil(%s req/s ÷ (%s req/s a pod × (1 − %s ÷ startup %s)%s)) = %d",
				dur(p99), dur(w), num(round1(peak0)), num(round1(z.PerPod)), dur(w), dur(startup.Seconds()), capped, n)
			drainN = n
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "ceil(%s ÷ (ρ %.2f × %s req/s a pod)) = %d", rateWhy, z.Rho, num(round1(z.PerPod)), int64(math.Ceil(z.Raw-1e-9)))
	fmt.Fprintf(&b, "; a pod: %dm ÷ %s", s.CPUPerPod, cost.Why)
	switch {
	case target == 0:
		fmt.Fprintf(&b, "; no latency target: ρ %.2f", z.Rho)
	case svc == 0:
		fmt.Fprintf(&b, "; service time %s: ρ %.2f", missing(sig, "serviceTime"), z.Rho)
	case !z.Feasible:
		fmt.Fprintf(&b, "; p99 %s cannot be met at any load with service time %s (%s) in M/M/%d: ρ %.2f", dur(target), dur(svc), svcWhy, int(z.Servers), z.Rho)
	default:
		fmt.Fprintf(&b, "; ρ: p99 ≤ %s in M/M/%d with service time %s (%s)", dur(target), int(z.Servers), dur(svc), svcWhy)
	}
	if target > 0 {
		switch {
		case sig.P99 == nil:
			b.WriteString("; measured p99 " + missing(sig, "p99"))
		case unjudged != "":
			b.WriteString(unjudged)
		case z.Feedback > 1:
			fmt.Fprintf(&b, "; p99 %s > %s: ×%.2f = %d", dur(p99), dur(target), z.Feedback, z.Replicas)
		default:
			fmt.Fprintf(&b, "; p99 %s ≤ %s", dur(p99), dur(target))
		}
	}
	b.WriteString(drain)
	b.WriteString(memory)
	if len(sig.History) == 0 && sig.Peak == nil {
		fmt.Fprintf(&b, "; rate history %s: sized on the minute's mean, no burst memory", missing(sig, "history"))
	}
	rec := SLORec{Replicas: max(z.Replicas, drainN), Down: z.Replicas, Why: b.String()}
	if tol := float64(s.Safety.Tolerance); tol > 0 {
		// The headroom is on the minute's mean rate, not on what burst
		// memory keeps (the memory already says how long its pods stay),
		// nor on the short peaks of the last startup (they are kept as
		// they are), nor on minRPS's floor (it has no noise to filter).
		headroom, _ := DesignRate(rps*(1+tol), peak0, s.Throughput.MinRPS, float64(s.Throughput.Floor))
		zNow := base.at(headroom)
		rec.Down = max(z.Replicas, replicasOf(zNow.Raw, z.Feedback))
	}
	if projected, why := rising(sig.History, sig.HistoryStep, float64(s.Safety.Tolerance)); projected > 0 {
		// A decrease made on a rising rate is undone within minutes, with
		// a cold pod between: it lands no lower than the count the rate
		// would need if it went on rising as it did, for as long again.
		zr := base.at(projected * (1 + float64(s.Safety.Tolerance)))
		if n := replicasOf(zr.Raw, z.Feedback); n > rec.Down {
			rec.Down, rec.Rising = n, fmt.Sprintf("%s: %d for %s req/s", why, n, num(round1(projected)))
		}
	}
	if z.Feasible && target > 0 && z.ServiceTime > 0 && z.PerPod > 0 {
		// The HPA measures CPU per pod against its request: the sized
		// utilisation plus each pod's share of the idle CPU.
		idle := cost.Idle / float64(max(z.Replicas, 1)) / float64(s.CPUPerPod)
		rec.TargetCPU = int64(math.Round(100 * math.Min(MaxUtilisation, z.Rho+idle)))
	}
	return rec, true
}

// drainShare is the least share of a pod's capacity a backlog's count
// leaves spare: a backlog half a startup deep or deeper is drained at
// twice the full-CPU count, not more.
const drainShare = 0.5

func round1(f float64) float64 { return math.Round(f*10) / 10 }

// traffic returns the measured rate and CPU both policies size from, or
// the reason there is nothing to size from.
func traffic(sig Signals) (rps, cpu float64, why string, ok bool) {
	switch {
	case sig.RPS == nil:
		return 0, 0, "no replicas recommendation: requests per second " + missing(sig, "rps"), false
	case sig.CPUMilli == nil:
		return 0, 0, "no replicas recommendation: CPU usage " + missing(sig, "cpu"), false
	case *sig.RPS < NoTraffic:
		return 0, 0, fmt.Sprintf("no replicas recommendation: measured %s req/s is ~0", num(*sig.RPS)), false
	}
	return *sig.RPS, *sig.CPUMilli, "", true
}

func missing(sig Signals, name string) string {
	if r, ok := sig.Missing[name]; ok {
		return "missing (" + r + ")"
	}
	return "missing"
}

func replicas(in Input, out *Output) {
	s := in.Spec.Spec
	if s.Throughput == nil {
		return // no throughput target: replicas are not set, only memory tuned
	}
	var latency time.Duration
	if s.Latency != nil {
		latency = s.Latency.P99.D()
	}
	rec, why, ok := ReplicasRecommendation(s.Throughput.MinRPS, s.CPUPerPod, latency, in.Signals)
	var slo SLORec
	if s.Policy != spec.PolicyReference {
		autoscaled := s.Target.Kind == "KnativeService" || in.HPA.Exists && !s.OwnsCount()
		slo, ok = SLODecision(s, in.Signals, autoscaled)
		rec, why = slo.Replicas, slo.Why
	}
	if !ok {
		out.note(Replicas, "%s", why)
		return
	}
	it := intent.Intent{Kind: intent.LowerBound, Dimension: Replicas,
		Recommended: values.CountOf(rec), Value: values.CountOf(rec), Rationale: why, Source: in.Spec.ID(), SourcePos: in.Spec.Src.PosOf("spec.throughput.minRPS")}
	switch {
	case s.Target.Kind == "KnativeService":
		it.Attr = addrs.Attr{Object: in.Target.Address, Path: AttrMinScale}
	case in.HPA.Exists:
		it.Attr = addrs.Attr{Object: in.HPA.Address, Path: AttrMinReplicas}
		// minReplicas above the HPA's own maximum would be refused.
		if max, ok := in.HPA.Attributes[AttrMaxReplicas]; ok && max.Type() == values.Count && max.Int() > 0 {
			out.Intents = append(out.Intents, intent.Intent{Attr: it.Attr, Kind: intent.UpperBound,
				Dimension: Replicas, Value: max, Recommended: max, Rationale: "the HPA's maxReplicas",
				Source: it.Source, SourcePos: it.SourcePos})
		}
	case s.Autoscaler != nil && s.Autoscaler.Create:
		it.Attr = addrs.Attr{Object: in.HPA.Address, Path: AttrMinReplicas}
		it.Create = &intent.Create{Attributes: map[addrs.Path]values.Value{
			AttrMinReplicas: values.CountOf(rec),
			AttrMaxReplicas: values.CountOf(int64(s.Autoscaler.MaxReplicas)),
			AttrTargetCPU:   values.CountOf(targetCPU(s.Autoscaler.TargetCPU)),
		}}
		it.SourcePos = in.Spec.Src.PosOf("spec.autoscaler")
	default:
		it.Attr = addrs.Attr{Object: in.Target.Address, Path: AttrReplicas}
	}
	if cur, ok := currentCount(in, it.Attr); ok && slo.Down > 0 && rec < cur {
		// The way down lands with the tolerance's headroom on the rate,
		// and not at all while that headroom needs what runs now, nor
		// while the rate is rising.
		switch {
		case slo.Down >= cur && slo.Rising != "":
			it.Value = values.CountOf(cur)
			it.Rationale += fmt.Sprintf("; %d would do now, but %s: %d kept", rec, slo.Rising, cur)
		case slo.Down >= cur:
			it.Value = values.CountOf(cur)
			it.Rationale += fmt.Sprintf("; %d would be within the %s%% band: %d kept", rec, shortNum(100*float64(s.Safety.Tolerance)), cur)
		case slo.Down > rec && slo.Rising != "":
			it.Value = values.CountOf(slo.Down)
			it.Rationale += fmt.Sprintf("; down to %d only: %s", slo.Down, slo.Rising)
		case slo.Down > rec:
			it.Value = values.CountOf(slo.Down)
			it.Rationale += fmt.Sprintf("; down to %d, the count with %s%% headroom on the rate", slo.Down, shortNum(100*float64(s.Safety.Tolerance)))
		}
	}
	if s.OwnsCount() && in.HPA.Exists && it.Attr.Object == in.HPA.Address {
		autoscalerIntents(in, slo, out)
	}
	if u, ok := in.UserValue[it.Attr.Path]; ok && u.Type() == values.Count && u.Compare(it.Value) > 0 {
		it.Value = u
		it.Rationale += fmt.Sprintf("; the user's value %d is higher", u.Int())
	}
	out.Intents = append(out.Intents, it)
}

// risingOver is the time rising compares: the mean rate of its last half
// against that of its first.
const risingOver = 2 * time.Minute

// rising is, when the mean rate of the last minute of rates (sampled
// every step) is above that of the minute before it by more than tol, the
// rate two minutes on if it went on rising as it did (a minute to see a
// rise, a minute to start pods for it), and the rise in words; 0 when it
// is not rising so, or the history is too short to say.
func rising(rates []float64, step time.Duration, tol float64) (float64, string) {
	if step <= 0 || !(tol >= 0) {
		return 0, ""
	}
	half := int(risingOver / 2 / step)
	if half < 1 || len(rates) < 2*half {
		return 0, ""
	}
	mean := func(v []float64) float64 {
		var s float64
		for _, x := range v {
			s += x
		}
		return s / float64(len(v))
	}
	last := mean(rates[len(rates)-half:])
	before := mean(rates[len(rates)-2*half : len(rates)-half])
	if !(before > 0) || !(last > before*(1+tol)) || math.IsInf(last, 0) {
		return 0, ""
	}
	return last + 2*(last-before), fmt.Sprintf("the rate rose %s%% in a minute (%s → %s req/s)", num(round1(100*(last/before-1))), num(round1(before)), num(round1(last)))
}

// currentCount is the count attr holds now.
func currentCount(in Input, attr addrs.Attr) (int64, bool) {
	for _, o := range []providers.Object{in.Target, in.HPA} {
		if o.Address == attr.Object && o.Exists {
			if v, ok := o.Attributes[attr.Path]; ok && v.Type() == values.Count {
				return v.Int(), true
			}
		}
	}
	return 0, false
}

// autoscalerIntents are what an NFR that owns the count (autoscaler.owns:
// count) writes of an HPA it found, beside minReplicas: the CPU
// utilisation target the sizing runs at, so the HPA's own reaction (every
// 15 s, doubling) holds the SLO's operating point; and a scale-down
// window as short as the NFR's stability, since the NFR's minReplicas
// carries the burst memory and the HPA's 300 s default would only keep
// pods the memory already let go.
func autoscalerIntents(in Input, slo SLORec, out *Output) {
	s := in.Spec
	pos := s.Src.PosOf("spec.autoscaler.owns")
	add := func(path addrs.Path, v int64, why string) {
		out.Intents = append(out.Intents, intent.Intent{Attr: addrs.Attr{Object: in.HPA.Address, Path: path}, Kind: intent.Exact,
			Dimension: Autoscaler, Value: values.CountOf(v), Recommended: values.CountOf(v), Rationale: why, Source: s.ID(), SourcePos: pos})
	}
	if slo.TargetCPU > 0 {
		if _, ok := in.HPA.Attributes[AttrTargetCPU]; ok {
			add(AttrTargetCPU, slo.TargetCPU, fmt.Sprintf("the utilisation the p99 target is sized at, with each pod's idle CPU: %d%%", slo.TargetCPU))
		} else {
			out.note(Autoscaler, "the HPA has no CPU utilisation target: setpoint does not add one")
		}
	}
	// Kubernetes takes at most an hour.
	win := min(int64(s.Spec.Safety.Stability.D()/time.Second), 3600)
	add(AttrScaleDownWindow, win, fmt.Sprintf("the NFR's stability %s: its minReplicas keeps the burst memory", s.Spec.Safety.Stability))
}

// RoundUp16Mi rounds bytes up to a multiple of 16Mi.
func RoundUp16Mi(b float64) int64 {
	const step = 16 * MiB
	n := int64(math.Ceil(b/float64(step) - 1e-12))
	return n * step
}

// MemoryRecommendation computes a container's request and limit from its
// mean working set, in the design's order.
func MemoryRecommendation(ws float64, m spec.MemorySpec) (req, lim int64, reqWhy, limWhy string) {
	lo := max(int64(m.Min), minRequest)
	hi := min(int64(m.Max), maxRequest)
	raw := max(ws*m.Headroom, float64(minRequest))
	req = RoundUp16Mi(raw)
	reqWhy = fmt.Sprintf("roundUp16Mi(%s × %s) = %s", bytesf(ws), num(m.Headroom), values.BytesOf(req))
	if ws*m.Headroom < float64(minRequest) {
		reqWhy = fmt.Sprintf("roundUp16Mi(max(%s × %s, 64Mi)) = %s", bytesf(ws), num(m.Headroom), values.BytesOf(req))
	}
	if req < lo {
		req = lo
		reqWhy += ", raised to the floor " + values.BytesOf(lo).String()
	}
	if req > hi {
		req = hi
		reqWhy += ", cut to the ceiling " + values.BytesOf(hi).String()
	}
	lim, limWhy = LimitFor(req, m.LimitFactor)
	return req, lim, reqWhy, limWhy
}

// LimitFor computes the limit from a (clamped or pinned) request.
func LimitFor(req int64, factor float64) (int64, string) {
	lim := RoundUp16Mi(max(float64(req)*factor, float64(minLimit)))
	why := fmt.Sprintf("roundUp16Mi(%s × %s) = %s", values.BytesOf(req), num(factor), values.BytesOf(lim))
	if lim < minLimit {
		lim = minLimit
	}
	if lim > maxLimit {
		lim = maxLimit
		why += ", cut to the ceiling 8Gi"
	}
	return lim, why
}

// Significant says whether a new memory value differs enough from the
// current one to recommend: by 20% or by 64Mi.
func Significant(cur, next int64) bool {
	d := next - cur
	if d < 0 {
		d = -d
	}
	return d >= changeMinBytes || float64(d) >= changeMinShare*float64(cur)
}

// Containers lists the containers of a pod template from its attributes.
func Containers(o providers.Object) []string {
	seen := map[string]bool{}
	for k := range o.Attributes {
		if c, ok := Container(k); ok {
			seen[c] = true
		}
	}
	out := make([]string, 0, len(seen))
	for c := range seen {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// targetCPU is a utilisation target in whole percent (80% when unset).
func targetCPU(p spec.Percent) int64 {
	if p <= 0 {
		return 80
	}
	return int64(math.Round(float64(p) * 100))
}

func memory(in Input, out *Output) {
	m := in.Spec.Spec.Memory
	if m.Apply == spec.MemoryNode {
		nodeMemory(in, out)
		return
	}
	inPlace := ""
	if m.Apply == spec.MemoryInPlace {
		inPlace = m.InPlaceFallback
		if inPlace == "" {
			inPlace = "hold"
		}
	}
	if m.Request != nil && m.Limit != nil {
		out.note(Memory, "memory is pinned (request %s, limit %s): not recommended", m.Request, m.Limit)
		return
	}
	containers := m.Containers
	if len(containers) == 0 {
		containers = Containers(in.Target)
	}
	for _, c := range containers {
		reqAttr, limAttr := ContainerAttr(c, "requests"), ContainerAttr(c, "limits")
		if _, ok := in.Target.Attributes[reqAttr]; !ok {
			out.note(Memory, "container %s: not in the pod template", c)
			continue
		}
		ws, ok := in.Signals.WorkingSet[c]
		if !ok {
			out.note(Memory, "container %s: no memory recommendation: working set %s", c, missing(in.Signals, "workingSet/"+c))
			continue
		}
		req, lim, reqWhy, limWhy := MemoryRecommendation(ws, m)
		if m.Request != nil {
			req = int64(*m.Request)
			lim, limWhy = LimitFor(req, m.LimitFactor)
			limWhy += " (from the pinned request)"
		}
		if equalNow(in.Target, reqAttr, limAttr) && m.Limit == nil {
			// Request = limit (a Guaranteed pod, for memory) stays so, as
			// VPA keeps the ratio: the request is already above the
			// working set by the headroom.
			lim, limWhy = req, fmt.Sprintf("= the request %s: request and limit are equal now (Guaranteed QoS kept)", values.BytesOf(req))
		}
		pos := in.Spec.Src.PosOf("spec.memory")
		add := func(attr addrs.Path, v int64, why string) {
			cur, ok := in.Target.Attributes[attr]
			if ok && cur.Type() == values.Bytes && !Significant(cur.Int(), v) {
				out.note(Memory, "container %s: %s %s is within 20%%/64Mi of %s: no change", c, lastWord(attr), values.BytesOf(v), cur)
				return
			}
			out.Intents = append(out.Intents, intent.Intent{Attr: addrs.Attr{Object: in.Target.Address, Path: attr}, Kind: intent.Exact,
				Dimension: Memory, Value: values.BytesOf(v), Recommended: values.BytesOf(v), Rationale: why,
				Source: in.Spec.ID(), SourcePos: pos, Group: "memory/" + c, InPlace: inPlace})
		}
		if m.Request == nil {
			add(reqAttr, req, reqWhy)
		}
		if m.Limit == nil {
			add(limAttr, lim, limWhy)
		}
	}
}

// nodeMemory recommends each container's limit for the node agent of a
// NodePolicy (memory.apply: node): the limit only, in place on the node,
// never in the pod template. The agent keeps it above the container's
// working set.
func nodeMemory(in Input, out *Output) {
	m := in.Spec.Spec.Memory
	if in.Node.Address.IsZero() {
		out.note(Memory, "memory.apply: node needs a node agent serving the workload: no change here")
		return
	}
	if m.Limit != nil {
		out.note(Memory, "memory is pinned (limit %s): not recommended", m.Limit)
		return
	}
	containers := m.Containers
	if len(containers) == 0 {
		containers = Containers(in.Target)
	}
	pos := in.Spec.Src.PosOf("spec.memory")
	for _, c := range containers {
		ws, ok := in.Signals.WorkingSet[c]
		if !ok {
			out.note(Memory, "container %s: no memory recommendation: working set %s", c, missing(in.Signals, "workingSet/"+c))
			continue
		}
		_, lim, _, limWhy := MemoryRecommendation(ws, m)
		if m.Request != nil {
			lim, limWhy = LimitFor(int64(*m.Request), m.LimitFactor)
			limWhy += " (from the pinned request)"
		}
		// A limit under the pod's request would leave the scheduler
		// counting memory the container may not use.
		if r, ok := in.Target.Attributes[ContainerAttr(c, "requests")]; ok && r.Type() == values.Bytes && lim < r.Int() {
			lim, limWhy = r.Int(), fmt.Sprintf("the pod template's request %s (the recommendation %s is below it)", r, values.BytesOf(lim))
		}
		attr := noderes.MemoryAttr(c)
		if cur, ok := in.Node.Attributes[attr]; ok && cur.Type() == values.Bytes && !Significant(cur.Int(), lim) {
			out.note(Memory, "container %s: node limit %s is within 20%%/64Mi of %s: no change", c, values.BytesOf(lim), cur)
			continue
		}
		it := intent.Intent{Attr: addrs.Attr{Object: in.Node.Address, Path: attr}, Kind: intent.Exact,
			Dimension: Memory, Value: values.BytesOf(lim), Recommended: values.BytesOf(lim),
			Rationale: limWhy + ", applied in place by the node agent", Source: in.Spec.ID(), SourcePos: pos, Group: "memory/" + c}
		if !in.Node.Exists {
			it.Create = &intent.Create{}
		}
		out.Intents = append(out.Intents, it)
	}
}

// equalNow reports whether the object's request and limit at the two
// paths are both set and equal.
func equalNow(o providers.Object, req, lim addrs.Path) bool {
	r, okR := o.Attributes[req]
	l, okL := o.Attributes[lim]
	return okR && okL && r.Type() == values.Bytes && r == l
}

func lastWord(attr addrs.Path) string {
	if attr.HasPrefix(workload.Containers) && slices.Contains(attr.Steps(), addrs.F("requests")) {
		return "request"
	}
	return "limit"
}

// num prints a number the way people write it: 400, 310.5, 1.2.
func num(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.FormatInt(int64(f), 10)
	}
	s := strconv.FormatFloat(f, 'f', 1, 64)
	if strings.HasSuffix(s, ".0") {
		return strconv.FormatFloat(f, 'g', 3, 64)
	}
	return s
}

func dur(sec float64) string {
	return time.Duration(sec * float64(time.Second)).Round(time.Millisecond).String()
}

func bytesf(b float64) string {
	return spec.Bytes(math.Round(b)).String()
}
