package spec

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/setpoint-dev/setpoint/engine/decide/nodepolicy"
	"github.com/setpoint-dev/setpoint/engine/signals"
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
	// sim is a sim provider's config as decoded with the provider: a
	// world of 10,000 workloads took 0.15 s to decode, and the checks,
	// the loader and the provider each read it.
	sim *decodedSim
}

type decodedSim struct {
	c   SimConfig
	err error
}

// UnmarshalJSON decodes a provider, and a sim provider's config with it.
func (p *Provider) UnmarshalJSON(b []byte) error {
	type plain Provider
	var x plain
	if err := json.Unmarshal(b, &x); err != nil {
		return err
	}
	*p = Provider(x)
	if p.Name == "sim" {
		d := &decodedSim{}
		d.err = json.Unmarshal(p.Config, &d.c)
		p.sim = d
	}
	return nil
}

// SimConfig decodes a sim provider's config (once, when the provider was
// decoded) and returns a copy: its own window, slices of workloads, fleets,
// route groups and nodes, and each workload's containers, managers,
// annotations and window, which a caller may change or append to (targets
// are appended to, never written). What they point to further is shared
// and read only.
func (p Provider) SimConfig() (SimConfig, error) {
	if p.sim == nil {
		var c SimConfig
		err := json.Unmarshal(p.Config, &c)
		return c, err
	}
	if p.sim.err != nil {
		return SimConfig{}, p.sim.err
	}
	c := p.sim.c
	if c.Window != nil {
		w := *c.Window
		c.Window = &w
	}
	c.Workloads = slices.Clone(c.Workloads)
	for i := range c.Workloads {
		w := &c.Workloads[i]
		w.Containers = slices.Clone(w.Containers)
		w.Targets = slices.Clip(w.Targets)
		w.Managers, w.Annotations = maps.Clone(w.Managers), maps.Clone(w.Annotations)
		if w.Window != nil {
			win := *w.Window
			w.Window = &win
		}
	}
	c.Fleets, c.RouteGroups, c.Nodes = slices.Clone(c.Fleets), slices.Clone(c.RouteGroups), slices.Clone(c.Nodes)
	return c, nil
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
	Scrape     Scrape            `json:"scrape"`
	// LookbackDelta is the embedded source's instant-selector lookback.
	LookbackDelta Duration `json:"lookbackDelta"`
}

// Lookback is the embedded source's lookback delta, the default when none
// was decoded (an Environment made in Go).
func (s SignalSources) Lookback() time.Duration {
	if s.LookbackDelta <= 0 {
		return signals.DefaultLookbackDelta
	}
	return s.LookbackDelta.D()
}

// Scrape mirrors #Scrape: what the embedded store scrapes.
type Scrape struct {
	Interval Duration       `json:"interval"`
	Timeout  Duration       `json:"timeout"`
	Targets  []ScrapeTarget `json:"targets"`
}

// ScrapeTarget mirrors #ScrapeTarget.
type ScrapeTarget struct {
	URL    string            `json:"url"`
	Job    string            `json:"job"`
	Labels map[string]string `json:"labels,omitempty"`
}

// Scrape defaults, for Environments made in Go rather than decoded (the
// schema fills them in otherwise), and the interval's bounds.
const (
	DefaultScrapeInterval = 5 * time.Second
	DefaultScrapeTimeout  = 2 * time.Second
	MinScrapeInterval     = time.Second
	MaxScrapeInterval     = time.Hour
)

// Every is the scrape interval, the default when none was decoded.
func (s Scrape) Every() time.Duration {
	if s.Interval <= 0 {
		return DefaultScrapeInterval
	}
	return s.Interval.D()
}

