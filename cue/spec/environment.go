package spec

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/setpoint-dev/setpoint/internal/confine"
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
	Trace     string       `json:"trace"`
	RateScale float64      `json:"rateScale"`
	Thin      float64      `json:"thin"`
	Speed     float64      `json:"speed"`
	Start     Duration     `json:"start"`
	Window    *TraceWindow `json:"window,omitempty"`
	// Scaling is how rateScale scales the trace: superpose (default) or
	// clone; ServiceTimes how each request's service time is drawn:
	// tokens or exponential ("": tokens when the trace has them).
	Scaling      string        `json:"scaling,omitempty"`
	ServiceTimes string        `json:"serviceTimes,omitempty"`
	Seed         int64         `json:"seed"`
	Workloads    []SimWorkload `json:"workloads"`
}

// TraceFor is the trace a workload replays and its transformations: the
// workload's own fields where it gives them, the config's otherwise.
func (c SimConfig) TraceFor(w SimWorkload) SimConfig {
	t := SimConfig{Trace: c.Trace, RateScale: c.RateScale, Thin: c.Thin, Window: c.Window, Scaling: c.Scaling, ServiceTimes: c.ServiceTimes, Seed: c.Seed}
	if w.Trace != "" {
		t.Trace = w.Trace
	}
	if w.RateScale != nil {
		t.RateScale = *w.RateScale
	}
	if w.Thin != nil {
		t.Thin = *w.Thin
	}
	if w.Window != nil {
		t.Window = w.Window
	}
	if w.Scaling != "" {
		t.Scaling = w.Scaling
	}
	if w.ServiceTimes != "" {
		t.ServiceTimes = w.ServiceTimes
	}
	return t
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
	Share         float64           `json:"share"` // 1 (the whole trace) when not given
	Containers    []SimContainer    `json:"containers"`
	Managers      map[string]string `json:"managers,omitempty"`
	Annotations   map[string]string `json:"annotations,omitempty"`
	// The workload's own trace and transformations; absent: the config's.
	Trace        string       `json:"trace,omitempty"`
	RateScale    *float64     `json:"rateScale,omitempty"`
	Thin         *float64     `json:"thin,omitempty"`
	Window       *TraceWindow `json:"window,omitempty"`
	Scaling      string       `json:"scaling,omitempty"`
	ServiceTimes string       `json:"serviceTimes,omitempty"`
	// Targets are latency targets the world reports on and puts in its
	// histogram's buckets; setpoint adds each NFR's p99 target.
	Targets []Duration `json:"targets,omitempty"`

	// shareGiven records whether the spec gave Share (see UnmarshalJSON).
	shareGiven bool
}

