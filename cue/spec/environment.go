package spec

import (
	"encoding/json"
	"fmt"
)

func init() {
	Register(Kind{Name: "Environment", New: func() Document { return &Environment{} }})
}

// Environment says where things run and where signals come from; one per
// directory.
type Environment struct {
	Header
	Spec EnvironmentSpec `json:"spec"`
}

// EnvironmentSpec mirrors #EnvironmentSpec.
type EnvironmentSpec struct {
	Providers      []Provider    `json:"providers"`
	PluginPath     []string      `json:"pluginPath"`
	GitopsManagers []string      `json:"gitopsManagers"`
	Signals        SignalSources `json:"signals"`
	State          State         `json:"state"`
	Tick           Duration      `json:"tick"`
}

// Provider names a provider and carries its configuration. Config stays raw
// JSON here: each provider decodes its own (the sim world into SimConfig).
type Provider struct {
	Name   string          `json:"name"`
	SHA256 string          `json:"sha256,omitempty"`
	Config json.RawMessage `json:"config,omitempty"`
}

// KubernetesConfig mirrors #KubernetesConfig.
type KubernetesConfig struct {
	Kubeconfig string `json:"kubeconfig,omitempty"`
	Context    string `json:"context,omitempty"`
}

// SignalSources mirrors #SignalSources.
type SignalSources struct {
	Default    string            `json:"default"`
	Prometheus *PrometheusSource `json:"prometheus,omitempty"`
}

// PrometheusSource is a Prometheus server's HTTP API.
type PrometheusSource struct {
	URL     string   `json:"url"`
	Timeout Duration `json:"timeout"`
}

// State says where applied values and history are kept.
type State struct {
	Backend string `json:"backend"`
	Path    string `json:"path"`
}

// SimConfig mirrors #SimConfig: the sim world's trace, options and workloads.
type SimConfig struct {
	Trace     string        `json:"trace"`
	RateScale float64       `json:"rateScale"`
	Thin      float64       `json:"thin"`
	Speed     float64       `json:"speed"`
	Start     Duration      `json:"start"`
	Window    *TraceWindow  `json:"window,omitempty"`
	Seed      int64         `json:"seed"`
	Workloads []SimWorkload `json:"workloads"`
}

// TraceWindow cuts the trace to [From, Until) from its start.
type TraceWindow struct {
	From  Duration  `json:"from"`
	Until *Duration `json:"until,omitempty"`
}

// SimWorkload mirrors #SimWorkload.
type SimWorkload struct {
	Kind          string            `json:"kind"`
	Namespace     string            `json:"namespace"`
	Name          string            `json:"name"`
	Replicas      int               `json:"replicas"`
	HPA           *SimHPA           `json:"hpa,omitempty"`
	Knative       *SimKnative       `json:"knative,omitempty"`
	PerPodRPS     float64           `json:"perPodRPS"`
	CPUPerRequest MilliCPU          `json:"cpuPerRequest"`
	CPURequest    MilliCPU          `json:"cpuRequest"`
	Startup       Duration          `json:"startup"`
	ServiceTime   Duration          `json:"serviceTime"`
	Share         float64           `json:"share"`
	Containers    []SimContainer    `json:"containers"`
	Managers      map[string]string `json:"managers,omitempty"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// SimHPA is a sim workload's HorizontalPodAutoscaler.
type SimHPA struct {
	Min       int      `json:"min"`
	Max       int      `json:"max"`
	TargetCPU *Percent `json:"targetCPU,omitempty"`
	TargetRPS float64  `json:"targetRPS,omitempty"`
}

// SimKnative is a sim Knative service's autoscaling.
type SimKnative struct {
	MinScale          int     `json:"minScale"`
	MaxScale          int     `json:"maxScale,omitempty"`
	TargetConcurrency float64 `json:"targetConcurrency"`
}

// SimContainer is one container of a sim workload's pods.
type SimContainer struct {
	Name       string `json:"name"`
	Request    Bytes  `json:"request"`
	Limit      Bytes  `json:"limit"`
	WorkingSet Bytes  `json:"workingSet"`
}

// Check: every sim container's request ≤ limit.
func (e *Environment) Check() []FieldError {
	var errs []FieldError
	for i, p := range e.Spec.Providers {
		if p.Name != "sim" {
			continue
		}
		var c SimConfig
		if json.Unmarshal(p.Config, &c) != nil {
			continue
		}
		for j, w := range c.Workloads {
			for k, ct := range w.Containers {
				path := fmt.Sprintf("spec.providers.%d.config.workloads.%d.containers.%d.limit", i, j, k)
				errs = append(errs, quantityOrder(path, ct.Request, ct.Limit)...)
			}
		}
	}
	return errs
}
