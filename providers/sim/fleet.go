package sim

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/cluster"
)

// KindCluster is a fleet's cluster in the sim world.
const KindCluster = cluster.Kind

// ClusterManager owns a configured cluster's node count until setpoint
// takes it, as Cluster API's controllers would.
const ClusterManager = "cluster-api"

// simFleet is a pool of clusters whose nodes join and drain with a delay,
// and instances that arrive over a daily pattern, each taking capacity in
// every dimension from the cluster it is placed on, and leave.
type simFleet struct {
	w        *World
	cfg      spec.SimFleet
	dims     []string
	clusters []*simCluster
	rng      *rand.Rand
	rejected float64
	rejSer   *ser
	// evicted counts instances moved off nodes that drained under them.
	evicted float64
	evSer   *ser
	join    int // seconds
	drain   int
	prov    int
}

type simCluster struct {
	obj     *object
	region  string
	multiAZ bool
	phase   string
	until   int   // end of Provisioning / Deleting
	ready   int   // nodes ready
	joining []int // each joining node's ready second
	// draining nodes' gone seconds: they no longer take instances
	draining  []int
	instances []int // each instance's end second
	series    []*ser
	gone      bool
}

func newFleet(w *World, cfg spec.SimFleet) (*simFleet, error) {
	h := fnv.New64a()
	h.Write([]byte(cfg.Namespace + "/" + cfg.Name))
	f := &simFleet{w: w, cfg: cfg, rng: rand.New(rand.NewPCG(uint64(w.cfg.Seed), h.Sum64())),
		join: secs(cfg.JoinTime.D()), drain: secs(cfg.DrainTime.D()), prov: secs(cfg.ProvisionTime.D())}
	if cfg.Arrivals.Lifetime.D() <= 0 {
		return nil, fmt.Errorf("sim fleet %s: arrivals.lifetime must be above 0 (instances that never leave grow without bound)", cfg.Name)
	}
	seen := map[string]bool{}
	for d := range cfg.PerNode {
		seen[d] = true
	}
	for d := range cfg.PerInstance {
		if !seen[d] {
			return nil, fmt.Errorf("sim fleet %s: dimension %s has a perInstance but no perNode", cfg.Name, d)
		}
	}
	for d := range cfg.PerNode {
		if _, ok := cfg.PerInstance[d]; !ok {
			return nil, fmt.Errorf("sim fleet %s: dimension %s has a perNode but no perInstance", cfg.Name, d)
		}
		f.dims = append(f.dims, d)
	}
	sort.Strings(f.dims)
	for _, c := range cfg.Clusters {
		if w.byKey[KindCluster+"/"+cfg.Namespace+"/"+c.Name] != nil {
			return nil, fmt.Errorf("sim fleet %s: cluster %s twice", cfg.Name, c.Name)
		}
		sc := f.add(c.Name, c.Region, c.MultiAZ, c.Nodes, "", ClusterManager)
		sc.ready = c.Nodes
		if c.Failed {
			sc.phase = cluster.PhaseFailed
		}
		sc.sync()
	}
	// The instances running at the start, spread over what fits.
	for i := 0; i < cfg.InitialInstances; i++ {
		f.place(0, f.lifetime())
	}
	return f, nil
}

func secs(d time.Duration) int { return int(d / time.Second) }

// add makes a cluster object of the fleet.
func (f *simFleet) add(name, region string, multiAZ bool, nodes int, template, manager string) *simCluster {
	multi := "false"
	if multiAZ {
		multi = "true"
	}
	o := &object{kind: KindCluster, namespace: f.cfg.Namespace, name: name, attrs: map[addrs.Path]values.Value{},
		managers:    map[addrs.Path]string{cluster.Nodes: manager},
		labels:      map[string]string{cluster.LabelFleet: f.cfg.Name, cluster.LabelCloud: f.cfg.Cloud, cluster.LabelRegion: region, cluster.LabelMultiAZ: multi},
		annotations: map[string]string{}, generation: 1, managerOf: func(addrs.Path) string { return ClusterManager }}
	o.attrs[cluster.Nodes] = values.CountOf(int64(nodes))
	if template != "" {
		o.attrs[cluster.Template] = values.StringOf(template)
	}
	f.w.putObject(o)
	sc := &simCluster{obj: o, region: region, multiAZ: multiAZ, phase: cluster.PhaseProvisioned}
	f.clusters = append(f.clusters, sc)
	return sc
}

