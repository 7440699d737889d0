// Package fleet decides how many nodes each cluster of a fleet runs and
// when clusters are created and deleted, from each cluster's remaining
// capacity in named dimensions (what one more instance needs, what one
// node frees). It is pure: every input, the time included, is passed in.
package fleet

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// DefaultZones is the multi-AZ multiple when a spec names none: a
// multi-AZ cluster's nodes move in threes, one per zone.
const DefaultZones = 3

// Status of a cluster, as the reference names them.
type Status string

// Statuses, each a function of what the cluster reports (StatusOf).
const (
	// Ready: every dimension has room for one more instance.
	Ready Status = "ready"
	// ScalingUp: some dimension is short, and a step still fits under
	// the restricted ceiling.
	ScalingUp Status = "compute_node_scaling_up"
	// Full: some dimension is short, and no step fits any more.
	Full Status = "full"
	// Failed, from the provider: its controllers will not fix it.
	Failed Status = "failed"
	// Provisioning, from the provider: the cluster itself is in
	// progress (being created or deleted); it takes no instance yet.
	Provisioning Status = "provisioning"
	// WaitingForReporter: what reports the cluster's capacity is not
	// ready, so its numbers are not to be trusted (the reference's
	// agent that must be ready before any evaluation).
	WaitingForReporter Status = "waiting_for_reporter"
	// Unknown: its numbers are missing; it is neither a ready sibling
	// nor full.
	Unknown Status = "unknown"
)

// Dimension is one named capacity: what one instance needs of it and
// what one node frees.
type Dimension struct {
	Name        string
	PerInstance float64
	PerNode     float64
}

// Cluster is what one cluster reports.
type Cluster struct {
	Name, Cloud, Region string
	MultiAZ             bool
	// Zones is the multiple a multi-AZ cluster's node counts move in
	// (0: DefaultZones); a single-AZ cluster moves in ones.
	Zones           int
	Nodes           int
	Floor, Ceiling  int
	WorkloadMinimum int
	// Step is the nodes one scaling action adds or removes, before the
	// multi-AZ rounding.
	Step int
	// Remaining per dimension; a dimension absent, NaN or infinite holds
	// every action on the cluster.
	Remaining map[string]float64
	// Instances on it; Known false when nobody said (it is then not
	// empty).
	Instances      float64
	InstancesKnown bool
	// EmptyLongEnough: it has had no instance for as long as the spec
	// asks before a delete (the caller keeps that time).
	EmptyLongEnough bool
	// Hold, when the caller sets it, is why nothing can be decided for
	// the cluster (a number it could not read).
	Hold string
	// InProgress: a scaling action has not finished.
	InProgress bool
	// ReporterReady: what reports its capacity is ready. Until it is,
	// the cluster waits and nothing scales it.
	ReporterReady bool
	// NodesOff: the spec turned node scaling off (enforcement.nodes:
	// off), so no step is ever taken on it.
	NodesOff bool
	// Status is the provider's word on the cluster's life: Failed or
	// Provisioning; anything else is a provisioned cluster, whose status
	// StatusOf computes from its report.
	Status Status
	// Spare is the run of evaluations, up to the last one, in which
	// every dimension spared a step's worth (the caller keeps it from the
	// last Decision.Spare); SpareFor is how long that run must have lasted
	// before a step is removed (0: at once).
	Spare    SpareRun
	SpareFor time.Duration
}

// SpareRun is an unbroken run of evaluations of a cluster at Nodes nodes
// in which every dimension spared a step's worth, since Since. The zero
// value is no run: the last evaluation did not find the spare step (or
// could not weigh it, or a step was on its way).
type SpareRun struct {
	Since time.Time
	Nodes int
}

// Held is how long the run has lasted at now, for a cluster of nodes
// nodes: 0 when it has not begun, was at another node count (a step
// since, by whomever, starts a new run) or begins after now.
func (r SpareRun) Held(now time.Time, nodes int) time.Duration {
	if r.Since.IsZero() || r.Nodes != nodes || r.Since.After(now) {
		return 0
	}
	return now.Sub(r.Since)
}

// Multiple is what a cluster's node counts move in: the zones when it
// is multi-AZ (DefaultZones when zones is not above 0), else 1. It is
// also the fewest nodes a scale-down leaves, whatever the floor and the
// workload minimum say: one per zone multi-AZ, one single-AZ. The
// reference asks for 3 of every cluster; 3 is the multi-AZ multiple,
// which a single-AZ cluster does not have, and a single-AZ floor of 1 in
// the spec would be overridden unsaid. None is never allowed: a cluster
// without a node runs neither instances nor the reporter of its capacity.
func Multiple(multiAZ bool, zones int) int {
	switch {
	case !multiAZ:
		return 1
	case zones <= 0:
		return DefaultZones
	}
	return zones
}

