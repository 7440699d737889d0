// Package sim is the sim world: Deployments, HPAs and Knative services whose
// pods serve a real request trace, exposing the metrics a cluster with
// cAdvisor, kube-state-metrics and instrumented apps would. It is a
// deterministic function of (trace, options, seed, applied changes, time).
package sim

import (
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/values"
)

// Sink receives the world's samples: the embedded store in process, the
// provider Signals buffer out of process. cache is the sink's own handle for
// the series, kept by the world between calls so repeated appends skip
// hashing labels.
type Sink interface {
	AppendCached(l labels.Labels, cache *any, t int64, v float64) error
}

// ScrapeInterval is how often the world's metrics are written, as a
// Prometheus scrape would sample them.
const ScrapeInterval = 5

// MaxPodsPerWorkload bounds the pods of one workload, whatever asks for
// them: an autoscaler under a flood (a Knative service with no max-scale
// has no other bound), a config or an applied change. Every pod is
// simulated each second and exposes 22 or more series, so the world's
// cost grows with pods. 10,000 is the schema's bound on a workload's
// replicas, and beyond the replicas of nearly any one real Deployment; at
// it the cost is large but bounded: the demo with its Knative service
// flooded to 10,000 pods (rateScale 1e6) peaked at 0.65 GB in the provider
// and 2.4 GB in setpoint over 15 virtual minutes, most of it the series the
// embedded store keeps. An autoscaler stops at the bound, as one on a full
// cluster would (the pods beyond it never schedule); a config or a change
// asking for more is refused.
const MaxPodsPerWorkload = 10_000

// errTooManyPods is the refusal of a count of pods above the bound.
func errTooManyPods(what string, n int64) error {
	return fmt.Errorf("%s %d: the sim world runs at most %d pods per workload", what, n, MaxPodsPerWorkload)
}

// pods turns an autoscaler's float recommendation into a pod count in
// [0, MaxPodsPerWorkload], clamping before the conversion (a float beyond
// an int's range converts to garbage); NaN is fallback.
func pods(f float64, fallback int) int {
	switch {
	case math.IsNaN(f):
		return fallback
	case f <= 0:
		return 0
	case f >= MaxPodsPerWorkload:
		return MaxPodsPerWorkload
	}
	return int(f)
}

// Buckets of http_request_duration_seconds, as client libraries default;
// a workload's histogram adds its latency targets to them.
var Buckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Options configure a world beyond the Environment's sim config.
type Options struct {
	// BaseDir resolves the trace path (the Environment file's directory).
	BaseDir string
	// Sink receives metrics; nil discards them.
	Sink Sink
	// Changes are applied changes to replay (from the sim state file).
	Changes []Change
	// Traces are traces loaded already, by traceKey; the world adds those
	// it loads, so a caller building several worlds reads each file once.
	Traces map[string]*Trace
	// NoReport keeps no per-workload report beyond the request counts
	// (a one-shot plan reads none; its per-second percentiles were 8% of
	// a 10,000-workload plan).
	NoReport bool
}

// World is the simulated cluster.
type World struct {
	cfg spec.SimConfig
	// base is the config as given, before applied changes wrote into the
	// world's copy (a created HPA): what a rebuild starts from.
	base  spec.SimConfig
	trace *Trace
	sink  Sink
	rng   *rand.Rand
	wls   []*workload
	// fleets are pools of clusters Fleet specs size.
	fleets []*simFleet
	// groups are VIPs RouteGroup specs steer.
	groups []*simGroup
	// nodes run node policies over the workloads' pods.
	nodes    []*simNode
	policies []*simPolicy
	byKey    map[string]*object
	// listed indexes byKey by kind and namespace for List, rebuilt after
	// byKey changes (listedOK false); see objectsOf.
	listed   map[[2]string][]*object
	listedOK bool
	// traces are the workloads' traces, kept for a rebuild: the world
	// replays what it loaded, not the file as it is now.
	traces  map[string]*Trace
	changes []Change
	applied int
	sec     int // seconds simulated: the world is at Start + sec
	// noReport: see Options.NoReport.
	noReport bool
}

// Totals are a workload's request accounting since the start.
type Totals struct {
	Arrived, Served, Dropped, Backlog float64
}

// New builds a world at the trace's start.
func New(cfg spec.SimConfig, o Options) (*World, error) {
	tr, err := TraceOf(cfg, o.BaseDir)
	if err != nil {
		return nil, err
	}
	return NewWithTrace(cfg, tr, o)
}

// TraceOf loads the trace a sim config names, with its transformations:
// the world's timeline (a workload's own trace is loaded by the world).
func TraceOf(cfg spec.SimConfig, baseDir string) (*Trace, error) {
	path := cfg.Trace
	if !filepath.IsAbs(path) {
		path = filepath.Join(baseDir, path)
	}
	to := TraceOptions{RateScale: cfg.RateScale, Thin: cfg.Thin}
	if cfg.Window != nil {
		to.From = cfg.Window.From.D()
		if cfg.Window.Until != nil {
			to.Until = cfg.Window.Until.D()
		}
	}
	return LoadTrace(path, to)
}

