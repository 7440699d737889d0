// Package fleetkind plugs the Fleet kind into the loop: it lists the
// fleet's clusters (by their fleet label), reads each dimension's
// remaining capacity per cluster from grouped queries, runs the pure
// decisions of engine/decide/fleet, and says what to write: a cluster's
// node count, a new cluster from the template, an empty cluster deleted.
package fleetkind

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/decide/fleet"
	"github.com/setpoint-dev/setpoint/engine/diag"
	"github.com/setpoint-dev/setpoint/engine/gate"
	"github.com/setpoint-dev/setpoint/engine/intent"
	"github.com/setpoint-dev/setpoint/engine/plan"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/cluster"
)

func init() { engine.Register("Fleet", decider{}) }

// A Fleet's enforcement dimensions.
const (
	Nodes    intent.Dimension = "nodes"
	Clusters intent.Dimension = "clusters"
)

// ClusterLabel is the label every per-cluster query groups by.
const ClusterLabel = "cluster"

type decider struct{}

func provider(f *spec.Fleet, def string) string {
	return spec.ProviderOr(f.Spec.Target.Provider, def)
}

// Reads: nothing known in advance; the clusters are listed.
func (decider) Reads(spec.Document, string) []addrs.Object { return nil }

// Lists the fleet's clusters by their fleet label.
func (decider) Lists(doc spec.Document, def string) []providers.ListRequest {
	f := doc.(*spec.Fleet)
	return []providers.ListRequest{listOf(f, def)}
}

func listOf(f *spec.Fleet, def string) providers.ListRequest {
	return providers.ListRequest{Provider: provider(f, def), Kind: cluster.Kind, Namespace: f.Metadata.Namespace,
		Selector: map[string]string{cluster.LabelFleet: f.Metadata.Name}}
}

// perCluster reads a grouped query as values by cluster; an error or a
// query without the cluster label is said at its field.
func perCluster(t *engine.Tick, f *spec.Fleet, field, expr string) (map[string]float64, *plan.Note) {
	m, r, err := t.OwnBy(expr, ClusterLabel)
	if err != nil {
		return nil, &plan.Note{Severity: diag.Warning, Spec: f.ID(), Pos: f.Src.PosOf(field), Message: fmt.Sprintf("%s: %v: every cluster's actions that need it hold", field, err)}
	}
	if len(r.Samples) > 0 {
		if _, ok := m[""]; ok {
			return nil, &plan.Note{Severity: diag.Error, Spec: f.ID(), Pos: f.Src.PosOf(field), Message: field + ": the query's series carry no cluster label: group it by (cluster)"}
		}
		if len(m) < len(r.Samples) {
			// Two series for one cluster: which one counts is not known.
			return nil, &plan.Note{Severity: diag.Error, Spec: f.ID(), Pos: f.Src.PosOf(field), Message: fmt.Sprintf("%s: %d series for %d clusters: aggregate by (cluster)", field, len(r.Samples), len(m))}
		}
	}
	return m, nil
}