// Multiple of the cluster: see the function.
func (c Cluster) Multiple() int { return Multiple(c.MultiAZ, c.Zones) }

// RoundDown is n rounded down to a multiple of m (m ≥ 1; n ≥ 0).
func RoundDown(n, m int) int {
	if m <= 1 {
		return n
	}
	return n / m * m
}

// RoundUp is n rounded up to a multiple of m (m ≥ 1; n ≥ 0).
func RoundUp(n, m int) int {
	if m <= 1 || n%m == 0 {
		return n
	}
	return (n/m + 1) * m
}

// RestrictedCeiling is the ceiling rounded down to the multiple (the
// zones when multi-AZ).
func RestrictedCeiling(ceiling, multiple int) int { return RoundDown(ceiling, multiple) }

// RestrictedFloor is the floor rounded up to the multiple.
func RestrictedFloor(floor, multiple int) int { return RoundUp(floor, multiple) }

// StepSize is the step rounded up to the multiple.
func StepSize(step, multiple int) int { return RoundUp(step, multiple) }

// Action on a cluster's nodes.
type Action string

// Node actions.
const (
	None      Action = ""
	ScaleUp   Action = "scale-up"
	ScaleDown Action = "scale-down"
)

// Decision is one cluster's evaluation.
type Decision struct {
	// Status computed from the capacity reported before any action.
	Status Status
	Action Action
	// Nodes is the count after the action (the current one without).
	Nodes int
	// Ceiling, Floor and Step after the rounding.
	Ceiling, Floor, Step int
	// Hold says why nothing could be decided (missing data); Why what
	// was decided, with the numbers.
	Hold string
	Why  string
	// Spare is the run of spare evaluations to keep for the next one: the
	// cluster's, carried on (or begun now) when every dimension spares a
	// step's worth, the zero SpareRun otherwise.
	Spare SpareRun
	// SpareUntil, when not zero, is when the spare run will have lasted
	// SpareFor: a scale-down waits for it (Why says so, with the numbers).
	SpareUntil time.Time
}

// Report is a cluster's status and, with it, what the status rests on:
// the dimensions short of one instance's need and those that spare a
// step's worth (each with its numbers), or why no status could be
// computed from capacity.
type Report struct {
	Status Status
	// Hold is why the capacity could not be weighed (Unknown), or why
	// the cluster is not to be scaled (WaitingForReporter, Failed,
	// Provisioning).
	Hold  string
	Short []string
	Spare []string
	// AllSpare: every dimension spares a step's worth (and there is at
	// least one).
	AllSpare bool
}

// StatusOf is a cluster's status from what it reports, before any
// action, and nothing else: failed or provisioning as its provider says;
// then waiting while its capacity reporter is not ready; unknown when a
// number is missing; else ready when every dimension has room for one
// more instance, compute_node_scaling_up when one is short and a step
// still fits under the restricted ceiling, full when none does or node
// scaling is off. (The reference's "below the ceiling" would leave a
// cluster no step fits in scaling up for ever, and its region without a
// new cluster; so would "scaling up" with no step to come. The
// reference, with its scaling off, says ready whatever the capacity: a
// short cluster would then count as a ready sibling, letting an empty
// one be deleted, and never as full, so its region would never get a
// new cluster.)
func StatusOf(c Cluster, dims []Dimension) Report {
	switch {
	case c.Status == Failed || c.Status == Provisioning:
		return Report{Status: c.Status, Hold: "cluster is " + string(c.Status)}
	case !c.ReporterReady:
		return Report{Status: WaitingForReporter, Hold: "its capacity reporter is not ready: nothing is weighed until it is"}
	case c.Hold != "":
		return Report{Status: Unknown, Hold: c.Hold}
	}
	m := c.Multiple()
	step, ceiling := StepSize(c.Step, m), RestrictedCeiling(c.Ceiling, m)
	r := Report{AllSpare: len(dims) > 0}
	for _, dim := range dims {
		v, ok := c.Remaining[dim.Name]
		if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
			return Report{Status: Unknown, Hold: fmt.Sprintf("remaining %s is missing: every action on this cluster holds", dim.Name)}
		}
		if v < dim.PerInstance {
			r.Short = append(r.Short, fmt.Sprintf("%s %s < %s an instance needs", dim.Name, num(v), num(dim.PerInstance)))
		}
		if worth := dim.PerNode * float64(step); v > worth {
			r.Spare = append(r.Spare, fmt.Sprintf("%s %s > %s (%d nodes × %s)", dim.Name, num(v), num(worth), step, num(dim.PerNode)))
		} else {
			r.AllSpare = false
		}
	}
	switch {
	case len(r.Short) == 0:
		r.Status = Ready
	case c.Nodes+step <= ceiling && !c.NodesOff:
		r.Status = ScalingUp
	default:
		r.Status = Full
	}
	return r
}