// Within is the per-target timeout, the default when none was decoded.
func (s Scrape) Within() time.Duration {
	if s.Timeout <= 0 {
		return min(DefaultScrapeTimeout, s.Every())
	}
	return s.Timeout.D()
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
	Scaling      string `json:"scaling,omitempty"`
	ServiceTimes string `json:"serviceTimes,omitempty"`
	// Shift bounds each superposed copy's time offset: a duration, or
	// "whole" for anywhere in the trace ("": the world's default).
	Shift     string        `json:"shift,omitempty"`
	Seed      int64         `json:"seed"`
	Workloads []SimWorkload `json:"workloads"`
	Fleets    []SimFleet    `json:"fleets"`
	// RouteGroups are VIPs whose backends RouteGroup specs steer between.
	RouteGroups []SimRouteGroup `json:"routeGroups"`
	// Nodes are machines with a CPU topology on which the workloads' pods
	// run, and NodePolicy specs share out the CPUs.
	Nodes []SimNode `json:"nodes,omitempty"`
}

// SimNode mirrors #SimNode: a node's topology and labels, and the
// workloads whose pods it runs (none: every workload's).
type SimNode struct {
	Name      string            `json:"name"`
	Topology  string            `json:"topology"`
	Labels    map[string]string `json:"labels,omitempty"`
	Workloads []string          `json:"workloads,omitempty"`
}

// SimRouteGroup mirrors #SimRouteGroup: a VIP receiving a share of the
// trace, and its backends.
type SimRouteGroup struct {
	Namespace string  `json:"namespace"`
	Name      string  `json:"name"`
	VIP       string  `json:"vip"` // IPv4:port
	Share     float64 `json:"share"`
	// The group's own transformations of the trace; absent: the config's.
	RateScale *float64 `json:"rateScale,omitempty"`
	Thin      *float64 `json:"thin,omitempty"`
	// ErrorWindow is what each backend's error-ratio gauge is taken over.
	ErrorWindow Duration     `json:"errorWindow"`
	Backends    []SimBackend `json:"backends"`
}

// SimBackend mirrors #SimBackend: one backend of a sim route group, with
// its own capacity, latency and errors, and the windows in which they are
// worse.
type SimBackend struct {
	Address   string       `json:"address"`  // IPv4:port
	Capacity  float64      `json:"capacity"` // requests per second
	Latency   Duration     `json:"latency"`  // p95 with no queue
	ErrorRate Percent      `json:"errorRate"`
	Degrade   []SimDegrade `json:"degrade,omitempty"`
}

// SimDegrade mirrors #SimDegrade: from From until Until (offsets from the
// trace's start) the backend's latency is multiplied by Latency, its
// capacity by Capacity, and its error rate is ErrorRate when given.
type SimDegrade struct {
	From      Duration `json:"from"`
	Until     Duration `json:"until"`
	Latency   float64  `json:"latency"`
	Capacity  float64  `json:"capacity"`
	ErrorRate *Percent `json:"errorRate,omitempty"`
}

// TraceForGroup is the trace a route group replays and its
// transformations: the group's own where it gives them, the config's
// otherwise.
func (c SimConfig) TraceForGroup(g SimRouteGroup) SimConfig {
	t := SimConfig{Trace: c.Trace, RateScale: c.RateScale, Thin: c.Thin, Window: c.Window, Scaling: c.Scaling, ServiceTimes: c.ServiceTimes, Shift: c.Shift, Seed: c.Seed}
	if g.RateScale != nil {
		t.RateScale = *g.RateScale
	}
	if g.Thin != nil {
		t.Thin = *g.Thin
	}
	return t
}

// SimFleet mirrors #SimFleet.
type SimFleet struct {
	Namespace     string             `json:"namespace"`
	Name          string             `json:"name"`
	Cloud         string             `json:"cloud"`
	Clusters      []SimCluster       `json:"clusters"`
	PerNode       map[string]float64 `json:"perNode"`
	PerInstance   map[string]float64 `json:"perInstance"`
	Templates     []string           `json:"templates"`
	JoinTime      Duration           `json:"joinTime"`
	DrainTime     Duration           `json:"drainTime"`
	ProvisionTime Duration           `json:"provisionTime"`
	Arrivals      struct {
		PerHour  float64  `json:"perHour"`
		Swing    float64  `json:"swing"`
		Period   Duration `json:"period"`
		PeakAt   float64  `json:"peakAt"`
		Lifetime Duration `json:"lifetime"`
	} `json:"arrivals"`
	InitialInstances int `json:"initialInstances"`
}

