package spec

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/prometheus/prometheus/promql/parser"

	"github.com/setpoint-dev/setpoint/engine/signals"
)

func init() {
	Register(Kind{Name: "NFR", New: func() Document { return &NFR{} }})
}

// NFR declares throughput and latency targets and memory tuning for one
// workload.
type NFR struct {
	Header
	Spec NFRSpec `json:"spec"`
}

// TargetKey makes two NFRs on one workload a validation error; a target
// without a provider is on the default one.
func (n *NFR) TargetKey(defaultProvider string) string {
	return ProviderOr(n.Spec.Target.Provider, defaultProvider) + ":" + n.Spec.Target.Kind + "/" + n.Metadata.Namespace + "/" + n.Spec.Target.Name
}

// Mode is off, observe or enforce.
type Mode string

// Enforcement modes.
const (
	ModeOff     Mode = "off"
	ModeObserve Mode = "observe"
	ModeEnforce Mode = "enforce"
)

// NFRSpec mirrors #NFRSpec.
type NFRSpec struct {
	Target       Target         `json:"target"`
	Autoscaler   *Autoscaler    `json:"autoscaler,omitempty"`
	Policy       string         `json:"policy"`
	Throughput   *Throughput    `json:"throughput,omitempty"`
	CPUPerPod    MilliCPU       `json:"cpuPerPod"`
	Latency      *Latency       `json:"latency,omitempty"`
	Memory       MemorySpec     `json:"memory"`
	Paused       bool           `json:"paused"`
	Enforcement  NFREnforcement `json:"enforcement"`
	Safety       Safety         `json:"safety"`
	TakeOverFrom []string       `json:"takeOverFrom"`
	Signals      NFRSignals     `json:"signals"`
}

// Target names the workload a spec acts on, in the spec's namespace.
type Target struct {
	Kind     string `json:"kind"`
	Name     string `json:"name"`
	Provider string `json:"provider,omitempty"`
}

// Autoscaler asks setpoint to create an HPA when none exists.
type Autoscaler struct {
	Create      bool `json:"create"`
	MaxReplicas int  `json:"maxReplicas,omitempty"`
	// TargetCPU is a created HPA's CPU utilisation target.
	TargetCPU Percent `json:"targetCPU"`
	// Owns is what setpoint owns of an HPA: OwnsFloor or OwnsCount.
	Owns string `json:"owns,omitempty"`
}

// What an NFR owns of its workload's HPA.
const (
	// OwnsFloor is minReplicas alone.
	OwnsFloor = "floor"
	// OwnsCount is minReplicas, the CPU utilisation target and the
	// scale-down stabilization window.
	OwnsCount = "count"
)

// OwnsCount reports whether the NFR owns its HPA's target and way down.
func (s NFRSpec) OwnsCount() bool {
	return s.Autoscaler != nil && s.Autoscaler.Owns == OwnsCount
}

// Replicas policies of an NFR.
const (
	// PolicySLO sizes replicas for the p99 target from a queueing model
	// (engine/decide/nfr's SLORecommendation).
	PolicySLO = "slo"
	// PolicyReference is the reference's formula, kept exact.
	PolicyReference = "reference"
)

// Throughput is the throughput target.
type Throughput struct {
	MinRPS float64 `json:"minRPS"`
	// Floor is the share of MinRPS the slo policy never sizes below,
	// whatever traffic it measures.
	Floor Percent `json:"floor"`
	// KeepWarm keeps the bound while a Schedule says idle.
	KeepWarm bool `json:"keepWarm"`
	// Startup is how late capacity asked for serves (a pod's start-up and
	// the time to see the need): what burst memory weighs.
	Startup Duration `json:"startup"`
}

// Latency is the latency target.
type Latency struct {
	P99 Duration `json:"p99"`
	// ServiceTime is a request's mean service time at no load; absent,
	// the slo policy estimates it from the lowest mean latency measured.
	ServiceTime *Duration `json:"serviceTime,omitempty"`
}

// MemorySpec mirrors #MemorySpec.
type MemorySpec struct {
	Headroom    float64  `json:"headroom"`
	LimitFactor float64  `json:"limitFactor"`
	Min         Bytes    `json:"min"`
	Max         Bytes    `json:"max"`
	Window      Duration `json:"window"`
	Containers  []string `json:"containers"`
	Request     *Bytes   `json:"request,omitempty"`
	Limit       *Bytes   `json:"limit,omitempty"`
	// Apply says how new memory reaches pods: MemoryRollout (the pod
	// template), MemoryInPlace (running pods resized too) or MemoryNode
	// (the node agent of a NodePolicy).
	Apply string `json:"apply"`
	// InPlaceFallback says what a refused in-place resize does:
	// "hold" or "rollout".
	InPlaceFallback string `json:"inPlaceFallback"`
}