// Decide lists, reads and decides the whole fleet.
func (decider) Decide(t *engine.Tick, doc spec.Document, _ []addrs.Object, obs engine.Observation, st *state.State) ([]intent.Intent, []plan.Note, []plan.Note) {
	f := doc.(*spec.Fleet)
	id, sp := f.ID(), f.Spec
	q := listOf(f, t.DefaultProvider)
	objs, why, failed := obs.List(q)
	if failed {
		return nil, nil, []plan.Note{{Severity: diag.Error, Spec: id, Pos: f.Src.PosOf("spec.target"), Message: fmt.Sprintf("listing the clusters of fleet %s: %s", f.Metadata.Name, why)}}
	}
	var notes, errs []plan.Note
	say := func(n *plan.Note) {
		if n == nil {
			return
		}
		if n.Severity == diag.Error {
			errs = append(errs, *n)
		} else {
			notes = append(notes, *n)
		}
	}
	dims := make([]fleet.Dimension, len(sp.Capacity))
	remaining := map[string]map[string]float64{}
	for i, d := range sp.Capacity {
		dims[i] = fleet.Dimension{Name: d.Name, PerInstance: d.PerInstance, PerNode: d.PerNode}
		m, n := perCluster(t, f, "spec.remaining."+d.Name, sp.Remaining[d.Name])
		say(n)
		remaining[d.Name] = m
	}
	// An override or a reporter that cannot be read holds every cluster:
	// its bound, or whether its numbers stand, is not known.
	overrideHold := ""
	grouped := func(field, expr string) map[string]float64 {
		if expr == "" {
			return nil
		}
		m, n := perCluster(t, f, field, expr)
		say(n)
		if n != nil && field != "spec.instances" && overrideHold == "" {
			overrideHold = field + " could not be read"
		}
		return m
	}
	instances := grouped("spec.instances", sp.Instances)
	floors := grouped("spec.overrides.floor", sp.Overrides.Floor)
	ceilings := grouped("spec.overrides.ceiling", sp.Overrides.Ceiling)
	minimums := grouped("spec.overrides.workloadMinimum", sp.Overrides.WorkloadMinimum)
	reporters := grouped("spec.reporter", sp.Reporter)
	override := func(m map[string]float64, name string, def int) int {
		if v, ok := m[name]; ok && !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 && v <= 10000 {
			return int(v)
		}
		return def
	}

	nodesOff, clustersOff := sp.Enforcement.Nodes == spec.ModeOff, sp.Enforcement.Clusters == spec.ModeOff
	cs := make([]fleet.Cluster, 0, len(objs))
	byName := map[string]providers.Object{}
	for _, o := range objs {
		name := o.Address.Name
		byName[name] = o
		c := fleet.Cluster{Name: name, Cloud: orDefault(o.Labels[cluster.LabelCloud], sp.Cloud), Region: o.Labels[cluster.LabelRegion],
			MultiAZ: sp.MultiAZ, Zones: sp.Zones, Nodes: count(o, cluster.Nodes), Step: sp.Nodes.Step,
			Floor:           override(floors, name, sp.Nodes.Floor),
			Ceiling:         override(ceilings, name, sp.Nodes.Ceiling),
			WorkloadMinimum: override(minimums, name, sp.Nodes.WorkloadMinimum),
			Remaining:       map[string]float64{}, Status: fleet.Ready, NodesOff: nodesOff}
		if v, ok := o.Labels[cluster.LabelMultiAZ]; ok {
			c.MultiAZ = v == "true"
		}
		for _, d := range sp.Capacity {
			if v, ok := remaining[d.Name][name]; ok {
				c.Remaining[d.Name] = v
			}
		}
		if v, ok := instances[name]; ok && !math.IsNaN(v) {
			c.Instances, c.InstancesKnown = v, true
		}
		c.Hold = overrideHold
		c.ReporterReady = reporterReady(sp.Reporter, reporters, name, overrideHold != "")
		if v, ok := o.Attributes[cluster.Nodes]; !ok || v.Type() != values.Count {
			c.Hold = "its node count (" + cluster.Nodes.String() + ") is not reported"
		}
		phase := o.Attributes[cluster.Phase].String()
		switch phase {
		case cluster.PhaseFailed:
			c.Status = fleet.Failed
		case cluster.PhaseProvisioning, cluster.PhaseDeleting:
			c.Status = fleet.Provisioning
		}
		// A scaling action is in progress until what exists is what was
		// asked for.
		c.InProgress = phase == cluster.PhaseScalingUp || phase == cluster.PhaseScalingDown ||
			count(o, cluster.StatusNodes) != c.Nodes || count(o, cluster.ReadyNodes) != c.Nodes
		// Empty time counts only for a cluster that could take instances.
		since := emptySince(st, addrs.Attr{Object: o.Address, Path: cluster.Nodes}, t.Now,
			c.Status == fleet.Ready && c.InstancesKnown && c.Instances == 0)
		c.EmptyLongEnough = !since.IsZero() && t.Now.Sub(since) >= sp.Clusters.EmptyFor.D()
		c.Spare, c.SpareFor = spareRun(st, addrs.Attr{Object: o.Address, Path: cluster.Nodes}), sp.Nodes.SpareFor.D()
		cs = append(cs, c)
	}
	places := make([]fleet.Place, len(sp.Regions))
	for i, r := range sp.Regions {
		places[i] = fleet.Place{Cloud: sp.Cloud, Region: r}
	}
	res := fleet.Decide(t.Now, places, cs, dims)

	var its []intent.Intent
	prov := q.Provider
	if nodesOff {
		// Off hands every node count this fleet wrote back as the user
		// had it, as the other kinds do; nothing else is asked of nodes.
		its = append(its, engine.Restores(id, f.Src.PosOf("spec.enforcement"), objs, st, func(p addrs.Path) (intent.Dimension, bool) {
			return Nodes, p == cluster.Nodes
		})...)
	}
	var statuses []string
	for _, c := range cs {
		d := res.Clusters[c.Name]
		statuses = append(statuses, c.Name+" "+string(d.Status))
		a := byName[c.Name].Address
		keepSpare(st, addrs.Attr{Object: a, Path: cluster.Nodes}, d.Spare)
		if !d.SpareUntil.IsZero() {
			// The scale-down waits for its spare step to last: said, and
			// planned again when it will have.
			t.RequeueAt(id, d.SpareUntil)
			notes = append(notes, plan.Note{Severity: diag.Info, Spec: id, Pos: f.Src.PosOf("spec.nodes.spareFor"), Message: c.Name + ": " + d.Why})
		}
		switch {
		case d.Hold != "":
			notes = append(notes, plan.Note{Severity: diag.Warning, Spec: id, Pos: f.Src.PosOf("spec.remaining"), Message: c.Name + ": " + d.Hold})
		case d.Action != fleet.None:
			its = append(its, intent.Intent{Attr: addrs.Attr{Object: a, Path: cluster.Nodes}, Kind: intent.Exact, Dimension: Nodes,
				Value: values.CountOf(int64(d.Nodes)), Recommended: values.CountOf(int64(d.Nodes)), Rationale: d.Why, Source: id, SourcePos: f.Src.PosOf("spec.nodes")})
		}
	}
	if !clustersOff {
		for _, name := range res.Plan.Delete {
			a := byName[name].Address
			its = append(its, intent.Intent{Attr: addrs.Attr{Object: a, Path: cluster.Nodes}, Kind: intent.Exact, Dimension: Clusters, Delete: true,
				Rationale: res.Plan.Why[name], Source: id, SourcePos: f.Src.PosOf("spec.clusters.delete")})
		}
	}
	if sp.Clusters.CreateWhenAllFull && !clustersOff && len(res.Plan.Create) > 0 {
		// Read from the whole state: only when a create is wanted.
		made := createdWithin(st, f, prov, t.Now)
		limit := maxCreates(sp)
		for _, pl := range res.Plan.Create {
			if at := made[pl.Region]; len(at) >= limit {
				next := at[0].Add(time.Hour)
				t.RequeueAt(id, next)
				notes = append(notes, plan.Note{Severity: diag.Warning, Spec: id, Pos: f.Src.PosOf("spec.clusters.maxCreatesPerHour"),
					Message: fmt.Sprintf("%s: no new cluster until %s: %d created in the last hour, at most %d (%s)", pl, next.UTC().Format(time.RFC3339), len(at), limit, res.Plan.Why[pl.String()])})
				continue
			}
			name := newName(f.Metadata.Name, pl.Region, byName)
			a := addrs.Object{Provider: prov, Kind: cluster.Kind, Namespace: f.Metadata.Namespace, Name: name}
			n := initialNodes(sp)
			multi := "false"
			if sp.MultiAZ {
				multi = "true"
			}
			its = append(its, intent.Intent{Attr: addrs.Attr{Object: a, Path: cluster.Nodes}, Kind: intent.Exact, Dimension: Clusters,
				Value: values.CountOf(int64(n)), Recommended: values.CountOf(int64(n)), Source: id, SourcePos: f.Src.PosOf("spec.clusterTemplate"),
				Rationale: fmt.Sprintf("%s: a new cluster from template %s with %d nodes (the restricted floor, at least one step, at most the restricted ceiling)", res.Plan.Why[pl.String()], sp.ClusterTemplate, n),
				Create: &intent.Create{Attributes: map[addrs.Path]values.Value{
					cluster.Template:                        values.StringOf(sp.ClusterTemplate),
					cluster.LabelPath(cluster.LabelFleet):   values.StringOf(f.Metadata.Name),
					cluster.LabelPath(cluster.LabelCloud):   values.StringOf(pl.Cloud),
					cluster.LabelPath(cluster.LabelRegion):  values.StringOf(pl.Region),
					cluster.LabelPath(cluster.LabelMultiAZ): values.StringOf(multi),
				}}})
		}
	}
	sort.Strings(statuses)
	notes = append(notes, plan.Note{Severity: diag.Info, Spec: id, Pos: f.Src.Pos, Message: fmt.Sprintf("%d clusters: %s", len(cs), strings.Join(statuses, ", "))})
	return its, notes, errs
}