// NewWithTrace builds a world over a trace already loaded.
func NewWithTrace(cfg spec.SimConfig, tr *Trace, o Options) (*World, error) {
	// The world's workloads are its own: creating an HPA records it in the
	// workload's config, which must not reach the caller's, nor the base a
	// rebuild starts from.
	base := cfg
	base.Workloads = slices.Clone(cfg.Workloads)
	cfg.Workloads = slices.Clone(cfg.Workloads)
	w := &World{
		cfg:      cfg,
		base:     base,
		trace:    tr,
		sink:     o.Sink,
		rng:      rand.New(rand.NewPCG(uint64(cfg.Seed), 0x51a)),
		byKey:    map[string]*object{},
		noReport: o.NoReport,
	}
	traces := o.Traces
	if traces == nil {
		traces = map[string]*Trace{}
	}
	traces[traceKey(cfg)] = tr
	w.traces = traces
	for i := range cfg.Workloads {
		c := &cfg.Workloads[i]
		own := cfg.TraceFor(*c)
		wtr, ok := traces[traceKey(own)]
		if !ok {
			var err error
			if wtr, err = TraceOf(own, o.BaseDir); err != nil {
				return nil, fmt.Errorf("sim workload %s/%s: %w", c.Namespace, c.Name, err)
			}
			traces[traceKey(own)] = wtr
		}
		k := own.RateScale
		if k == 0 {
			k = 1
		}
		thin := own.Thin
		if thin == 0 {
			thin = 1
		}
		shift, err := own.ShiftSeconds(DefaultShift)
		if err != nil {
			return nil, fmt.Errorf("sim workload %s/%s: %w", c.Namespace, c.Name, err)
		}
		src, err := newSource(wtr, own.Scaling, own.ServiceTimes, k, thin, c.Share, shift, workloadSeed(cfg.Seed, c))
		if err != nil {
			return nil, fmt.Errorf("sim workload %s/%s: %w", c.Namespace, c.Name, err)
		}
		wl, err := newWorkload(w, c, src)
		if err != nil {
			return nil, err
		}
		w.wls = append(w.wls, wl)
	}
	for _, fc := range cfg.Fleets {
		f, err := newFleet(w, fc)
		if err != nil {
			return nil, err
		}
		w.fleets = append(w.fleets, f)
	}
	for _, gc := range cfg.RouteGroups {
		if w.group(gc.Namespace, gc.Name) != nil {
			return nil, fmt.Errorf("sim route group %s/%s twice", gc.Namespace, gc.Name)
		}
		g, err := newGroup(w, gc, tr)
		if err != nil {
			return nil, err
		}
		for _, o := range w.groups {
			if o.vip == g.vip {
				return nil, fmt.Errorf("sim route groups %s/%s and %s/%s are both on VIP %s", o.cfg.Namespace, o.cfg.Name, gc.Namespace, gc.Name, g.vip)
			}
		}
		w.groups = append(w.groups, g)
	}
	nodes, err := newNodes(w, cfg.Nodes)
	if err != nil {
		return nil, err
	}
	w.nodes = nodes
	w.changes = append(w.changes, o.Changes...)
	sort.SliceStable(w.changes, func(i, j int) bool { return w.changes[i].At < w.changes[j].At })
	if err := w.checkEnd(w.changes); err != nil {
		return nil, err
	}
	return w, nil
}

// workloadSeed seeds a workload's draws from the world's seed and the
// workload's name, so its requests do not change when another workload is
// added, removed or moved in the config.
func workloadSeed(seed int64, c *spec.SimWorkload) uint64 {
	h := fnv.New64a()
	h.Write([]byte(c.Kind + "/" + c.Namespace + "/" + c.Name))
	return uint64(seed) ^ h.Sum64()
}

// traceKey identifies a loaded trace: the file and the window (rateScale
// and thin are applied as it replays).
func traceKey(c spec.SimConfig) string {
	k := c.Trace
	if c.Window != nil {
		k += "\x00" + c.Window.From.D().String()
		if c.Window.Until != nil {
			k += "\x00" + c.Window.Until.D().String()
		}
	}
	return k
}

// checkEnd refuses changes after the trace's end. The world takes none
// there, so such a change was never applied to this world: the state file
// belongs to another trace or window.
func (w *World) checkEnd(changes []Change) error {
	end := len(w.trace.Rate)
	if n := len(changes); n == 0 || changes[n-1].At <= end {
		return nil
	}
	i := slices.IndexFunc(changes, func(c Change) bool { return c.At > end })
	return fmt.Errorf("change %d at %d s is after the end of the trace (%d s): the sim state was made with another trace or window; delete it and the world starts again from its config",
		i+1, changes[i].At, end)
}