// How an NFR's memory reaches pods.
const (
	MemoryRollout = "rollout"
	MemoryInPlace = "inPlace"
	MemoryNode    = "node"
)

// NFREnforcement is the mode of each dimension.
type NFREnforcement struct {
	Replicas Mode `json:"replicas"`
	Memory   Mode `json:"memory"`
}

// DefaultMaxReplicas caps the replicas of a target whose NFR sets no
// safety.maxReplicas, so no NFR can scale without bound (#NFRSpec's
// default; a test checks the two agree).
const DefaultMaxReplicas = 1000

// EmbeddedRetention is how much history the embedded signal store keeps:
// engine/signals/embedded's DefaultRetention, repeated here because a
// memory window longer than it is refused at validate and that package
// imports this one (a test checks the two agree).
const EmbeddedRetention = 30 * time.Minute

// Safety mirrors the NFR's safety block: the gate's parameters.
type Safety struct {
	Stability      Duration `json:"stability"`
	Tolerance      Percent  `json:"tolerance"`
	Cooldown       Duration `json:"cooldown"`
	MaxReplicaStep Percent  `json:"maxReplicaStep"`
	// MaxReplicaStepUp bounds an increase instead of MaxReplicaStep.
	MaxReplicaStepUp *Percent `json:"maxReplicaStepUp,omitempty"`
	// MinReplicaStepUp is the least an increase may move in a step.
	MinReplicaStepUp int `json:"minReplicaStepUp,omitempty"`
	// StepPeriod is the time a replica step bounds the change over.
	StepPeriod Duration `json:"stepPeriod"`
	// ScaleUp is immediate (an increase of replicas skips stability and
	// cooldown) or stable (it waits as a decrease does).
	ScaleUp       string  `json:"scaleUp"`
	MaxMemoryStep Percent `json:"maxMemoryStep"`
	MaxReplicas   int     `json:"maxReplicas,omitempty"`
	MaxMemory     *Bytes  `json:"maxMemory,omitempty"`
}

// UnmarshalJSON applies DefaultMaxReplicas when the JSON has no cap: the
// schema fills it in for specs, and this does for an NFR decoded from JSON
// that did not go through the schema.
func (s *Safety) UnmarshalJSON(b []byte) error {
	type plain Safety
	p := plain{MaxReplicas: DefaultMaxReplicas}
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*s = Safety(p)
	return nil
}

// NFRSignals are PromQL overrides of the default signals.
type NFRSignals struct {
	RPS        string `json:"rps,omitempty"`
	CPU        string `json:"cpu,omitempty"`
	P99        string `json:"p99,omitempty"`
	WorkingSet string `json:"workingSet,omitempty"`
}

var (
	_ = RegisterCheck(Check{Kind: "NFR", Path: "spec.memory.max", What: "memory.min ≤ memory.max ≤ 1Ti", Why: WhyQuantity, Example: "invalid/memory-bounds.yaml"})
	_ = RegisterCheck(Check{Kind: "NFR", Path: "spec.memory.limit", What: "a pinned memory.request ≤ memory.limit", Why: WhyQuantity, Example: "invalid/memory-bounds.yaml"})
	_ = RegisterCheck(Check{Kind: "NFR", Path: "spec.signals.*", What: "each PromQL override parses to an instant vector or a scalar within the query bounds", Why: WhyPromQL, Example: "checks/nfr-signals.yaml"})
)

var (
	_ = RegisterCheck(Check{Kind: "NFR", Path: "spec.throughput.startup", What: "a startup within (0s, 10m]: burst memory weighs 30 minutes of history with it", Why: WhySpans, Example: "checks/nfr-durations.yaml"})
	_ = RegisterCheck(Check{Kind: "NFR", Path: "spec.safety.stepPeriod", What: "a step period within [0s, 30m], as an HPA's policy periods", Why: WhySpans, Example: "checks/nfr-durations.yaml"})
)

// Bounds of the NFR's durations that only Go checks.
const (
	// MaxStartup bounds throughput.startup: burst memory replays 30
	// minutes of history, and a startup near it leaves no gap to learn.
	MaxStartup = 10 * time.Minute
	// MaxStepPeriod bounds safety.stepPeriod, as Kubernetes bounds an
	// HPA's policy periods: a longer one would hold a count for that long.
	MaxStepPeriod = 30 * time.Minute
)