// UnmarshalJSON defaults the share to the whole trace and records whether
// the spec gave one: only the shares written must add up to at most 1, so a
// workload without one keeps receiving the whole trace.
func (w *SimWorkload) UnmarshalJSON(b []byte) error {
	type plain SimWorkload
	var aux struct {
		plain
		Share *float64 `json:"share"`
	}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	*w = SimWorkload(aux.plain)
	w.Share, w.shareGiven = 1, aux.Share != nil
	if aux.Share != nil {
		w.Share = *aux.Share
	}
	return nil
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

// Check: every sim container's request ≤ limit, no two sim workloads with
// one namespace and name (the sim world and its metrics know a workload by
// those), and the shares written add up to at most the whole trace.
// MinTick and MaxTick bound an Environment's tick.
const (
	MinTick = time.Second
	MaxTick = 24 * time.Hour
)

func (e *Environment) Check() []FieldError {
	var errs []FieldError
	// The tick paces every spec's reconcile (and the sim's steps): a tick
	// of a nanosecond would spin a core and make sim run for ever.
	if t := e.Spec.Tick.D(); t < MinTick || t > MaxTick {
		errs = append(errs, FieldError{Path: "spec.tick", Message: fmt.Sprintf("tick %s is out of range", t), Expected: fmt.Sprintf("between %s and %s", MinTick, MaxTick)})
	}
	for i, p := range e.Spec.Providers {
		if p.Name != "sim" {
			continue
		}
		var c SimConfig
		if json.Unmarshal(p.Config, &c) != nil {
			continue
		}
		wls := fmt.Sprintf("spec.providers.%d.config.workloads", i)
		first := map[string]int{}
		share := 0.0
		for j, w := range c.Workloads {
			for k, ct := range w.Containers {
				path := fmt.Sprintf("%s.%d.containers.%d.limit", wls, j, k)
				errs = append(errs, quantityOrder(path, ct.Request, ct.Limit)...)
			}
			key := w.Namespace + "/" + w.Name
			if f, dup := first[key]; dup {
				errs = append(errs, FieldError{Path: fmt.Sprintf("%s.%d.name", wls, j),
					Message:  "duplicate sim workload " + key,
					Expected: "one workload per namespace and name",
					Related:  fmt.Sprintf("%s.%d.name", wls, f)})
			} else {
				first[key] = j
			}
			if !w.shareGiven {
				continue
			}
			// Reported once, at the share that goes over; a small
			// tolerance lets 0.7 + 0.2 + 0.1 through.
			before := share
			share += w.Share
			if before <= 1+shareSlack && share > 1+shareSlack {
				errs = append(errs, FieldError{Path: fmt.Sprintf("%s.%d.share", wls, j),
					Message:  fmt.Sprintf("the shares up to this workload add up to %s, more than the whole trace", formatShare(share)),
					Expected: "shares that add up to at most 1"})
			}
		}
	}
	return errs
}

const shareSlack = 1e-9

func formatShare(f float64) string {
	return strconv.FormatFloat(math.Round(f*1e6)/1e6, 'f', -1, 64)
}

// CheckFiles checks that the files the Environment names exist: each sim
// trace must be a regular file. Relative paths resolve against baseDir, the
// Environment file's directory. Only metadata is read: no error ever shows
// a byte of the file, which need not be a spec.
func (e *Environment) CheckFiles(baseDir string) []FieldError {
	var errs []FieldError
	for i, p := range e.Spec.Providers {
		if p.Name != "sim" {
			continue
		}
		var c SimConfig
		if json.Unmarshal(p.Config, &c) != nil || c.Trace == "" {
			continue
		}
		if msg := checkRegularFile(c.Trace, baseDir); msg != "" {
			errs = append(errs, FieldError{Path: fmt.Sprintf("spec.providers.%d.config.trace", i),
				Message: "trace " + msg, Expected: "a trace file, relative to the Environment file's directory"})
		}
		for j, wl := range c.Workloads {
			if wl.Trace == "" {
				continue
			}
			if msg := checkRegularFile(wl.Trace, baseDir); msg != "" {
				errs = append(errs, FieldError{Path: fmt.Sprintf("spec.providers.%d.config.workloads.%d.trace", i, j),
					Message: "trace " + msg, Expected: "a trace file, relative to the Environment file's directory"})
			}
		}
	}
	return errs
}

// checkRegularFile says what is wrong with the file at path (resolved
// against baseDir when relative), or "" when it is a regular file.
// Symlinks are followed, as opening the file would.
//
// A path that resolves outside baseDir is not looked at: whether a file
// exists there is itself something a pull request must not learn from a
// CI log; the spec directory check (cmd's resolveEnvPaths) judges it.
func checkRegularFile(path, baseDir string) string {
	full := path
	if !filepath.IsAbs(full) {
		full = filepath.Join(baseDir, full)
	}
	if res, err := confine.Resolve(baseDir, path); err == nil {
		if root, err := confine.Resolve(".", baseDir); err != nil || !confine.Within(root, res) {
			return ""
		}
	}
	fi, err := os.Stat(full)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Sprintf("%s does not exist (looked for %s)", path, full)
	case err != nil:
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Sprintf("%s cannot be read: %v", path, err)
	case fi.IsDir():
		return path + " is a directory, not a file"
	case !fi.Mode().IsRegular():
		return path + " is not a regular file"
	}
	return ""
}
