// Package nfr decides, for one NFR spec, a replicas lower bound and memory
// requests and limits from measured signals. It is a pure function: inputs
// in, intents with their numbers out.
package nfr

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/intent"
	"github.com/setpoint-dev/setpoint/providers"
)

// Attribute paths of the objects an NFR acts on.
const (
	AttrReplicas    = "spec.replicas"
	AttrMinReplicas = "spec.minReplicas"
	AttrMaxReplicas = "spec.maxReplicas"
	AttrMinScale    = `spec.template.metadata.annotations["autoscaling.knative.dev/min-scale"]`
	containerPrefix = "spec.template.spec.containers[name="
)

// ContainerAttr is the path of a container's memory request or limit.
func ContainerAttr(container, which string) string {
	return containerPrefix + container + "].resources." + which + ".memory"
}

// Dimension says which dimension an attribute an NFR writes belongs to,
// and its unit: container memory is bytes, everything else replica counts.
func Dimension(attr string) (intent.Dimension, intent.Unit) {
	if strings.HasPrefix(attr, containerPrefix) && strings.HasSuffix(attr, ".memory") {
		return intent.Memory, intent.Bytes
	}
	return intent.Replicas, intent.Count
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
}

// Input is everything one decision needs.
type Input struct {
	Spec *spec.NFR
	// Target is the workload (Deployment or KnativeService) as read; HPA
	// the Deployment's autoscaler (HPA.Exists false when there is none).
	Target, HPA providers.Object
	Signals     Signals
	// UserValue is each attribute's value when setpoint first adopted it.
	UserValue map[string]int64
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
	if sig.RPS == nil {
		return 0, "no replicas recommendation: requests per second " + missing(sig, "rps"), false
	}
	if sig.CPUMilli == nil {
		return 0, "no replicas recommendation: CPU usage " + missing(sig, "cpu"), false
	}
	rps, cpu := *sig.RPS, *sig.CPUMilli
	if rps < NoTraffic {
		return 0, fmt.Sprintf("no replicas recommendation: measured %s req/s is ~0", num(rps)), false
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
	if !ok {
		out.note(intent.Replicas, "%s", why)
		return
	}
	it := intent.Intent{Kind: intent.LowerBound, Unit: intent.Count, Dimension: intent.Replicas,
		Recommended: rec, Value: rec, Rationale: why, Source: in.Spec.ID(), SourcePos: in.Spec.Src.PosOf("spec.throughput.minRPS")}
	switch {
	case s.Target.Kind == "KnativeService":
		it.Address, it.Attribute = in.Target.Address, AttrMinScale
	case in.HPA.Exists:
		it.Address, it.Attribute = in.HPA.Address, AttrMinReplicas
		// minReplicas above the HPA's own maximum would be refused.
		if max, err := strconv.ParseInt(in.HPA.Attributes[AttrMaxReplicas], 10, 64); err == nil && max > 0 {
			out.Intents = append(out.Intents, intent.Intent{Address: it.Address, Attribute: it.Attribute, Kind: intent.UpperBound,
				Unit: intent.Count, Dimension: intent.Replicas, Value: max, Recommended: max, Rationale: "the HPA's maxReplicas",
				Source: it.Source, SourcePos: it.SourcePos})
		}
	case s.Autoscaler != nil && s.Autoscaler.Create:
		it.Address, it.Attribute = in.HPA.Address, AttrMinReplicas
		it.Create = &intent.Create{Attributes: map[string]string{
			AttrMinReplicas: strconv.FormatInt(rec, 10),
			AttrMaxReplicas: strconv.Itoa(s.Autoscaler.MaxReplicas),
		}}
		it.SourcePos = in.Spec.Src.PosOf("spec.autoscaler")
	default:
		it.Address, it.Attribute = in.Target.Address, AttrReplicas
	}
	if u, ok := in.UserValue[it.Attribute]; ok && u > it.Value {
		it.Value = u
		it.Rationale += fmt.Sprintf("; the user's value %d is higher", u)
	}
	out.Intents = append(out.Intents, it)
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
	reqWhy = fmt.Sprintf("roundUp16Mi(%s × %s) = %s", bytesf(ws), num(m.Headroom), intent.Format(req, intent.Bytes))
	if ws*m.Headroom < float64(minRequest) {
		reqWhy = fmt.Sprintf("roundUp16Mi(max(%s × %s, 64Mi)) = %s", bytesf(ws), num(m.Headroom), intent.Format(req, intent.Bytes))
	}
	if req < lo {
		req = lo
		reqWhy += ", raised to the floor " + intent.Format(lo, intent.Bytes)
	}
	if req > hi {
		req = hi
		reqWhy += ", cut to the ceiling " + intent.Format(hi, intent.Bytes)
	}
	lim, limWhy = LimitFor(req, m.LimitFactor)
	return req, lim, reqWhy, limWhy
}

// LimitFor computes the limit from a (clamped or pinned) request.
func LimitFor(req int64, factor float64) (int64, string) {
	lim := RoundUp16Mi(max(float64(req)*factor, float64(minLimit)))
	why := fmt.Sprintf("roundUp16Mi(%s × %s) = %s", intent.Format(req, intent.Bytes), num(factor), intent.Format(lim, intent.Bytes))
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
		if rest, ok := strings.CutPrefix(k, containerPrefix); ok {
			if i := strings.IndexByte(rest, ']'); i > 0 {
				seen[rest[:i]] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for c := range seen {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

func memory(in Input, out *Output) {
	m := in.Spec.Spec.Memory
	if m.Request != nil && m.Limit != nil {
		out.note(intent.Memory, "memory is pinned (request %s, limit %s): not recommended", m.Request, m.Limit)
		return
	}
	containers := m.Containers
	if len(containers) == 0 {
		containers = Containers(in.Target)
	}
	for _, c := range containers {
		reqAttr, limAttr := ContainerAttr(c, "requests"), ContainerAttr(c, "limits")
		if _, ok := in.Target.Attributes[reqAttr]; !ok {
			out.note(intent.Memory, "container %s: not in the pod template", c)
			continue
		}
		ws, ok := in.Signals.WorkingSet[c]
		if !ok {
			out.note(intent.Memory, "container %s: no memory recommendation: working set %s", c, missing(in.Signals, "workingSet/"+c))
			continue
		}
		req, lim, reqWhy, limWhy := MemoryRecommendation(ws, m)
		if m.Request != nil {
			req = int64(*m.Request)
			lim, limWhy = LimitFor(req, m.LimitFactor)
			limWhy += " (from the pinned request)"
		}
		pos := in.Spec.Src.PosOf("spec.memory")
		add := func(attr string, v int64, why string) {
			cur, err := spec.ParseBytes(in.Target.Attributes[attr])
			if err == nil && !Significant(int64(cur), v) {
				out.note(intent.Memory, "container %s: %s %s is within 20%%/64Mi of %s: no change", c, lastWord(attr), intent.Format(v, intent.Bytes), cur)
				return
			}
			out.Intents = append(out.Intents, intent.Intent{Address: in.Target.Address, Attribute: attr, Kind: intent.Exact,
				Unit: intent.Bytes, Dimension: intent.Memory, Value: v, Recommended: v, Rationale: why,
				Source: in.Spec.ID(), SourcePos: pos})
		}
		if m.Request == nil {
			add(reqAttr, req, reqWhy)
		}
		if m.Limit == nil {
			add(limAttr, lim, limWhy)
		}
	}
}

func lastWord(attr string) string {
	if strings.Contains(attr, ".requests.") {
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