// StatusesNoted reads the note a Fleet's plan says its clusters'
// statuses in ("2 clusters: east-a ready, east-b full"), by cluster name;
// false for any other note. A sim run counts the time each cluster was
// short from it.
func StatusesNoted(n plan.Note) (map[string]fleet.Status, bool) {
	count, list, ok := strings.Cut(n.Message, " clusters: ")
	if !ok || n.Severity != diag.Info || !strings.HasPrefix(n.Spec, "Fleet/") || strings.Trim(count, "0123456789") != "" {
		return nil, false
	}
	out := map[string]fleet.Status{}
	if list == "" {
		return out, true
	}
	for _, s := range strings.Split(list, ", ") {
		name, status, ok := strings.Cut(s, " ")
		if !ok {
			return nil, false
		}
		out[name] = fleet.Status(status)
	}
	return out, true
}

// Short says whether a status is a cluster short of one instance's need
// in some dimension: scaling up, or full.
func Short(s fleet.Status) bool { return s == fleet.ScalingUp || s == fleet.Full }

// emptySinceKey keeps, in the state entry of a cluster's node count, when
// it was first seen empty: a delete waits until it has been empty for
// clusters.emptyFor.
const emptySinceKey = "fleet.emptySince"

// emptySince records or clears when the cluster became empty and returns
// it (zero when it is not empty).
func emptySince(st *state.State, a addrs.Attr, now time.Time, empty bool) time.Time {
	if !empty {
		engine.ForgetTime(st, a, emptySinceKey)
		return time.Time{}
	}
	return engine.FirstNoted(st, a, emptySinceKey, now)
}