// ended reports whether the world is past its trace's end, where it takes
// no changes: a change there could not be replayed from the state file.
func (w *World) ended() bool { return w.sec > len(w.trace.Rate) }

// Start is the virtual time at which the trace begins.
func (w *World) Start() time.Time { return w.trace.Start }

// End is the virtual time at which the trace ends.
func (w *World) End() time.Time { return w.trace.Start.Add(w.trace.Duration()) }

// Now is the world's virtual time.
func (w *World) Now() time.Time { return w.trace.Start.Add(time.Duration(w.sec) * time.Second) }

// Trace is the trace the world replays.
func (w *World) Trace() *Trace { return w.trace }

// AdvanceTo simulates every second up to t (virtual). Time never goes back.
func (w *World) AdvanceTo(t time.Time) {
	target := int(t.Sub(w.trace.Start) / time.Second)
	for w.sec < target {
		w.step()
	}
	w.applyDue(w.sec)
}

// Totals returns a workload's request accounting.
func (w *World) Totals(namespace, name string) (Totals, bool) {
	if wl := w.workload(namespace, name); wl != nil {
		r := wl.tracker.r
		return Totals{Arrived: float64(r.Arrived), Served: float64(r.Served), Dropped: float64(r.Dropped), Backlog: float64(len(wl.pending))}, true
	}
	return Totals{}, false
}

// Report returns what the world measured for a workload so far.
func (w *World) Report(namespace, name string) (Report, bool) {
	wl := w.workload(namespace, name)
	if wl == nil {
		return Report{}, false
	}
	r := wl.tracker.r
	r.World = wl.tracker.world.shape()
	r.Targets = slices.Clone(r.Targets)
	r.Points = Points{Envelope: slices.Clone(r.Points.Envelope), Ready: slices.Clone(r.Points.Ready), RPS: slices.Clone(r.Points.RPS), P99: slices.Clone(r.Points.P99), P99Exact: slices.Clone(r.Points.P99Exact)}
	return r, true
}

func (w *World) workload(namespace, name string) *workload {
	for _, wl := range w.wls {
		if wl.cfg.Namespace == namespace && wl.cfg.Name == name {
			return wl
		}
	}
	return nil
}

// step simulates second w.sec and moves to the next.
func (w *World) step() {
	s := w.sec
	w.applyDue(s)
	for _, wl := range w.wls {
		wl.step(s)
	}
	for _, f := range w.fleets {
		f.step(s)
	}
	for _, g := range w.groups {
		g.step(s)
	}
	for _, n := range w.nodes {
		n.step(s)
	}
	w.sec++
	if w.sec%ScrapeInterval == 0 && w.sink != nil {
		t := w.Now().UnixMilli()
		for _, wl := range w.wls {
			wl.emit(t)
		}
		for _, f := range w.fleets {
			f.emit(t)
		}
	}
}

func (w *World) applyDue(upTo int) {
	for w.applied < len(w.changes) && w.changes[w.applied].At <= upTo {
		// A replayed change was valid when it was applied; if the config
		// changed since, a change that no longer fits is skipped whole.
		if p, _ := w.check(w.changes[w.applied].objectChange()); p != nil {
			w.commit(p)
		}
		w.applied++
	}
}

type workload struct {
	w      *World
	cfg    *spec.SimWorkload
	deploy *object // Deployment (or the KnativeService's revision)
	hpa    *object
	ksvc   *object
	// template is the object holding the pod template (Deployment or
	// KnativeService); its generation drives rollouts.
	template *object

	replicas int
	pods     []*pod
	// podGen counts changes of pods (added, removed): a node whose
	// workloads' counts did not move has the same containers.
	podGen uint64
	gone   []*pod // removed since the last scrape
	podSeq int
	gen    int64

	src       *source
	buf       []arrival
	pending   []arrival // arrived with no pod ready
	readyPods []*pod    // this second's ready pods
	rng       *rand.Rand
	servers   int       // per pod
	svc       float64   // mean service time, seconds
	buckets   []float64 // the histogram's bounds
	tracker   *tracker

	// containers' memory paths, and the container each path belongs to
	mem         []memPaths
	containerOf map[addrs.Path]int
	vals        []float64 // emit's buffer

	syncServed, syncArrived float64 // since the last autoscaler sync
	syncSecs                int     // seconds since the last autoscaler sync
	hpaRecs                 []rec
	kpaConc                 []float64 // per-second concurrency, last 60 s
	lastTraffic             int
	// The gateway in front: how long a request waits for a ready pod
	// (seconds), what it counted, and its series.
	maxWait               float64
	gwArrived, gwTimeouts float64
	gwSeries              []*ser
	cpuPerReq, cpuReq     float64 // cores
	startup               int     // seconds
}