// desired is the node count asked for.
func (c *simCluster) desired() int { return int(c.obj.attrs[cluster.Nodes].Int()) }

// sync writes what the cluster is into its object's status.
func (c *simCluster) sync() {
	a := c.obj.attrs
	a[cluster.StatusNodes] = values.CountOf(int64(c.ready + len(c.joining) + len(c.draining)))
	a[cluster.ReadyNodes] = values.CountOf(int64(c.ready))
	phase := c.phase
	if phase == cluster.PhaseProvisioned {
		switch {
		case len(c.joining) > 0:
			phase = cluster.PhaseScalingUp
		case len(c.draining) > 0:
			phase = cluster.PhaseScalingDown
		}
	}
	a[cluster.Phase] = values.StringOf(phase)
}

// takes reports whether the cluster can take instances.
func (c *simCluster) takes() bool { return c.phase == cluster.PhaseProvisioned && !c.gone }

// remaining is what is left of a dimension.
func (f *simFleet) remaining(c *simCluster, d string) float64 {
	return float64(c.ready)*f.cfg.PerNode[d] - float64(len(c.instances))*f.cfg.PerInstance[d]
}

// lifetime draws an instance's lifetime in seconds (exponential).
func (f *simFleet) lifetime() int {
	mean := f.cfg.Arrivals.Lifetime.D().Seconds()
	if mean <= 0 {
		return math.MaxInt32
	}
	return max(1, int(f.rng.ExpFloat64()*mean))
}

// place puts an instance that arrives at second s for life seconds on
// the fullest cluster it fits on (so quiet clusters empty out), or counts
// it refused.
func (f *simFleet) place(s, life int) {
	if f.instances() >= MaxFleetInstances || !f.placeUntil(s+life) {
		f.rejected++
	}
}

// placeUntil puts an instance that ends at second end on the fullest
// cluster it fits on, and says whether one had room.
func (f *simFleet) placeUntil(end int) bool {
	var best *simCluster
	bestLeft := math.Inf(1)
	for _, c := range f.clusters {
		if !c.takes() {
			continue
		}
		fits, left := true, 0.0
		for _, d := range f.dims {
			r := f.remaining(c, d)
			if r < f.cfg.PerInstance[d] {
				fits = false
				break
			}
			left += r / f.cfg.PerNode[d]
		}
		if fits && left < bestLeft {
			best, bestLeft = c, left
		}
	}
	if best == nil {
		return false
	}
	best.instances = append(best.instances, end)
	return true
}

// over says whether a cluster runs more than its ready nodes hold in
// some dimension.
func (f *simFleet) over(c *simCluster) bool {
	for _, d := range f.dims {
		if f.remaining(c, d) < 0 {
			return true
		}
	}
	return false
}

// evict takes off a cluster the instances its ready nodes no longer hold
// (nodes drained under them), the newest first, as a drain evicts what
// runs on the nodes it empties; each goes to the fullest cluster with
// room, keeping its end, or, with none, is refused.
func (f *simFleet) evict(c *simCluster) {
	var out []int
	for len(c.instances) > 0 && f.over(c) {
		last := len(c.instances) - 1
		out = append(out, c.instances[last])
		c.instances = c.instances[:last]
	}
	for _, end := range out {
		f.evicted++
		if !f.placeUntil(end) {
			f.rejected++
		}
	}
}

// MaxFleetInstances bounds the instances a sim fleet runs at once (and so
// its memory and its time per second); arrivals beyond are refused.
const MaxFleetInstances = 50_000

// MaxFleetClusters bounds the clusters a sim fleet has; creates beyond
// are refused.
const MaxFleetClusters = 500