// SimCluster mirrors #SimCluster.
type SimCluster struct {
	Name    string `json:"name"`
	Region  string `json:"region"`
	Nodes   int    `json:"nodes"`
	MultiAZ bool   `json:"multiAZ"`
	Failed  bool   `json:"failed"`
}

// TraceFor is the trace a workload replays and its transformations: the
// workload's own fields where it gives them, the config's otherwise.
func (c SimConfig) TraceFor(w SimWorkload) SimConfig {
	t := SimConfig{Trace: c.Trace, RateScale: c.RateScale, Thin: c.Thin, Window: c.Window, Scaling: c.Scaling, ServiceTimes: c.ServiceTimes, Shift: c.Shift, Seed: c.Seed}
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

// ShiftWhole is the Shift that draws a superposed copy's offset anywhere
// in the trace.
const ShiftWhole = "whole"

// ShiftSeconds is Shift in whole seconds: -1 for ShiftWhole, def when
// unset; below a second it is refused.
func (c SimConfig) ShiftSeconds(def int) (int, error) {
	switch c.Shift {
	case "":
		return def, nil
	case ShiftWhole:
		return -1, nil
	}
	d, err := time.ParseDuration(c.Shift)
	if err != nil || d < time.Second {
		// No shift would replay the K copies' arrivals at the same
		// instants: K-fold bursts, which scaling "clone" names.
		return 0, fmt.Errorf("shift %q: want a duration of at least 1s, or %q", c.Shift, ShiftWhole)
	}
	return int(d / time.Second), nil
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
	// Gateway is what holds requests while no pod is ready.
	Gateway struct {
		Timeout Duration `json:"timeout"`
	} `json:"gateway"`

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
// those), the shares written add up to at most the whole trace, and the
// sim route groups' addresses and windows hold together.
// MinTick and MaxTick bound an Environment's tick.
const (
	MinTick = time.Second
	MaxTick = 24 * time.Hour
)

var (
	_ = RegisterCheck(Check{Kind: "Environment", Path: "spec.tick", What: "a tick from 1s to 24h", Why: WhyParse, Example: "checks/environment-tick.yaml"})
	_ = RegisterCheck(Check{Kind: "Environment", Path: "spec.providers.*.config.nodes.*.name", What: "each sim node once", Why: WhyCompare, Example: "checks/sim-nodes.yaml"})
	_ = RegisterCheck(Check{Kind: "Environment", Path: "spec.providers.*.config.nodes.*.topology", What: "a sim node's topology at most 4096 CPUs and 8 threads a core", Why: WhyParse, Example: "checks/sim-nodes.yaml"})
	_ = RegisterCheck(Check{Kind: "Environment", Path: "spec.providers.*.config.nodes.*.workloads.*", What: "a sim node runs workloads the world declares, each once", Why: WhyCompare, Example: "checks/sim-nodes.yaml"})
	_ = RegisterCheck(Check{Kind: "Environment", Path: "spec.signals.default", What: "no Prometheus server with the sim world (it runs on the trace's virtual time)", Why: WhySpans, Example: "invalid/sim-prometheus.yaml"})
	_ = RegisterCheck(Check{Kind: "Environment", Path: "spec.providers.*.config.workloads.*.containers.*.limit", What: "each sim container's request ≤ its limit", Why: WhyQuantity, Example: "invalid/sim-quantities.yaml"})
	_ = RegisterCheck(Check{Kind: "Environment", Path: "spec.providers.*.config.workloads.*.name", What: "each sim workload once by namespace and name", Why: WhyCompare, Example: "checks/sim-workloads.yaml"})
	_ = RegisterCheck(Check{Kind: "Environment", Path: "spec.providers.*.config.workloads.*.share", What: "the sim workloads' shares of the trace add up to at most 1", Why: WhyCompare, Example: "checks/sim-workloads.yaml"})
	_ = RegisterCheck(Check{Kind: "Environment", Path: "spec.providers.*.config.routeGroups.*.backends.*.address", What: "each sim route group's backend once", Why: WhyParse, Example: "checks/sim-routegroups.yaml"})
	_ = RegisterCheck(Check{Kind: "Environment", Path: "spec.providers.*.config.routeGroups.*.backends.*.degrade.*.from", What: "each sim backend's degrade windows in time order, none overlapping", Why: WhyCompare, Example: "checks/sim-routegroups.yaml"})
	_ = RegisterCheck(Check{Kind: "Environment", Path: "spec.signals.lookbackDelta", What: "a lookback delta above 0 and at most the embedded store's 30 minutes of history", Why: WhyParse, Example: "checks/signals-lookback.yaml"})
	_ = RegisterCheck(Check{Kind: "Environment", Path: "spec.signals.scrape.*", What: "scrape timeout ≤ interval, URLs as Go's HTTP client reads them (no credentials), label names, each target once", Why: WhyParse, Example: "invalid/scrape-errors.yaml"})
)

func (e *Environment) Check() []FieldError {
	var errs []FieldError
	// The tick paces every spec's reconcile (and the sim's steps): a tick
	// of a nanosecond would spin a core and make sim run for ever.
	if t := e.Spec.Tick.D(); t < MinTick || t > MaxTick {
		errs = append(errs, FieldError{Path: "spec.tick", Message: fmt.Sprintf("tick %s is out of range", t), Expected: fmt.Sprintf("between %s and %s", MinTick, MaxTick)})
	}
	errs = append(errs, e.Spec.Signals.checkScrape()...)
	// 0 would make every instant selector find nothing; past the store's
	// retention the lookback would reach for samples it no longer has.
	if d := e.Spec.Signals.LookbackDelta.D(); d <= 0 || d > EmbeddedRetention {
		errs = append(errs, FieldError{Path: "spec.signals.lookbackDelta", Message: fmt.Sprintf("lookback delta %s is out of range", d),
			Expected: fmt.Sprintf("more than 0s and at most the embedded store's retention (%s)", EmbeddedRetention)})
	}
	for i, p := range e.Spec.Providers {
		if p.Name != "sim" {
			continue
		}
		if e.Spec.Signals.Default == "prometheus" {
			// One-shot runs happen at the trace's time, where a server
			// has no samples: every decision would hold on no data.
			errs = append(errs, FieldError{Path: "spec.signals.default", Message: "a Prometheus server cannot answer for the sim world: it runs on the trace's virtual time, where the server has no samples",
				Expected: "embedded with the sim provider (the sim world's metrics go into it)", Related: fmt.Sprintf("spec.providers.%d.name", i)})
		}
		c, err := p.SimConfig()
		if err != nil {
			continue
		}
		if _, err := c.ShiftSeconds(0); err != nil {
			errs = append(errs, FieldError{Path: fmt.Sprintf("spec.providers.%d.config.shift", i), Message: err.Error(),
				Expected: `a duration of at least 1s ("1m" by default), or "whole"`})
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
		errs = append(errs, checkSimRouteGroups(fmt.Sprintf("spec.providers.%d.config.routeGroups", i), c.RouteGroups)...)
		errs = append(errs, checkSimNodes(fmt.Sprintf("spec.providers.%d.config.nodes", i), c.Nodes, first)...)
	}
	return errs
}

// A sim route group's error window: the schema's default and the bounds.
const (
	DefaultSimErrorWindow = time.Minute
	MinSimErrorWindow     = time.Second
	MaxSimErrorWindow     = 5 * time.Minute
)

// checkSimRouteGroups: each group once by namespace and name and by VIP,
// addresses that parse, an error window in range, each backend once in
// its group, and each backend's degrade windows in order, none empty,
// none overlapping.
func checkSimRouteGroups(at string, groups []SimRouteGroup) []FieldError {
	var errs []FieldError
	const addr = "an IPv4 address and a port from 1 to 65535, like 127.0.0.1:9001"
	names, vips := map[string]int{}, map[netip.AddrPort]int{}
	for j, g := range groups {
		gp := fmt.Sprintf("%s.%d", at, j)
		key := g.Namespace + "/" + g.Name
		if f, dup := names[key]; dup {
			errs = append(errs, FieldError{Path: gp + ".name", Message: "duplicate sim route group " + key,
				Expected: "one route group per namespace and name", Related: fmt.Sprintf("%s.%d.name", at, f)})
		} else {
			names[key] = j
		}
		if vip, err := parseIPv4Port(g.VIP); err != nil {
			errs = append(errs, FieldError{Path: gp + ".vip", Message: fmt.Sprintf("invalid VIP %q: %v", g.VIP, err), Expected: addr})
		} else if f, dup := vips[vip]; dup {
			errs = append(errs, FieldError{Path: gp + ".vip", Message: "a second route group on VIP " + vip.String(),
				Expected: "each VIP once", Related: fmt.Sprintf("%s.%d.vip", at, f)})
		} else {
			vips[vip] = j
		}
		if d := g.ErrorWindow.D(); d < MinSimErrorWindow || d > MaxSimErrorWindow {
			errs = append(errs, FieldError{Path: gp + ".errorWindow", Message: fmt.Sprintf("error window %s is out of range", d),
				Expected: fmt.Sprintf("between %s and %s", MinSimErrorWindow, MaxSimErrorWindow)})
		}
		seen := map[netip.AddrPort]int{}
		for k, b := range g.Backends {
			bp := fmt.Sprintf("%s.backends.%d", gp, k)
			ap, err := parseIPv4Port(b.Address)
			if err != nil {
				errs = append(errs, FieldError{Path: bp + ".address", Message: fmt.Sprintf("invalid backend address %q: %v", b.Address, err), Expected: addr})
			} else if f, dup := seen[ap]; dup {
				errs = append(errs, FieldError{Path: bp + ".address", Message: "a second backend " + ap.String(),
					Expected: "each backend once", Related: fmt.Sprintf("%s.backends.%d.address", gp, f)})
			} else {
				seen[ap] = k
			}
			for d, w := range b.Degrade {
				dp := fmt.Sprintf("%s.degrade.%d", bp, d)
				switch {
				case w.Until <= w.From:
					errs = append(errs, FieldError{Path: dp + ".until", Message: fmt.Sprintf("until %s is not after from %s", w.Until, w.From),
						Expected: "a window that ends after it starts"})
				case d > 0 && w.From < b.Degrade[d-1].Until:
					errs = append(errs, FieldError{Path: dp + ".from", Message: fmt.Sprintf("from %s is before the window before it ends (%s)", w.From, b.Degrade[d-1].Until),
						Expected: "windows in time order, none overlapping", Related: fmt.Sprintf("%s.degrade.%d.until", bp, d-1)})
				}
			}
		}
	}
	return errs
}

const shareSlack = 1e-9

// labelName is a Prometheus label name.
var labelName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// checkScrape checks what CUE cannot say well: the timeout against the
// interval, URLs as Go's HTTP client will read them, and label names.
func (s SignalSources) checkScrape() []FieldError {
	const at = "spec.signals.scrape"
	var errs []FieldError
	sc := s.Scrape
	// A sub-second interval would keep a core busy scraping; past an hour
	// the 30-minute store would hold at most one sample of each series.
	if d := sc.Interval.D(); d < MinScrapeInterval || d > MaxScrapeInterval {
		errs = append(errs, FieldError{Path: at + ".interval", Message: fmt.Sprintf("interval %s is out of range", d),
			Expected: fmt.Sprintf("between %s and %s", MinScrapeInterval, MaxScrapeInterval)})
	}
	// A timeout past the interval would let one slow target overlap the
	// next cycle.
	if d := sc.Timeout.D(); d <= 0 || d > sc.Interval.D() {
		errs = append(errs, FieldError{Path: at + ".timeout", Message: fmt.Sprintf("timeout %s is out of range", d),
			Expected: fmt.Sprintf("more than 0s and at most the interval (%s)", sc.Interval.D())})
	}
	if len(sc.Targets) > 0 && s.Default == "prometheus" {
		errs = append(errs, FieldError{Path: at + ".targets", Message: "scrape targets with signals.default prometheus would never be read",
			Expected: "no targets (the Prometheus server scrapes them), or signals.default embedded"})
	}
	first := map[string]int{}
	for i, t := range sc.Targets {
		p := fmt.Sprintf("%s.targets.%d", at, i)
		if msg, want := checkScrapeURL(t.URL); msg != "" {
			errs = append(errs, FieldError{Path: p + ".url", Message: msg, Expected: want})
		}
		key := t.Job + " " + t.URL
		if f, dup := first[key]; dup {
			errs = append(errs, FieldError{Path: p + ".url", Message: fmt.Sprintf("target %s of job %s listed twice", t.URL, t.Job),
				Expected: "each url once per job", Related: fmt.Sprintf("%s.targets.%d.url", at, f)})
		} else {
			first[key] = i
		}
		for _, name := range slices.Sorted(maps.Keys(t.Labels)) {
			lp := p + ".labels." + name
			switch {
			case !labelName.MatchString(name):
				errs = append(errs, FieldError{Path: lp, Message: fmt.Sprintf("%q is not a label name", name),
					Expected: "letters, digits and '_', not starting with a digit"})
			case strings.HasPrefix(name, "__"):
				errs = append(errs, FieldError{Path: lp, Message: fmt.Sprintf("label %s is reserved", name),
					Expected: "a label name not starting with __"})
			case name == "job":
				errs = append(errs, FieldError{Path: lp, Message: "label job is the target's job field",
					Expected: "the job field, not a job label"})
			}
		}
	}
	return errs
}

// checkScrapeURL says what is wrong with a target's URL and what was
// expected, or "".
func checkScrapeURL(raw string) (msg, expected string) {
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Sprintf("%q is not a URL: %v", raw, err), "an http:// or https:// URL"
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Sprintf("scheme %q is not http or https", u.Scheme), "an http:// or https:// URL"
	case u.User != nil:
		// A spec is read by everyone who reads the repository.
		return "the URL holds credentials", "a URL without user:password: credentials never go in a spec"
	case u.Hostname() == "":
		return fmt.Sprintf("%q has no host", raw), "a URL with a host"
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Sprintf("port %s is out of range", p), "a port from 1 to 65535"
		}
	}
	return "", ""
}

func formatShare(f float64) string {
	return strconv.FormatFloat(math.Round(f*1e6)/1e6, 'f', -1, 64)
}

var _ = RegisterCheck(Check{Kind: "Environment", Path: "spec.providers.*.config.trace", What: "the sim trace is a regular file inside the spec directory (or its .setpoint/), and state.path too", Why: WhyFiles})

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
		c, err := p.SimConfig()
		if err != nil || c.Trace == "" {
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

// checkSimNodes: each node once, a topology that parses and is not too
// big, and only workloads of the sim world named (first: the workloads by
// namespace/name).
func checkSimNodes(at string, nodes []SimNode, first map[string]int) []FieldError {
	var errs []FieldError
	names := map[string]int{}
	for j, n := range nodes {
		np := fmt.Sprintf("%s.%d", at, j)
		if f, dup := names[n.Name]; dup {
			errs = append(errs, FieldError{Path: np + ".name", Message: "duplicate sim node " + n.Name,
				Expected: "one node per name", Related: fmt.Sprintf("%s.%d.name", at, f)})
		} else {
			names[n.Name] = j
		}
		if _, err := nodepolicy.ParseTopology(n.Topology); err != nil {
			errs = append(errs, FieldError{Path: np + ".topology", Message: err.Error(),
				Expected: fmt.Sprintf("sockets×cores×threads like 2x8x2, at most %d CPUs", nodepolicy.MaxCPUs)})
		}
		seen := map[string]bool{}
		for k, w := range n.Workloads {
			wp := fmt.Sprintf("%s.workloads.%d", np, k)
			if _, ok := first[w]; !ok {
				errs = append(errs, FieldError{Path: wp, Message: fmt.Sprintf("no sim workload %s", w), Expected: "the namespace/name of one of the sim world's workloads"})
			} else if seen[w] {
				errs = append(errs, FieldError{Path: wp, Message: fmt.Sprintf("sim workload %s twice", w), Expected: "each workload once"})
			}
			seen[w] = true
		}
	}
	return errs
}