type memPaths struct {
	name     string     // the container's path, for messages
	req, lim addrs.Path // its memory request and limit
}

type rec struct {
	sec, replicas int
}

type pod struct {
	name    string
	seq     int // the workload's count of pods when it was made: its node
	readyAt int
	gen     int64
	old     bool // replaced by a rollout; removed when a new pod is ready

	ok, failed, sum, count float64
	hist                   []float64 // served per bucket, not cumulative (last: +Inf)
	cpu                    []float64 // per container, CPU-seconds
	series                 []*ser
	free                   servers
}

type ser struct {
	l     labels.Labels
	cache any
}

func newWorkload(w *World, c *spec.SimWorkload, src *source) (*workload, error) {
	name := c.Namespace + "/" + c.Name
	if c.Replicas > MaxPodsPerWorkload {
		return nil, fmt.Errorf("sim workload %s: %w", name, errTooManyPods("replicas", int64(c.Replicas)))
	}
	if c.HPA != nil && c.HPA.Min > MaxPodsPerWorkload {
		return nil, fmt.Errorf("sim workload %s: %w", name, errTooManyPods("hpa.min", int64(c.HPA.Min)))
	}
	if c.Knative != nil && c.Knative.MinScale > MaxPodsPerWorkload {
		return nil, fmt.Errorf("sim workload %s: %w", name, errTooManyPods("knative.minScale", int64(c.Knative.MinScale)))
	}
	wl := &workload{w: w, cfg: c, replicas: max(c.Replicas, 0), startup: int(c.Startup.D() / time.Second),
		cpuPerReq: float64(c.CPUPerRequest) / 1000, cpuReq: float64(c.CPURequest) / 1000, lastTraffic: -1 << 30,
		src: src, rng: rand.New(rand.NewPCG(src.seed, routeStream)), svc: c.ServiceTime.D().Seconds()}
	wl.servers = concurrency(c.PerPodRPS, wl.svc)
	wl.maxWait = MaxWait
	if g := c.Gateway.Timeout.D(); g > 0 {
		// Bounded: every held request is memory.
		wl.maxWait = min(g, MaxGatewayTimeout).Seconds()
	}
	targets := make([]time.Duration, len(c.Targets))
	for i, d := range c.Targets {
		targets[i] = d.D()
	}
	ts := seconds(targets)
	wl.buckets = bucketsWith(ts)
	wl.tracker = newTracker(c.Namespace, c.Name, ts, wl.buckets, len(w.trace.Rate))
	wl.tracker.lean = w.noReport
	wl.tracker.envelope = PerMinute(src.tr.Rate)
	for i := range wl.tracker.envelope {
		wl.tracker.envelope[i] *= src.expect
	}
	wl.tracker.r.Trace = minutesShape(wl.tracker.envelope)
	configured := make(map[addrs.Path]string, len(c.Managers))
	for k, m := range c.Managers {
		p, err := addrs.ParsePath(k)
		if err != nil {
			return nil, fmt.Errorf("sim workload %s/%s: managers: %w", c.Namespace, c.Name, err)
		}
		configured[p] = m
	}
	managers := func(attr addrs.Path) string {
		if m, ok := configured[attr]; ok {
			return m
		}
		return DefaultManager
	}
	containers := map[addrs.Path]values.Value{}
	wl.containerOf = map[addrs.Path]int{}
	for i, ct := range c.Containers {
		m := memPaths{name: pathContainers.Child(addrs.Sel("name", ct.Name)).String(),
			req: ContainerAttr(ct.Name, "requests"), lim: ContainerAttr(ct.Name, "limits")}
		wl.mem = append(wl.mem, m)
		wl.containerOf[m.req], wl.containerOf[m.lim] = i, i
		containers[m.req] = values.BytesOf(int64(ct.Request))
		containers[m.lim] = values.BytesOf(int64(ct.Limit))
	}
	count := func(n int) values.Value { return values.CountOf(int64(n)) }
	switch c.Kind {
	case KindDeployment:
		wl.deploy = wl.newObject(KindDeployment, managers)
		wl.deploy.attrs[AttrReplicas] = count(c.Replicas)
		maps.Copy(wl.deploy.attrs, containers)
		wl.template = wl.deploy
		if c.HPA != nil {
			wl.hpa = wl.newObject(KindHPA, managers)
			wl.hpa.attrs[AttrMinReplicas] = count(c.HPA.Min)
			wl.hpa.attrs[AttrMaxReplicas] = count(c.HPA.Max)
			// Unset, an HPA waits 300 s before scaling down; the world
			// reads it so, as the kubernetes provider does.
			wl.hpa.attrs[AttrScaleDownWindow] = count(defaultScaleDownWindow)
			if c.HPA.TargetCPU != nil {
				wl.hpa.attrs[AttrTargetCPU] = count(int(math.Round(float64(*c.HPA.TargetCPU) * 100)))
			}
			wl.replicas = min(max(c.Replicas, c.HPA.Min), c.HPA.Max)
			wl.deploy.attrs[AttrReplicas] = count(wl.replicas)
			// The HPA writes spec.replicas.
			wl.deploy.managers[AttrReplicas] = HPAManager
		}
	case KindKnative:
		k := c.Knative
		if k == nil {
			k = &spec.SimKnative{TargetConcurrency: 100}
		}
		wl.ksvc = wl.newObject(KindKnative, managers)
		wl.ksvc.attrs[AttrMinScale] = count(k.MinScale)
		if k.MaxScale > 0 {
			wl.ksvc.attrs[AttrMaxScale] = count(k.MaxScale)
		}
		maps.Copy(wl.ksvc.attrs, containers)
		wl.template = wl.ksvc
		wl.replicas = max(c.Replicas, k.MinScale)
	default:
		return nil, fmt.Errorf("sim workload %s/%s: unknown kind %q", c.Namespace, c.Name, c.Kind)
	}
	wl.gen = wl.template.templateGen
	for i := 0; i < wl.replicas; i++ {
		wl.addPod(-wl.startup) // running since before the trace
	}
	return wl, nil
}

