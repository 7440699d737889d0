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

// AZs is the multi-AZ multiple: a multi-AZ cluster's nodes move in threes.
const AZs = 3

// Status of a cluster, as the reference names them.
type Status string

// Statuses. Ready, ScalingUp and Full are computed from capacity; Failed
// and Provisioning come from the provider.
const (
	Ready        Status = "ready"
	ScalingUp    Status = "compute_node_scaling_up"
	Full         Status = "full"
	Failed       Status = "failed"
	Provisioning Status = "provisioning"
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
	Nodes               int
	Floor, Ceiling      int
	WorkloadMinimum     int
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
	// Status is the provider's (Failed, Provisioning) or the last one
	// computed.
	Status Status
}

// RestrictedCeiling is the ceiling rounded down to the multi-AZ multiple
// when the cluster is multi-AZ.
func RestrictedCeiling(ceiling int, multiAZ bool) int {
	if !multiAZ {
		return ceiling
	}
	return ceiling / AZs * AZs
}

// RestrictedFloor is the floor rounded up to the multi-AZ multiple when
// the cluster is multi-AZ.
func RestrictedFloor(floor int, multiAZ bool) int {
	if !multiAZ || floor%AZs == 0 {
		return floor
	}
	return (floor/AZs + 1) * AZs
}

// StepSize is the step rounded up to the multi-AZ multiple when the
// cluster is multi-AZ.
func StepSize(step int, multiAZ bool) int {
	return RestrictedFloor(step, multiAZ)
}

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
}

// DecideCluster evaluates one cluster at now: its status from the
// capacity it reports, then at most one scaling step. Scale up when ANY
// dimension's remaining is below one instance's need, the count is below
// the restricted ceiling and a step stays within it; scale down when ALL
// remaining exceed one step's worth (perNode × step), the count is above
// the workload minimum, and the result stays above the workload minimum,
// above the restricted floor, at least 3 when multi-AZ, and above 0. No
// action while one is in progress, nor on a failed or provisioning
// cluster.
func DecideCluster(now time.Time, c Cluster, dims []Dimension) Decision {
	_ = now // the rules hold at an instant; now stays in the signature all deciders share
	d := Decision{Status: c.Status, Nodes: c.Nodes,
		Ceiling: RestrictedCeiling(c.Ceiling, c.MultiAZ), Floor: RestrictedFloor(c.Floor, c.MultiAZ), Step: StepSize(c.Step, c.MultiAZ)}
	if c.Status == Failed || c.Status == Provisioning {
		d.Why = "cluster is " + string(c.Status)
		return d
	}
	if c.Hold != "" {
		d.Status, d.Hold = Unknown, c.Hold
		return d
	}
	var short, spare []string
	allSpare := true
	for _, dim := range dims {
		r, ok := c.Remaining[dim.Name]
		if !ok || math.IsNaN(r) || math.IsInf(r, 0) {
			d.Status = Unknown
			d.Hold = fmt.Sprintf("remaining %s is missing: every action on this cluster holds", dim.Name)
			return d
		}
		if r < dim.PerInstance {
			short = append(short, fmt.Sprintf("%s %s < %s an instance needs", dim.Name, num(r), num(dim.PerInstance)))
		}
		if worth := dim.PerNode * float64(d.Step); r > worth {
			spare = append(spare, fmt.Sprintf("%s %s > %s (%d nodes × %s)", dim.Name, num(r), num(worth), d.Step, num(dim.PerNode)))
		} else {
			allSpare = false
		}
	}
	// Status first, from what was reported. A cluster no step fits in
	// any more is full (the reference's "below the ceiling" would leave
	// it scaling up for ever, and its region without a new cluster).
	switch {
	case len(short) == 0:
		d.Status = Ready
	case c.Nodes+d.Step <= d.Ceiling:
		d.Status = ScalingUp
	default:
		d.Status = Full
	}
	bounds := fmt.Sprintf("nodes %d, ceiling %d → %d, floor %d → %d, step %d → %d", c.Nodes, c.Ceiling, d.Ceiling, c.Floor, d.Floor, c.Step, d.Step)
	switch {
	case c.InProgress:
		d.Why = "a scaling action is in progress: " + bounds
	case len(short) > 0:
		switch {
		case c.Nodes >= d.Ceiling:
			d.Why = fmt.Sprintf("full: %s; at the restricted ceiling (%s)", strings.Join(short, ", "), bounds)
		case c.Nodes+d.Step > d.Ceiling:
			d.Why = fmt.Sprintf("full: %s, and %d + step %d > restricted ceiling %d (%s)", strings.Join(short, ", "), c.Nodes, d.Step, d.Ceiling, bounds)
		default:
			d.Action, d.Nodes = ScaleUp, c.Nodes+d.Step
			d.Why = fmt.Sprintf("scale up %d → %d: %s (%s)", c.Nodes, d.Nodes, strings.Join(short, ", "), bounds)
		}
	case allSpare && len(dims) > 0:
		after := c.Nodes - d.Step
		var why string
		switch {
		case c.Nodes <= c.WorkloadMinimum:
			why = fmt.Sprintf("%d nodes is not above the workload minimum %d", c.Nodes, c.WorkloadMinimum)
		case after <= c.WorkloadMinimum:
			why = fmt.Sprintf("%d after the step is not above the workload minimum %d", after, c.WorkloadMinimum)
		case after <= d.Floor:
			why = fmt.Sprintf("%d after the step is not above the restricted floor %d", after, d.Floor)
		case c.MultiAZ && after < AZs:
			why = fmt.Sprintf("%d after the step is below the multi-AZ %d", after, AZs)
		case after <= 0:
			why = fmt.Sprintf("%d after the step is not above 0", after)
		}
		if why != "" {
			d.Why = fmt.Sprintf("spare capacity (%s), but %s (%s)", strings.Join(spare, ", "), why, bounds)
			break
		}
		d.Action, d.Nodes = ScaleDown, after
		d.Why = fmt.Sprintf("scale down %d → %d: %s (%s)", c.Nodes, after, strings.Join(spare, ", "), bounds)
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

func num(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return fmt.Sprintf("%d", int64(f))
	}
	return fmt.Sprintf("%.3g", f)
}