// DecideCluster evaluates one cluster at now: its status (StatusOf),
// then at most one scaling step. Scale up when ANY dimension's remaining
// is below one instance's need and a step stays within the restricted
// ceiling; scale down when ALL remaining exceed one step's worth
// (perNode × step), have done so in every evaluation for SpareFor (the
// run c.Spare, at the same node count), the count is above the workload
// minimum, and the result stays at or above the workload minimum and the
// restricted floor (equal is allowed, as the reference's code does:
// "above" would keep a step of nodes too many) and at or above Multiple.
// Nothing while a step is in progress or the capacity reporter is not
// ready, nor on a cluster failed, provisioning or unknown, nor with node
// scaling off.
//
// The spare run (Decision.Spare) goes on only while every dimension
// spares a step's worth on a settled cluster whose capacity could be
// weighed: an evaluation that finds a dimension short or without a step
// to spare, a step in progress (a scale-up's, a scale-down's, anyone's),
// missing numbers, a reporter not ready or node scaling off ends it, and
// a new one begins at the next spare evaluation. A scale-down decided
// keeps it: held by the gate, it is asked again the next evaluation;
// applied, the count it leaves starts a run of its own.
func DecideCluster(now time.Time, c Cluster, dims []Dimension) Decision {
	m := c.Multiple()
	d := Decision{Nodes: c.Nodes, Ceiling: RestrictedCeiling(c.Ceiling, m), Floor: RestrictedFloor(c.Floor, m), Step: StepSize(c.Step, m)}
	r := StatusOf(c, dims)
	d.Status = r.Status
	switch r.Status {
	case Failed, Provisioning, WaitingForReporter:
		d.Why = r.Hold
		return d
	case Unknown:
		d.Hold = r.Hold
		return d
	}
	bounds := fmt.Sprintf("nodes %d, ceiling %d → %d, floor %d → %d, step %d → %d", c.Nodes, c.Ceiling, d.Ceiling, c.Floor, d.Floor, c.Step, d.Step)
	short, spare := strings.Join(r.Short, ", "), strings.Join(r.Spare, ", ")
	switch {
	case c.NodesOff && len(r.Short) > 0:
		d.Why = fmt.Sprintf("full: %s, and node scaling is off (%s)", short, bounds)
	case c.NodesOff:
		d.Why = "node scaling is off: " + bounds
	case c.InProgress:
		d.Why = "a scaling action is in progress: " + bounds
	case len(r.Short) > 0:
		switch {
		case c.Nodes >= d.Ceiling:
			d.Why = fmt.Sprintf("full: %s; at the restricted ceiling (%s)", short, bounds)
		case c.Nodes+d.Step > d.Ceiling:
			d.Why = fmt.Sprintf("full: %s, and %d + step %d > restricted ceiling %d (%s)", short, c.Nodes, d.Step, d.Ceiling, bounds)
		default:
			d.Action, d.Nodes = ScaleUp, c.Nodes+d.Step
			d.Why = fmt.Sprintf("scale up %d → %d: %s (%s)", c.Nodes, d.Nodes, short, bounds)
		}
	case r.AllSpare:
		d.Spare = SpareRun{Since: now, Nodes: c.Nodes}
		held := c.Spare.Held(now, c.Nodes)
		if held > 0 {
			d.Spare.Since = c.Spare.Since
		}
		lasted := fmt.Sprintf("spare %d nodes' worth for %s of %s", d.Step, Dur(held), Dur(c.SpareFor))
		after := c.Nodes - d.Step
		var why string
		switch {
		case c.Nodes <= c.WorkloadMinimum:
			why = fmt.Sprintf("%d nodes is not above the workload minimum %d", c.Nodes, c.WorkloadMinimum)
		case after < c.WorkloadMinimum:
			why = fmt.Sprintf("%d after the step is below the workload minimum %d", after, c.WorkloadMinimum)
		case after < d.Floor:
			why = fmt.Sprintf("%d after the step is below the restricted floor %d", after, d.Floor)
		case after < m && c.MultiAZ:
			why = fmt.Sprintf("%d after the step is below the multi-AZ %d", after, m)
		case after < m:
			why = fmt.Sprintf("%d after the step is below 1 node, single-AZ", after)
		}
		if why != "" {
			d.Why = fmt.Sprintf("spare capacity (%s), but %s (%s)", spare, why, bounds)
			break
		}
		if held < c.SpareFor {
			d.SpareUntil = d.Spare.Since.Add(c.SpareFor)
			d.Why = fmt.Sprintf("%s: held, scale down %d → %d at %s if it lasts: %s (%s)", lasted, c.Nodes, after, d.SpareUntil.UTC().Format(time.RFC3339), spare, bounds)
			break
		}
		d.Action, d.Nodes = ScaleDown, after
		if c.SpareFor > 0 {
			spare = lasted + ": " + spare
		}
		d.Why = fmt.Sprintf("scale down %d → %d: %s (%s)", c.Nodes, after, spare, bounds)
	default:
		d.Why = "capacity available, none to spare: " + bounds
	}
	return d
}