func (wl *workload) newObject(kind string, managers func(addrs.Path) string) *object {
	c, w := wl.cfg, wl.w
	o := &object{wl: wl, kind: kind, namespace: c.Namespace, name: c.Name, attrs: map[addrs.Path]values.Value{},
		managers: map[addrs.Path]string{}, labels: map[string]string{"app": c.Name},
		annotations: maps.Clone(c.Annotations), generation: 1, managerOf: managers}
	if o.annotations == nil {
		o.annotations = map[string]string{}
	}
	w.putObject(o)
	return o
}

// putObject adds o to the world's objects.
func (w *World) putObject(o *object) {
	w.byKey[o.key()] = o
	w.listedOK = false
}

// dropObject removes the object of key.
func (w *World) dropObject(key string) {
	delete(w.byKey, key)
	w.listedOK = false
}

// objectsOf are the objects of kind in namespace ("": every namespace),
// through an index built once per change of the objects: a plan lists
// each namespace's HPAs, and a scan of every object per list is
// quadratic in a large world.
func (w *World) objectsOf(kind, namespace string) []*object {
	if !w.listedOK {
		w.listed = map[[2]string][]*object{}
		for _, o := range w.byKey {
			all := [2]string{o.kind, ""}
			w.listed[all] = append(w.listed[all], o)
			if o.namespace != "" {
				ns := [2]string{o.kind, o.namespace}
				w.listed[ns] = append(w.listed[ns], o)
			}
		}
		w.listedOK = true
	}
	return w.listed[[2]string{kind, namespace}]
}

// knativeScale reads an annotation the way Knative does: absent is 0.
func (wl *workload) knativeScale(attr addrs.Path) int {
	return max(int(wl.ksvc.attrs[attr].Int()), 0)
}

func (wl *workload) intAttr(o *object, attr addrs.Path) int { return int(o.attrs[attr].Int()) }

func (wl *workload) ready(s int) int {
	n := 0
	for _, p := range wl.pods {
		if p.readyAt <= s {
			n++
		}
	}
	return n
}

func (wl *workload) addPod(readyFrom int) {
	wl.podSeq++
	wl.podGen++
	p := &pod{name: fmt.Sprintf("%s-%x-%d", wl.cfg.Name, wl.gen, wl.podSeq), seq: wl.podSeq, readyAt: readyFrom + wl.startup, gen: wl.gen,
		hist: make([]float64, len(wl.buckets)+1), cpu: make([]float64, len(wl.cfg.Containers)), free: newServers(wl.servers)}
	wl.pods = append(wl.pods, p)
}