func (f *simFleet) instances() int {
	n := 0
	for _, c := range f.clusters {
		n += len(c.instances)
	}
	return n
}

// rate is the arrivals per second at second s, on the daily pattern.
func (f *simFleet) rate(s int) float64 {
	a := f.cfg.Arrivals
	base := a.PerHour / 3600
	period := a.Period.D().Seconds()
	if period <= 0 {
		return base
	}
	phase := float64(s)/period - a.PeakAt
	return base * (1 + a.Swing*math.Cos(2*math.Pi*phase))
}

// poisson draws a Poisson count (Knuth's method: rates here are small).
func (f *simFleet) poisson(lambda float64) int {
	if lambda <= 0 {
		return 0
	}
	if lambda > 30 {
		return max(0, int(math.Round(lambda+math.Sqrt(lambda)*f.rng.NormFloat64())))
	}
	l, k, p := math.Exp(-lambda), 0, 1.0
	for {
		p *= f.rng.Float64()
		if p <= l {
			return k
		}
		k++
	}
}

// step runs second s: clusters provisioned or deleted, nodes joined and
// drained, instances gone, then this second's arrivals placed.
func (f *simFleet) step(s int) {
	kept := f.clusters[:0]
	for _, c := range f.clusters {
		switch {
		case c.phase == cluster.PhaseProvisioning && s >= c.until:
			c.phase, c.ready, c.joining = cluster.PhaseProvisioned, c.desired(), nil
		case c.phase == cluster.PhaseDeleting && s >= c.until:
			c.gone = true
			f.w.dropObject(c.obj.key())
		}
		if c.gone {
			f.goneSeries(c)
			continue
		}
		n := 0
		for _, at := range c.joining {
			if at <= s {
				c.ready++
			} else {
				c.joining[n] = at
				n++
			}
		}
		c.joining = c.joining[:n]
		c.draining = slices.DeleteFunc(c.draining, func(at int) bool { return at <= s })
		c.instances = slices.DeleteFunc(c.instances, func(end int) bool { return end <= s })
		kept = append(kept, c)
	}
	f.clusters = kept
	for i := f.poisson(f.rate(s)); i > 0; i-- {
		f.place(s, f.lifetime())
	}
	for _, c := range f.clusters {
		c.sync()
	}
}

// pending series of deleted clusters get staleness markers at the next
// emit.
func (f *simFleet) goneSeries(c *simCluster) {
	if c.series == nil || f.w.sink == nil {
		return
	}
	t := f.w.Now().UnixMilli()
	for _, sr := range c.series {
		_ = f.w.sink.AppendCached(sr.l, &sr.cache, t, math.Float64frombits(value.StaleNaN))
	}
	c.series = nil
}

// emit writes each cluster's remaining capacity per dimension, its
// instances and nodes, and the fleet's refused and evicted instances.
func (f *simFleet) emit(t int64) {
	ns, name := f.cfg.Namespace, f.cfg.Name
	for _, c := range f.clusters {
		if c.series == nil {
			for _, d := range f.dims {
				c.series = append(c.series, &ser{l: labels.FromStrings("__name__", "fleet_remaining", "namespace", ns, "fleet", name, "cluster", c.obj.name, "dimension", d)})
			}
			c.series = append(c.series,
				&ser{l: labels.FromStrings("__name__", "fleet_instances", "namespace", ns, "fleet", name, "cluster", c.obj.name)},
				&ser{l: labels.FromStrings("__name__", "fleet_nodes_ready", "namespace", ns, "fleet", name, "cluster", c.obj.name)})
		}
		for i, d := range f.dims {
			// A cluster that takes no instance has nothing to offer.
			left := 0.0
			if c.takes() {
				left = f.remaining(c, d)
			}
			_ = f.w.sink.AppendCached(c.series[i].l, &c.series[i].cache, t, left)
		}
		k := len(f.dims)
		_ = f.w.sink.AppendCached(c.series[k].l, &c.series[k].cache, t, float64(len(c.instances)))
		_ = f.w.sink.AppendCached(c.series[k+1].l, &c.series[k+1].cache, t, float64(c.ready))
	}
	if f.rejSer == nil {
		f.rejSer = &ser{l: labels.FromStrings("__name__", "fleet_instances_refused_total", "namespace", ns, "fleet", name)}
		f.evSer = &ser{l: labels.FromStrings("__name__", "fleet_instances_evicted_total", "namespace", ns, "fleet", name)}
	}
	_ = f.w.sink.AppendCached(f.rejSer.l, &f.rejSer.cache, t, f.rejected)
	_ = f.w.sink.AppendCached(f.evSer.l, &f.evSer.cache, t, f.evicted)
}