// Place is where clusters live: a cloud and a region.
type Place struct{ Cloud, Region string }

func (p Place) String() string { return p.Cloud + "/" + p.Region }

// Member is a cluster as the cluster-level planning sees it: its status
// after DecideCluster, and whether it is empty.
type Member struct {
	Name   string
	Place  Place
	Status Status
	// Empty: its instance count is known and 0 (long enough), and no
	// scaling action is in progress.
	Empty bool
	// Why is its decision's reason, quoted by the plan's creates.
	Why string
}

// ClusterPlan is what to create and delete, and why.
type ClusterPlan struct {
	Create []Place
	Delete []string
	Why    map[string]string // by place (creates) or cluster name (deletes)
}

// PlanClusters decides cluster creation and deletion: one new cluster in
// a place of places when every cluster there is full or failed (none
// being provisioned), and the deletion of an empty ready cluster only
// when a ready sibling in its place remains — never the last one.
func PlanClusters(places []Place, members []Member) ClusterPlan {
	p := ClusterPlan{Why: map[string]string{}}
	byPlace := map[Place][]Member{}
	for _, m := range members {
		byPlace[m.Place] = append(byPlace[m.Place], m)
	}
	for _, pl := range places {
		ms := byPlace[pl]
		blocked := ""
		for _, m := range ms {
			if m.Status != Full && m.Status != Failed {
				blocked = m.Name + " is " + string(m.Status)
				break
			}
		}
		if blocked != "" {
			continue
		}
		p.Create = append(p.Create, pl)
		if len(ms) == 0 {
			p.Why[pl.String()] = "no cluster in " + pl.String()
		} else {
			whys := make([]string, len(ms))
			for i, m := range ms {
				whys[i] = m.Name + ": " + orStatus(m.Why, m.Status)
			}
			p.Why[pl.String()] = fmt.Sprintf("all %d clusters in %s are full or failed (%s)", len(ms), pl, strings.Join(whys, "; "))
		}
	}
	pls := make([]Place, 0, len(byPlace))
	for pl := range byPlace {
		pls = append(pls, pl)
	}
	sort.Slice(pls, func(i, j int) bool { return pls[i].String() < pls[j].String() })
	for _, pl := range pls {
		ms := append([]Member(nil), byPlace[pl]...)
		sort.Slice(ms, func(i, j int) bool { return ms[i].Name < ms[j].Name })
		ready := 0
		for _, m := range ms {
			if m.Status == Ready {
				ready++
			}
		}
		for _, m := range ms {
			if m.Status != Ready || !m.Empty || ready < 2 {
				continue
			}
			ready--
			p.Delete = append(p.Delete, m.Name)
			p.Why[m.Name] = fmt.Sprintf("empty (0 instances) and ready, with %d ready sibling(s) left in %s", ready, pl)
		}
	}
	return p
}

// Result is one evaluation of a whole fleet.
type Result struct {
	Clusters map[string]Decision
	Plan     ClusterPlan
}

// Decide evaluates every cluster, then plans creates and deletes from the
// statuses just computed. A cluster to delete takes no node action in
// the same evaluation: one action per cluster.
func Decide(now time.Time, places []Place, clusters []Cluster, dims []Dimension) Result {
	r := Result{Clusters: make(map[string]Decision, len(clusters))}
	members := make([]Member, 0, len(clusters))
	for _, c := range clusters {
		d := DecideCluster(now, c, dims)
		r.Clusters[c.Name] = d
		members = append(members, Member{Name: c.Name, Place: Place{c.Cloud, c.Region}, Status: d.Status, Why: d.Why,
			Empty: c.InstancesKnown && c.Instances == 0 && c.EmptyLongEnough && !c.InProgress && d.Hold == ""})
	}
	r.Plan = PlanClusters(places, members)
	for _, name := range r.Plan.Delete {
		d := r.Clusters[name]
		if d.Action == ScaleUp {
			d.Nodes -= d.Step
		} else if d.Action == ScaleDown {
			d.Nodes += d.Step
		}
		d.Action = None
		d.Why = "to be deleted: " + r.Plan.Why[name]
		r.Clusters[name] = d
	}
	return r
}

func orStatus(why string, s Status) string {
	if why == "" {
		return string(s)
	}
	return why
}

// Dur is a duration as a spec writes it: 5m, 2m10s, 1h, 0s.
func Dur(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

func num(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return fmt.Sprintf("%d", int64(f))
	}
	return fmt.Sprintf("%.3g", f)
}