// step runs second s of this workload: its autoscaler, its pods, then
// every request arriving in it, in time order, after those still waiting
// for a pod.
func (wl *workload) step(s int) {
	wl.buf = wl.src.second(s, wl.buf[:0])
	wl.autoscale(s, len(wl.buf)+len(wl.pending))
	wl.reconcilePods(s)
	wl.readyPods = wl.readyPods[:0]
	for _, p := range wl.pods {
		if p.readyAt <= s {
			wl.readyPods = append(wl.readyPods, p)
		}
	}
	t := wl.tracker
	t.begin(s)
	var conc float64
	// Those waiting for a pod go first, from the second a pod is ready;
	// past the gateway's timeout they are refused.
	if len(wl.pending) > 0 {
		kept := wl.pending[:0]
		for _, a := range wl.pending {
			switch {
			case float64(s)-a.at > wl.maxWait:
				wl.gwTimeouts++
				wl.drop()
			case len(wl.readyPods) > 0:
				conc += wl.serve(a, float64(s))
			default:
				kept = append(kept, a)
			}
		}
		wl.pending = kept
	}
	wl.gwArrived += float64(len(wl.buf))
	for _, a := range wl.buf {
		t.arrive(len(wl.readyPods) == 0)
		if len(wl.readyPods) == 0 {
			wl.pending = append(wl.pending, a)
			continue
		}
		conc += wl.serve(a, a.at)
	}
	wl.syncArrived += float64(len(wl.buf))
	wl.syncSecs++
	if len(wl.buf) > 0 {
		wl.lastTraffic = s
	}
	// Knative's concurrency: requests in flight, by Little's law (the
	// request-seconds of latency begun this second), and those waiting.
	wl.kpaConc = append(wl.kpaConc, conc+float64(len(wl.pending)))
	if len(wl.kpaConc) > 60 {
		wl.kpaConc = wl.kpaConc[1:]
	}
	for _, p := range wl.pods {
		for i := range p.cpu {
			p.cpu[i] += idleCPU
		}
	}
	t.end(s, len(wl.pods), len(wl.readyPods))
}

// routeStream keys the draws that pick the pod each request goes to (with
// the workload's seed): the oracle's replay draws the same.
const routeStream = 0x90d5

// idleCPU is what each container burns a second with no request (cores).
const idleCPU = 0.002

// serve sends a request to a ready pod chosen at random, arriving there at
// `at` (later than a.at when it waited for a pod), and returns its latency
// (0 when refused).
func (wl *workload) serve(a arrival, at float64) float64 {
	p := wl.readyPods[wl.rng.IntN(len(wl.readyPods))]
	service := a.cost * wl.svc
	// A pod's own queue refuses past MaxWait from when the request
	// reached it (the gateway's hold, if any, came before).
	finish, ok := p.free.take(at, service, at+MaxWait)
	if !ok {
		p.failed++
		wl.tracker.dropped()
		return 0
	}
	lat := finish - a.at
	p.ok++
	p.count++
	p.sum += lat
	b, _ := slices.BinarySearch(wl.buckets, lat)
	p.hist[b]++
	if len(p.cpu) > 0 {
		p.cpu[0] += wl.cpuPerReq * a.cost
	}
	wl.syncServed++
	wl.tracker.served(lat)
	return lat
}

// drop refuses a request that waited too long for a pod: a 503 from a pod
// if there is one (as the activator or a load balancer in front of them
// answers), counted by the world in any case.
func (wl *workload) drop() {
	if len(wl.pods) > 0 {
		wl.pods[wl.rng.IntN(len(wl.pods))].failed++
	}
	wl.tracker.dropped()
}

// autoscale runs the workload's autoscaler on its own period.
func (wl *workload) autoscale(s int, arrivals int) {
	switch {
	case wl.hpa != nil:
		if s%15 == 0 {
			wl.hpaSync(s)
		}
	case wl.ksvc != nil:
		if wl.replicas == 0 && arrivals > 0 {
			wl.replicas = 1 // the activator wakes a scaled-to-zero service at once
		}
		if s%2 == 0 {
			wl.kpaSync(s)
		}
	default:
		wl.replicas = min(max(wl.intAttr(wl.deploy, AttrReplicas), 0), MaxPodsPerWorkload)
	}
}

// defaultScaleDownWindow is how long an HPA keeps its highest
// recommendation before scaling down when its behavior does not say.
const defaultScaleDownWindow = 300