// clusterOf finds a cluster and its fleet by object.
func (w *World) clusterOf(o *object) (*simFleet, *simCluster) {
	for _, f := range w.fleets {
		for _, c := range f.clusters {
			if c.obj == o {
				return f, c
			}
		}
	}
	return nil, nil
}

// fleetNamed finds the fleet a new cluster's labels name.
func (w *World) fleetNamed(namespace, name string) *simFleet {
	for _, f := range w.fleets {
		if f.cfg.Namespace == namespace && f.cfg.Name == name {
			return f
		}
	}
	return nil
}

var labelsPath = addrs.MustPath("metadata.labels")

// currentOf is a cluster object's template or one of its labels.
func currentOf(o *object, path addrs.Path) (string, bool) {
	if path == cluster.Template {
		v, ok := o.attrs[cluster.Template]
		return v.String(), ok
	}
	if last := path.Last(); last.Kind == addrs.MapKey {
		v, ok := o.labels[last.Name]
		return v, ok
	}
	return "", false
}

// checkCluster checks a change of a cluster as Cluster API would: the
// node count (0 to 1000) of a cluster that is neither provisioning nor
// being deleted; a new cluster of a known fleet from one of its
// templates; the deletion of a cluster with no instance left.
func (w *World) checkCluster(p *pending, res providers.ObjectResult) (*pending, providers.ObjectResult) {
	c := p.c
	fail := func(format string, a ...any) (*pending, providers.ObjectResult) {
		res.Err = fmt.Sprintf(format, a...)
		return nil, res
	}
	for path, v := range c.Attributes {
		switch {
		case path == cluster.Nodes:
			if v.Type() != values.Count || v.Int() < 0 || v.Int() > 1000 {
				return fail("%s: %s is not a node count (0 to 1000)", path, v)
			}
		case path == cluster.Template || path.HasPrefix(labelsPath):
			// Set at creation; a later change may carry them unchanged
			// (setpoint carries what it owns), never move them.
			if v.Type() != values.String {
				return fail("%s: %s is not a string", path, v)
			}
			if p.o != nil && c.Action != action.Delete {
				if cur, ok := currentOf(p.o, path); !ok || cur != v.String() {
					return fail("%s is set only when the cluster is created", path)
				}
			}
		default:
			return fail("%s: a Cluster has no such attribute", path)
		}
	}
	for path, v := range c.Restored {
		switch {
		case path != cluster.Nodes:
			return fail("%s: a Cluster restores only %s", path, cluster.Nodes)
		case v.Type() != values.Count || v.Int() < 0 || v.Int() > 1000:
			return fail("%s: %s is not a node count (0 to 1000)", path, v)
		}
	}
	switch c.Action {
	case action.Delete:
		if p.o == nil {
			return p, res
		}
		_, sc := w.clusterOf(p.o)
		switch {
		case sc == nil:
			return fail("no such cluster")
		case len(sc.instances) > 0:
			return fail("cluster %s still runs %d instances", p.o.name, len(sc.instances))
		}
		return p, res
	case action.Create:
		if p.o != nil {
			break
		}
		fleetName := c.Attributes[cluster.LabelPath(cluster.LabelFleet)].String()
		f := w.fleetNamed(c.Address.Namespace, fleetName)
		if f == nil {
			return fail("no fleet %q in namespace %s to create a cluster in", fleetName, c.Address.Namespace)
		}
		if len(f.clusters) >= MaxFleetClusters {
			return fail("fleet %s has %d clusters, the sim world's most", fleetName, len(f.clusters))
		}
		tmpl := c.Attributes[cluster.Template].String()
		if !slices.Contains(f.cfg.Templates, tmpl) {
			return fail("cluster template %q does not exist (fleet %s has %v)", tmpl, fleetName, f.cfg.Templates)
		}
		if c.Attributes[cluster.LabelPath(cluster.LabelRegion)].String() == "" {
			return fail("a new cluster needs its region label")
		}
	case action.Update, action.NoOp:
		if p.o == nil {
			return fail("no such object")
		}
	}
	if p.o != nil {
		if _, sc := w.clusterOf(p.o); sc != nil && (sc.phase == cluster.PhaseProvisioning || sc.phase == cluster.PhaseDeleting) {
			return fail("cluster %s is %s", p.o.name, sc.phase)
		}
		if m := p.o.manager(cluster.Nodes); !c.Force && m != c.Manager && m != "" {
			if _, set := c.Attributes[cluster.Nodes]; set {
				res.Conflicts = append(res.Conflicts, providers.Conflict{Path: cluster.Nodes, Manager: m})
				return fail("conflict: %s is owned by %s (apply with force to take it)", cluster.Nodes, m)
			}
		}
	}
	p.after = map[addrs.Path]values.Value{}
	for path, v := range c.Attributes {
		p.after[path] = v
	}
	res.After = p.after
	return p, res
}