// spareKey keeps, in the state entry of a cluster's node count, the run
// of evaluations in which every dimension spared a step's worth (since
// when, at which count): a scale-down waits until it has lasted
// nodes.spareFor.
const spareKey = "fleet.spare"

// spareRun is the run kept for the cluster (none when none is, or it
// cannot be read).
func spareRun(st *state.State, a addrs.Attr) fleet.SpareRun {
	var r spareJSON
	if e, ok := st.Lookup(a); ok {
		if b, ok := e.Policy[spareKey]; ok && json.Unmarshal(b, &r) != nil {
			return fleet.SpareRun{}
		}
	}
	return fleet.SpareRun{Since: r.Since, Nodes: r.Nodes}
}

// spareJSON is a spare run as the state keeps it.
type spareJSON struct {
	Since time.Time `json:"since"`
	Nodes int       `json:"nodes"`
}

// keepSpare keeps the decision's run for the next evaluation, or forgets
// the one kept (an entry left with nothing in it goes).
func keepSpare(st *state.State, a addrs.Attr, r fleet.SpareRun) {
	if r.Since.IsZero() {
		if e, ok := st.Lookup(a); ok && e.Policy[spareKey] != nil {
			delete(e.Policy, spareKey)
			if e.IsEmpty() {
				st.Delete(a)
			}
		}
		return
	}
	if old := spareRun(st, a); old.Since.Equal(r.Since) && old.Nodes == r.Nodes {
		return
	}
	e := st.Entry(a)
	if e.Policy == nil {
		e.Policy = map[string]json.RawMessage{}
	}
	b, _ := json.Marshal(spareJSON{Since: r.Since.UTC(), Nodes: r.Nodes})
	e.Policy[spareKey] = b
}