// hpaSync is the Kubernetes HPA algorithm on CPU utilisation of requests or
// on requests per second per pod: a 10% tolerance, scale-up limited to
// max(+4 pods, ×2) per sync, scale-down stabilised over its window (300 s
// unless spec.behavior.scaleDown.stabilizationWindowSeconds says), clamped to
// [minReplicas, maxReplicas].
func (wl *workload) hpaSync(s int) {
	minR, maxR := wl.intAttr(wl.hpa, AttrMinReplicas), wl.intAttr(wl.hpa, AttrMaxReplicas)
	current := wl.replicas
	ready := wl.ready(s)
	desired := current
	if ready > 0 && (wl.syncServed > 0 || wl.syncArrived > 0) {
		h := wl.cfg.HPA
		var ratio float64
		if h.TargetRPS > 0 {
			ratio = wl.syncArrived / float64(wl.syncSecs) / float64(ready) / h.TargetRPS
		} else {
			// The target as the HPA holds it now (setpoint may own it).
			target := 0.8
			if t, ok := wl.hpa.attrs[AttrTargetCPU]; ok && t.Type() == values.Count && t.Int() > 0 {
				target = float64(t.Int()) / 100
			}
			cpuPerPod := (wl.syncServed/float64(wl.syncSecs)/float64(ready))*wl.cpuPerReq + 0.002*float64(len(wl.cfg.Containers))
			ratio = cpuPerPod / wl.cpuReq / target
		}
		if math.Abs(ratio-1) > 0.1 {
			desired = pods(math.Ceil(float64(ready)*ratio), current)
		}
	} else if ready > 0 {
		desired = 0 // no load at all: as low as allowed
	}
	desired = min(desired, max(2*current, current+4))
	wl.hpaRecs = append(wl.hpaRecs, rec{s, desired})
	kept := wl.hpaRecs[:0]
	stab := desired
	window := defaultScaleDownWindow
	if w, ok := wl.hpa.attrs[AttrScaleDownWindow]; ok && w.Type() == values.Count {
		window = int(min(max(w.Int(), 0), 3600))
	}
	for _, r := range wl.hpaRecs {
		if r.sec > s-window {
			kept = append(kept, r)
			stab = max(stab, r.replicas)
		}
	}
	wl.hpaRecs = kept
	if desired < current {
		// Scale down only as far as the highest recommendation of the
		// window allows.
		desired = min(stab, current)
	}
	// maxReplicas may be beyond the world's bound (it is only a ceiling);
	// the bound holds whatever it says.
	desired = min(max(desired, minR), maxR, MaxPodsPerWorkload)
	wl.replicas = desired
	wl.deploy.attrs[AttrReplicas] = values.CountOf(int64(desired))
	wl.hpa.attrs[AttrCurrentReplicas] = values.CountOf(int64(current))
	wl.hpa.attrs[AttrDesiredReplicas] = values.CountOf(int64(desired))
	wl.syncServed, wl.syncArrived, wl.syncSecs = 0, 0, 0
}

// kpaSync is Knative's autoscaler in its stable mode: the average
// concurrency over 60 s divided by the target, at least min-scale, at most
// max-scale; zero only after 60 s without a request.
func (wl *workload) kpaSync(s int) {
	var sum float64
	for _, c := range wl.kpaConc {
		sum += c
	}
	target := 100.0
	if wl.cfg.Knative != nil && wl.cfg.Knative.TargetConcurrency > 0 {
		target = wl.cfg.Knative.TargetConcurrency
	}
	desired := 0
	if len(wl.kpaConc) > 0 {
		desired = pods(math.Ceil(sum/float64(len(wl.kpaConc))/target), wl.replicas)
	}
	if desired == 0 && s-wl.lastTraffic < 60 {
		desired = 1
	}
	desired = max(desired, wl.knativeScale(AttrMinScale))
	if m := wl.knativeScale(AttrMaxScale); m > 0 {
		desired = min(desired, m)
	}
	// No max-scale is no bound in Knative; in the sim world it is this.
	wl.replicas = min(desired, MaxPodsPerWorkload)
}

// reconcilePods makes the pods match replicas and the pod template: a
// template change (memory) rolls every pod, a new one first.
func (wl *workload) reconcilePods(s int) {
	if g := wl.template.templateGen; g != wl.gen {
		wl.gen = g
		for _, p := range wl.pods {
			p.old = true
		}
	}
	var cur, old []*pod
	for _, p := range wl.pods {
		if p.old {
			old = append(old, p)
		} else {
			cur = append(cur, p)
		}
	}
	for len(cur) < wl.replicas {
		wl.addPod(s)
		cur = append(cur, wl.pods[len(wl.pods)-1])
	}
	if len(cur) > wl.replicas {
		cur = scaleDown(cur, wl.replicas, s, func(p *pod) int { return p.readyAt })
	}
	readyNew := 0
	for _, p := range cur {
		if p.readyAt <= s {
			readyNew++
		}
	}
	// Old pods stay until as many new ones are ready (maxUnavailable 0).
	keepOld := max(0, min(len(old), wl.replicas-readyNew))
	kept := append(cur, old[:keepOld]...)
	if len(kept) < len(wl.pods) {
		wl.podGen++
		in := make(map[*pod]bool, len(kept))
		for _, p := range kept {
			in[p] = true
		}
		for _, p := range wl.pods {
			if !in[p] && p.series != nil {
				wl.gone = append(wl.gone, p)
			}
		}
	}
	wl.pods = kept
}

// scaleDown keeps n of pods at second s as a ReplicaSet picks the pods to
// delete: those not yet ready first, then the newest. The pods kept are
// left in the order of that ranking (the order the world then routes
// over), which the oracle's replay depends on: both call this.
func scaleDown[P any](pods []P, n, s int, readyAt func(P) int) []P {
	sort.SliceStable(pods, func(i, j int) bool {
		ri, rj := readyAt(pods[i]) > s, readyAt(pods[j]) > s
		if ri != rj {
			return ri
		}
		return readyAt(pods[i]) > readyAt(pods[j])
	})
	return pods[len(pods)-n:]
}