// commitCluster makes a checked cluster change happen at the world's
// second: nodes start joining (or draining, which takes their capacity at
// once), a new cluster starts provisioning, a deleted one deleting.
func (w *World) commitCluster(p *pending) bool {
	c, s := p.c, w.sec
	switch c.Action {
	case action.Delete:
		_, sc := w.clusterOf(p.o)
		if sc == nil || sc.phase == cluster.PhaseDeleting {
			return false
		}
		f, _ := w.clusterOf(p.o)
		sc.phase, sc.until = cluster.PhaseDeleting, s+f.drain
		sc.sync()
		return true
	case action.Create:
		if p.o == nil {
			f := w.fleetNamed(c.Address.Namespace, c.Attributes[cluster.LabelPath(cluster.LabelFleet)].String())
			region := c.Attributes[cluster.LabelPath(cluster.LabelRegion)].String()
			multi := c.Attributes[cluster.LabelPath(cluster.LabelMultiAZ)].String() == "true"
			sc := f.add(c.Address.Name, region, multi, int(c.Attributes[cluster.Nodes].Int()), c.Attributes[cluster.Template].String(), c.Manager)
			sc.obj.createdBy = c.Manager
			sc.phase, sc.until = cluster.PhaseProvisioning, s+f.prov
			sc.sync()
			return true
		}
	}
	f, sc := w.clusterOf(p.o)
	v, ok := c.Attributes[cluster.Nodes]
	manager := c.Manager
	if !ok {
		// A restore: the user's count, and nobody's field, as a release
		// leaves it.
		v, ok = c.Restored[cluster.Nodes]
		manager = ""
	}
	if sc == nil || !ok {
		return false
	}
	moved := p.o.managers[cluster.Nodes] != manager
	p.o.managers[cluster.Nodes] = manager
	old, want := sc.desired(), int(v.Int())
	if old == want {
		return moved
	}
	p.o.attrs[cluster.Nodes] = v
	p.o.generation++
	if want > old {
		for i := old; i < want; i++ {
			sc.joining = append(sc.joining, s+f.join)
		}
	} else {
		drop := old - want
		// Nodes still joining go first; then ready ones drain.
		k := min(drop, len(sc.joining))
		sc.joining = sc.joining[:len(sc.joining)-k]
		for i := k; i < drop && sc.ready > 0; i++ {
			sc.ready--
			sc.draining = append(sc.draining, s+f.drain)
		}
		f.evict(sc)
	}
	sc.sync()
	return true
}
