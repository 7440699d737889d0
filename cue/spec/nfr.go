package spec

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
	p := n.Spec.Target.Provider
	if p == "" {
		p = defaultProvider
	}
	return p + ":" + n.Spec.Target.Kind + "/" + n.Metadata.Namespace + "/" + n.Spec.Target.Name
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
}

// Throughput is the throughput target.
type Throughput struct {
	MinRPS float64 `json:"minRPS"`
}

// Latency is the latency target.
type Latency struct {
	P99 Duration `json:"p99"`
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
}

// NFREnforcement is the mode of each dimension.
type NFREnforcement struct {
	Replicas Mode `json:"replicas"`
	Memory   Mode `json:"memory"`
}

// Safety mirrors the NFR's safety block: the gate's parameters.
type Safety struct {
	Stability      Duration `json:"stability"`
	Tolerance      Percent  `json:"tolerance"`
	Cooldown       Duration `json:"cooldown"`
	MaxReplicaStep Percent  `json:"maxReplicaStep"`
	MaxMemoryStep  Percent  `json:"maxMemoryStep"`
	MaxReplicas    int      `json:"maxReplicas,omitempty"`
	MaxMemory      *Bytes   `json:"maxMemory,omitempty"`
}

// NFRSignals are PromQL overrides of the default signals.
type NFRSignals struct {
	RPS        string `json:"rps,omitempty"`
	CPU        string `json:"cpu,omitempty"`
	P99        string `json:"p99,omitempty"`
	WorkingSet string `json:"workingSet,omitempty"`
}

// Check: memory.min ≤ memory.max ≤ 1Ti, and a pinned request ≤ limit.
func (n *NFR) Check() []FieldError {
	m := n.Spec.Memory
	errs := quantityOrder("spec.memory.max", m.Min, m.Max)
	if m.Max > TiB {
		errs = append(errs, FieldError{Path: "spec.memory.max", Message: m.Max.String() + " is out of range", Expected: "<= 1Ti"})
	}
	if m.Request != nil && m.Limit != nil {
		errs = append(errs, quantityOrder("spec.memory.limit", *m.Request, *m.Limit)...)
	}
	return errs
}