// emit writes every pod's metrics at t (ms). A pod that went away gets a
// staleness marker on each of its series, as Prometheus writes when a
// target disappears, so instant queries stop seeing it at once.
func (wl *workload) emit(t int64) {
	for _, p := range wl.gone {
		for _, sr := range p.series {
			_ = wl.w.sink.AppendCached(sr.l, &sr.cache, t, math.Float64frombits(value.StaleNaN))
		}
	}
	wl.gone = wl.gone[:0]
	if wl.gwSeries == nil {
		ns, svc := wl.cfg.Namespace, wl.cfg.Name
		wl.gwSeries = []*ser{
			{l: labels.FromStrings("__name__", "gateway_requests_total", "namespace", ns, "service", svc)},
			{l: labels.FromStrings("__name__", "gateway_queue", "namespace", ns, "service", svc)},
			{l: labels.FromStrings("__name__", "gateway_timeouts_total", "namespace", ns, "service", svc)},
		}
	}
	for i, v := range []float64{wl.gwArrived, float64(len(wl.pending)), wl.gwTimeouts} {
		sr := wl.gwSeries[i]
		_ = wl.w.sink.AppendCached(sr.l, &sr.cache, t, v)
	}
	for _, p := range wl.pods {
		if p.series == nil {
			p.series = wl.podSeries(p)
		}
		vals := append(wl.vals[:0], p.ok, p.failed)
		var cum float64
		for i := range wl.buckets {
			cum += p.hist[i]
			vals = append(vals, cum)
		}
		ready := 0.0
		if p.readyAt < wl.w.sec { // ready in the second just simulated
			ready = 1
		}
		vals = append(vals, p.count, p.sum, p.count, 1, ready)
		for i, ct := range wl.cfg.Containers {
			ws := float64(ct.WorkingSet) * (1 + 0.02*(wl.w.rng.Float64()-0.5))
			req, lim := wl.memory(i)
			vals = append(vals, p.cpu[i], ws, float64(req), float64(lim), wl.cpuReq)
		}
		for i, sr := range p.series {
			_ = wl.w.sink.AppendCached(sr.l, &sr.cache, t, vals[i])
		}
		wl.vals = vals
	}
}

// memory returns container i's current request and limit in bytes.
func (wl *workload) memory(i int) (int64, int64) {
	m := wl.mem[i]
	return wl.template.attrs[m.req].Int(), wl.template.attrs[m.lim].Int()
}

// podSeries builds the labels of every series a pod exposes, once.
func (wl *workload) podSeries(p *pod) []*ser {
	ns, app := wl.cfg.Namespace, wl.cfg.Name
	mk := func(kv ...string) *ser { return &ser{l: labels.FromStrings(kv...)} }
	out := []*ser{
		mk("__name__", "http_requests_total", "namespace", ns, "app", app, "pod", p.name, "code", "200"),
		mk("__name__", "http_requests_total", "namespace", ns, "app", app, "pod", p.name, "code", "503"),
	}
	for _, le := range wl.buckets {
		out = append(out, mk("__name__", "http_request_duration_seconds_bucket", "namespace", ns, "app", app, "pod", p.name, "le", strconv.FormatFloat(le, 'f', -1, 64)))
	}
	out = append(out,
		mk("__name__", "http_request_duration_seconds_bucket", "namespace", ns, "app", app, "pod", p.name, "le", "+Inf"),
		mk("__name__", "http_request_duration_seconds_sum", "namespace", ns, "app", app, "pod", p.name),
		mk("__name__", "http_request_duration_seconds_count", "namespace", ns, "app", app, "pod", p.name),
		mk("__name__", "kube_pod_labels", "namespace", ns, "pod", p.name, "label_app", app),
		// kube-state-metrics' readiness: 1 once the pod is ready.
		mk("__name__", "kube_pod_status_ready", "namespace", ns, "pod", p.name, "condition", "true"),
	)
	for _, ct := range wl.cfg.Containers {
		out = append(out,
			mk("__name__", "container_cpu_usage_seconds_total", "namespace", ns, "pod", p.name, "container", ct.Name),
			mk("__name__", "container_memory_working_set_bytes", "namespace", ns, "pod", p.name, "container", ct.Name),
			mk("__name__", "kube_pod_container_resource_requests", "namespace", ns, "pod", p.name, "container", ct.Name, "resource", "memory", "unit", "byte"),
			mk("__name__", "kube_pod_container_resource_limits", "namespace", ns, "pod", p.name, "container", ct.Name, "resource", "memory", "unit", "byte"),
			mk("__name__", "kube_pod_container_resource_requests", "namespace", ns, "pod", p.name, "container", ct.Name, "resource", "cpu", "unit", "core"),
		)
	}
	return out
}