// initialNodes is a new cluster's node count: the restricted floor, at
// least one rounded step, and never above the restricted ceiling: a
// cluster made above it would count as full as soon as it ran short, and
// a region of full clusters asks for yet another.
func initialNodes(sp spec.FleetSpec) int {
	m := fleet.Multiple(sp.MultiAZ, sp.Zones)
	n := max(fleet.RestrictedFloor(sp.Nodes.Floor, m), fleet.StepSize(sp.Nodes.Step, m))
	return min(n, fleet.RestrictedCeiling(sp.Nodes.Ceiling, m))
}

// reporterReady says whether a cluster's capacity reporter is ready: with
// no reporter query, always; with one, when the cluster's value is at
// least 1 (no series, 0 or NaN: not ready). A query that failed says
// nothing: the cluster is held as unknown instead (failed), not waiting.
func reporterReady(expr string, byCluster map[string]float64, name string, failed bool) bool {
	if expr == "" || failed {
		return true
	}
	v, ok := byCluster[name]
	return ok && v >= 1
}

// maxCreates is the spec's cap on new clusters per region per hour; one
// when the spec was built without the schema's default.
func maxCreates(sp spec.FleetSpec) int {
	if sp.Clusters.MaxCreatesPerHour < 1 {
		return 1
	}
	return sp.Clusters.MaxCreatesPerHour
}

// createdWithin lists, by region, when this fleet created each cluster it
// created in the hour up to now, oldest first. The state is the record: a
// create that was applied left its template in the new cluster's entry,
// with the time and the spec, whether or not the cluster is listed since
// (a create whose cluster never shows up counts too).
func createdWithin(st *state.State, f *spec.Fleet, prov string, now time.Time) map[string][]time.Time {
	out := map[string][]time.Time{}
	// Unsorted (the times are sorted below): a sorted walk of the whole
	// state costs every tick a create is wanted.
	st.Each(func(o addrs.Object, _ *state.Object) {
		if o.Provider != prov || o.Kind != cluster.Kind || o.Namespace != f.Metadata.Namespace {
			return
		}
		e, ok := st.Lookup(addrs.Attr{Object: o, Path: cluster.Template})
		if !ok || e.Applied == nil || !slices.Contains(e.Applied.By, f.ID()) {
			return
		}
		at := e.Applied.At
		if !at.After(now.Add(-time.Hour)) || at.After(now) {
			return
		}
		region := ""
		if r, ok := st.Lookup(addrs.Attr{Object: o, Path: cluster.LabelPath(cluster.LabelRegion)}); ok && r.Applied != nil {
			region = r.Applied.Value.String()
		}
		out[region] = append(out[region], at)
	})
	for _, ts := range out {
		slices.SortFunc(ts, time.Time.Compare)
	}
	return out
}

// newName is the first FLEET-REGION-N not taken.
func newName(fleetName, region string, taken map[string]providers.Object) string {
	for i := 1; ; i++ {
		n := fmt.Sprintf("%s-%s-%d", fleetName, region, i)
		if _, ok := taken[n]; !ok {
			return n
		}
	}
}

func count(o providers.Object, p addrs.Path) int {
	if v, ok := o.Attributes[p]; ok && v.Type() == values.Count {
		return int(v.Int())
	}
	return 0
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// Rules: each dimension's mode, pause, and deletes held unless enabled.
// Nodes turned off have only restores: they go through at once.
func (decider) Rules(doc spec.Document, _ []addrs.Object, d intent.Dimension, _ engine.Observation) gate.Rules {
	f := doc.(*spec.Fleet)
	sp := f.Spec
	r := gate.Rules{Mode: sp.Enforcement.Nodes}
	if d == Nodes && sp.Enforcement.Nodes == spec.ModeOff {
		r.Mode = spec.ModeEnforce
	}
	if d == Clusters {
		r.Mode = sp.Enforcement.Clusters
		if !sp.Clusters.Delete {
			r.NoDelete = "spec.clusters.delete is false at " + f.Src.PosOf("spec.clusters").String() + ": deleting a cluster must be asked for"
		}
	}
	if sp.Paused {
		r.Paused, r.PauseReason = true, "spec.paused at "+f.Src.PosOf("spec.paused").String()
	}
	return r
}