// Check: memory.min ≤ memory.max ≤ 1Ti, a pinned request ≤ limit, the
// startup and step period within their bounds, and each PromQL override
// parses to an instant vector or a scalar.
func (n *NFR) Check() []FieldError {
	m := n.Spec.Memory
	errs := quantityOrder("spec.memory.max", m.Min, m.Max)
	if t := n.Spec.Throughput; t != nil && (t.Startup.D() <= 0 || t.Startup.D() > MaxStartup) {
		errs = append(errs, FieldError{Path: "spec.throughput.startup", Message: fmt.Sprintf("startup %s is out of range", t.Startup.D()),
			Expected: fmt.Sprintf("more than 0s and at most %s: burst memory weighs the last 30 minutes with it", MaxStartup)})
	}
	if p := n.Spec.Safety.StepPeriod.D(); p < 0 || p > MaxStepPeriod {
		errs = append(errs, FieldError{Path: "spec.safety.stepPeriod", Message: fmt.Sprintf("stepPeriod %s is out of range", p),
			Expected: fmt.Sprintf("between 0s and %s, as an HPA's policy periods", MaxStepPeriod)})
	}
	if m.Max > TiB {
		errs = append(errs, FieldError{Path: "spec.memory.max", Message: m.Max.String() + " is out of range", Expected: "<= 1Ti"})
	}
	if m.Request != nil && m.Limit != nil {
		errs = append(errs, quantityOrder("spec.memory.limit", *m.Request, *m.Limit)...)
	}
	sig := n.Spec.Signals
	var qs queries
	for _, q := range []struct{ name, expr string }{{"rps", sig.RPS}, {"cpu", sig.CPU}, {"p99", sig.P99}, {"workingSet", sig.WorkingSet}} {
		errs = append(errs, qs.check("spec.signals."+q.name, q.expr, "a PromQL instant vector or scalar expression")...)
	}
	return append(errs, qs.past()...)
}

var _ = RegisterCheck(Check{Kind: "NFR", Path: "spec.memory.window", What: "with the embedded signal store, a memory window within the 30 minutes of history it keeps", Why: WhySpans, Example: "checks/memory-window.yaml"})

// CheckWindow refuses a memory window longer than the signal store keeps:
// the query would silently average over less than the spec asks for. The
// retention is the source's (EmbeddedRetention for the embedded store).
func (n *NFR) CheckWindow(retention time.Duration) []FieldError {
	w := n.Spec.Memory.Window.D()
	if w <= retention {
		return nil
	}
	return []FieldError{{Path: "spec.memory.window",
		Message:  fmt.Sprintf("window %s is longer than the %s of history the embedded signal store keeps", w, retention),
		Expected: "at most " + retention.String()}}
}

// promql parses the NFR's signal overrides at validate with the options
// the embedded source evaluates them with (the defaults), so what passes
// here parses there.
var promqlParser = parser.NewParser(parser.Options{})

// CheckPromQL parses one PromQL expression and says what is wrong with it
// in words, or "" when it is an expression that gives a number (an instant
// vector or a scalar) within the query bounds' static cost (a subquery whose
// steps alone are past signals.MaxSamples). The parser's position is given
// as a character count into the query: the loader reports the field's own
// line and column.
func CheckPromQL(expr string) string {
	msg, _ := checkPromQL(expr)
	return msg
}

// checkPromQL is CheckPromQL with the query's static cost (0 when it is
// wrong): one parse for both.
func checkPromQL(expr string) (string, int64) {
	e, err := promqlParser.ParseExpr(expr)
	if err != nil {
		var errs parser.ParseErrors
		var one *parser.ParseErr
		switch {
		case errors.As(err, &errs) && len(errs) > 0:
			one = &errs[0]
		case errors.As(err, &one):
		default:
			return "invalid PromQL: " + err.Error(), 0
		}
		at := min(max(int(one.PositionRange.Start), 0), len(expr))
		return fmt.Sprintf("invalid PromQL at character %d of the query: %v", utf8.RuneCountInString(expr[:at])+1, one.Err), 0
	}
	switch e.Type() {
	case parser.ValueTypeVector, parser.ValueTypeScalar:
		// At one series a selector: what the query costs whatever the
		// store holds, the same check the sources make with the series
		// they have.
		cost, err := signals.Cost(expr, e, nil)
		if err != nil {
			return err.Error(), 0
		}
		return "", cost
	case parser.ValueTypeMatrix:
		return "PromQL gives a range vector, not a value per series (wrap it in a function such as rate())", 0
	default:
		return fmt.Sprintf("PromQL gives a %s, not a number", e.Type()), 0
	}
}

// PromQLIsScalar reports whether expr parses to a scalar (a query built
// around it that needs a vector wraps it in vector()).
func PromQLIsScalar(expr string) bool {
	e, err := promqlParser.ParseExpr(expr)
	return err == nil && e.Type() == parser.ValueTypeScalar
}

// ParsePromQL returns expr as the parser prints it back: without comments
// or redundant space, safe to embed in a larger query.
func ParsePromQL(expr string) (string, error) {
	e, err := promqlParser.ParseExpr(expr)
	if err != nil {
		return "", err
	}
	return e.String(), nil
}
