package fleet

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)

// dims are the reference's two: connections and partitions.
var dims = []Dimension{{Name: "connections", PerInstance: 3000, PerNode: 1000}, {Name: "partitions", PerInstance: 1000, PerNode: 500}}

// TestRounding: restricted ceilings round down, floors and steps up, to
// the multiple: the zones when multi-AZ (3 by default, any other given),
// 1 otherwise.
func TestRounding(t *testing.T) {
	for _, c := range []struct {
		fn       func(int, int) int
		name     string
		in, mult int
		want     int
	}{
		{RestrictedCeiling, "ceiling 31, 3 zones", 31, 3, 30},
		{RestrictedCeiling, "ceiling 30, 3 zones", 30, 3, 30},
		{RestrictedCeiling, "ceiling 2, 3 zones", 2, 3, 0},
		{RestrictedCeiling, "ceiling 31, single-AZ", 31, 1, 31},
		{RestrictedCeiling, "ceiling 31, 2 zones", 31, 2, 30},
		{RestrictedCeiling, "ceiling 31, 4 zones", 31, 4, 28},
		{RestrictedCeiling, "ceiling 31, 5 zones", 31, 5, 30},
		{RestrictedCeiling, "ceiling 4, 5 zones", 4, 5, 0},
		{RestrictedFloor, "floor 4, 3 zones", 4, 3, 6},
		{RestrictedFloor, "floor 6, 3 zones", 6, 3, 6},
		{RestrictedFloor, "floor 0, 3 zones", 0, 3, 0},
		{RestrictedFloor, "floor 4, single-AZ", 4, 1, 4},
		{RestrictedFloor, "floor 5, 2 zones", 5, 2, 6},
		{RestrictedFloor, "floor 5, 4 zones", 5, 4, 8},
		{RestrictedFloor, "floor 11, 5 zones", 11, 5, 15},
		{StepSize, "step 2, 3 zones", 2, 3, 3},
		{StepSize, "step 3, 3 zones", 3, 3, 3},
		{StepSize, "step 4, 3 zones", 4, 3, 6},
		{StepSize, "step 2, single-AZ", 2, 1, 2},
		{StepSize, "step 1, 2 zones", 1, 2, 2},
		{StepSize, "step 3, 4 zones", 3, 4, 4},
		{StepSize, "step 6, 4 zones", 6, 4, 8},
		{StepSize, "step 5, 5 zones", 5, 5, 5},
	} {
		if got := c.fn(c.in, c.mult); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
	for _, c := range []struct {
		multiAZ bool
		zones   int
		want    int
	}{{false, 3, 1}, {false, 0, 1}, {true, 0, DefaultZones}, {true, 3, 3}, {true, 2, 2}, {true, 5, 5}} {
		if got := Multiple(c.multiAZ, c.zones); got != c.want {
			t.Errorf("Multiple(%v, %d) = %d, want %d", c.multiAZ, c.zones, got, c.want)
		}
	}
}

func cluster(nodes int, conn, part float64) Cluster {
	return Cluster{Name: "c1", Cloud: "aws", Region: "us-east-1", MultiAZ: true, Nodes: nodes, Floor: 3, Ceiling: 31, WorkloadMinimum: 3, Step: 2,
		Remaining: map[string]float64{"connections": conn, "partitions": part}, ReporterReady: true, Status: Ready}
}

// TestDecideCluster: multi-AZ, ceiling 31 → 30, floor 3, step 2 → 3,
// workload minimum 3; an instance needs 3000 connections and 1000
// partitions; a step frees 3 × 1000 = 3000 connections and 3 × 500 =
// 1500 partitions.
func TestDecideCluster(t *testing.T) {
	for _, c := range []struct {
		name   string
		c      Cluster
		status Status
		action Action
		nodes  int
		why    string
	}{
		{"both short: up by the rounded step", cluster(9, 2999, 999), ScalingUp, ScaleUp, 12, "scale up 9 → 12"},
		{"one short is enough to scale up", cluster(9, 2999, 5000), ScalingUp, ScaleUp, 12, "connections 2999 < 3000"},
		{"exactly one instance's need is capacity", cluster(9, 3000, 1000), Ready, None, 9, "none to spare"},
		{"a step would cross the ceiling: 28 + 3 > 30, full", func() Cluster { c := cluster(28, 0, 0); c.MultiAZ = false; c.Ceiling = 30; c.Step = 3; return c }(), Full, None, 28, "> restricted ceiling 30"},
		{"multi-AZ never below 3: 4 - 3", func() Cluster {
			c := cluster(4, 1e6, 1e6)
			c.MultiAZ, c.Floor, c.WorkloadMinimum, c.Step = true, 0, 0, 3
			return c
		}(), Ready, None, 4, "1 after the step is below the multi-AZ 3"},
		{"held by the caller: unknown", func() Cluster { c := cluster(9, 0, 0); c.Hold = "ceiling override failed"; return c }(), Unknown, None, 9, ""},
		{"at the restricted ceiling: full", cluster(30, 0, 0), Full, None, 30, "full"},
		{"over the restricted ceiling: full", cluster(31, 0, 0), Full, None, 31, "full"},
		{"27 + 3 = 30 reaches it", cluster(27, 0, 0), ScalingUp, ScaleUp, 30, "scale up 27 → 30"},
		{"all spare: down by a step", cluster(12, 3001, 1501), Ready, ScaleDown, 9, "scale down 12 → 9"},
		{"one not spare: no scale down", cluster(12, 3001, 1500), Ready, None, 12, "none to spare"},
		// 9 - 3 = 6: ending exactly at the workload minimum is allowed
		// (the reference's code; its prose's "above" kept 9).
		{"down to the workload minimum exactly", func() Cluster { c := cluster(9, 1e6, 1e6); c.WorkloadMinimum = 6; return c }(), Ready, ScaleDown, 6, "scale down 9 → 6"},
		{"below the workload minimum: 9 - 3 = 6 < 7", func() Cluster { c := cluster(9, 1e6, 1e6); c.WorkloadMinimum = 7; return c }(), Ready, None, 9, "6 after the step is below the workload minimum 7"},
		{"at the workload minimum: no scale down", func() Cluster { c := cluster(6, 1e6, 1e6); c.WorkloadMinimum = 6; return c }(), Ready, None, 6, "6 nodes is not above the workload minimum 6"},
		// floor 4 rounds up to 6; 9 - 3 = 6 ends exactly at it.
		{"down to the restricted floor exactly: floor 4 → 6", func() Cluster { c := cluster(9, 1e6, 1e6); c.Floor = 4; c.WorkloadMinimum = 0; return c }(), Ready, ScaleDown, 6, "scale down 9 → 6"},
		{"below the restricted floor: floor 7 → 9, 9 - 3 = 6", func() Cluster { c := cluster(9, 1e6, 1e6); c.Floor = 7; c.WorkloadMinimum = 0; return c }(), Ready, None, 9, "6 after the step is below the restricted floor 9"},
		{"down to 3 multi-AZ, floor and minimum below", func() Cluster { c := cluster(6, 1e6, 1e6); c.Floor = 0; c.WorkloadMinimum = 0; return c }(), Ready, ScaleDown, 3, "scale down 6 → 3"},
		{"below 3 multi-AZ", func() Cluster {
			c := cluster(3, 1e6, 1e6)
			c.MultiAZ, c.Floor, c.WorkloadMinimum, c.Step = true, 0, 0, 1
			return c
		}(), Ready, None, 3, "0 after the step is below the multi-AZ 3"},
		{"single-AZ down to 1", func() Cluster {
			c := cluster(2, 1e6, 1e6)
			c.MultiAZ, c.Floor, c.WorkloadMinimum, c.Step = false, 0, 0, 1
			return c
		}(), Ready, ScaleDown, 1, "scale down 2 → 1"},
		{"single-AZ never to 0", func() Cluster {
			c := cluster(1, 1e6, 1e6)
			c.MultiAZ, c.Floor, c.WorkloadMinimum, c.Step = false, 0, -1, 1
			return c
		}(), Ready, None, 1, "0 after the step is below 1 node, single-AZ"},
		{"in progress: status, no action", func() Cluster { c := cluster(9, 0, 0); c.InProgress = true; return c }(), ScalingUp, None, 9, "in progress"},
		{"reporter not ready: waiting, no scale up", func() Cluster { c := cluster(9, 0, 0); c.ReporterReady = false; return c }(), WaitingForReporter, None, 9, "capacity reporter is not ready"},
		{"reporter not ready: waiting, no scale down", func() Cluster { c := cluster(12, 1e6, 1e6); c.ReporterReady = false; return c }(), WaitingForReporter, None, 12, "capacity reporter is not ready"},
		// Two zones: step 2 stays 2, ceiling 31 → 30.
		{"2 zones: up by 2", func() Cluster { c := cluster(8, 0, 0); c.Zones = 2; return c }(), ScalingUp, ScaleUp, 10, "scale up 8 → 10"},
		// Four zones: step 2 → 4, ceiling 31 → 28, floor 3 → 4.
		{"4 zones: up by 4", func() Cluster { c := cluster(8, 0, 0); c.Zones = 4; return c }(), ScalingUp, ScaleUp, 12, "step 2 → 4"},
		{"4 zones: 24 + 4 = 28 reaches the ceiling", func() Cluster { c := cluster(24, 0, 0); c.Zones = 4; return c }(), ScalingUp, ScaleUp, 28, "ceiling 31 → 28"},
		{"4 zones: 26 + 4 > 28, full", func() Cluster { c := cluster(26, 0, 0); c.Zones = 4; return c }(), Full, None, 26, "26 + step 4 > restricted ceiling 28"},
		// A step frees 4 × 1000 connections and 4 × 500 partitions; 8 - 4
		// = 4 ends at the floor (3 → 4) and at the zones.
		{"4 zones: down by 4 to the floor", func() Cluster { c := cluster(8, 4001, 2001); c.Zones = 4; return c }(), Ready, ScaleDown, 4, "scale down 8 → 4"},
		{"4 zones: 4000 connections is not a step's worth", func() Cluster { c := cluster(8, 4000, 2001); c.Zones = 4; return c }(), Ready, None, 8, "none to spare"},
		// Five zones, floor and minimum 0: 5 - 5 = 0 < 5.
		{"5 zones: never below 5", func() Cluster {
			c := cluster(5, 1e6, 1e6)
			c.Zones, c.Floor, c.WorkloadMinimum = 5, 0, 0
			return c
		}(), Ready, None, 5, "0 after the step is below the multi-AZ 5"},
		{"zones do not apply single-AZ: up by 2", func() Cluster { c := cluster(8, 0, 0); c.MultiAZ, c.Zones = false, 4; return c }(), ScalingUp, ScaleUp, 10, "step 2 → 2"},
		{"failed: nothing", func() Cluster { c := cluster(9, 0, 0); c.Status = Failed; return c }(), Failed, None, 9, "failed"},
	} {
		d := DecideCluster(t0, c.c, dims)
		if d.Status != c.status || d.Action != c.action || d.Nodes != c.nodes || !strings.Contains(d.Why, c.why) {
			t.Errorf("%s: %s %q %d (%s); want %s %q %d (%q)", c.name, d.Status, d.Action, d.Nodes, d.Why, c.status, c.action, c.nodes, c.why)
		}
	}
}

// TestSingleAZFloor pins the floor setpoint had and now states (it was
// never the reference code's 3 for every cluster): a scale-down never
// leaves fewer than Multiple, one node per zone multi-AZ, one node
// single-AZ, and no fewer than the floor and the workload minimum say. An instance needs 3000 connections and 1000 partitions, a
// node frees 1000 and 500: 1e6 of each spares any step.
func TestSingleAZFloor(t *testing.T) {
	for _, c := range []struct {
		multiAZ bool
		zones   int
		want    int
	}{{false, 0, 1}, {false, 3, 1}, {false, 5, 1}, {true, 0, 3}, {true, 2, 2}, {true, 3, 3}, {true, 5, 5}} {
		if got := Multiple(c.multiAZ, c.zones); got != c.want {
			t.Errorf("Multiple(%v, %d) = %d, want %d", c.multiAZ, c.zones, got, c.want)
		}
	}
	for _, c := range []struct {
		name                        string
		multiAZ                     bool
		nodes, floor, minimum, step int
		action                      Action
		after                       int
	}{
		// Single-AZ, floor and minimum 0: 2 - 1 = 1 is allowed (the
		// reference's code would keep 2: 1 < 3).
		{"single-AZ 2 → 1", false, 2, 0, 0, 1, ScaleDown, 1},
		{"single-AZ 3 → 2", false, 3, 0, 0, 1, ScaleDown, 2},
		{"single-AZ 1 stays: 0 nodes", false, 1, 0, 0, 1, None, 1},
		// 3 - 2 = 1 is allowed, 2 - 2 = 0 is not.
		{"single-AZ step 2, 3 → 1", false, 3, 0, 0, 2, ScaleDown, 1},
		{"single-AZ step 2, 2 stays", false, 2, 0, 0, 2, None, 2},
		// A single-AZ floor of 3 (the schema's default) is the spec's:
		// 4 → 3, then no lower.
		{"single-AZ floor 3, 4 → 3", false, 4, 3, 0, 1, ScaleDown, 3},
		{"single-AZ floor 3, 3 stays", false, 3, 3, 0, 1, None, 3},
		// A workload minimum of 2: 3 → 2, then no lower.
		{"single-AZ minimum 2, 3 → 2", false, 3, 0, 2, 1, ScaleDown, 2},
		// Multi-AZ, 3 zones, floor and minimum 0: step 1 → 3; 6 → 3, 3
		// stays, 4 stays (4 - 3 = 1 < 3).
		{"multi-AZ 6 → 3", true, 6, 0, 0, 1, ScaleDown, 3},
		{"multi-AZ 3 stays", true, 3, 0, 0, 1, None, 3},
		{"multi-AZ 4 stays", true, 4, 0, 0, 1, None, 4},
	} {
		cl := cluster(c.nodes, 1e6, 1e6)
		cl.MultiAZ, cl.Floor, cl.WorkloadMinimum, cl.Step = c.multiAZ, c.floor, c.minimum, c.step
		d := DecideCluster(t0, cl, dims)
		if d.Action != c.action || d.Nodes != c.after {
			t.Errorf("%s: %q %d (%s); want %q %d", c.name, d.Action, d.Nodes, d.Why, c.action, c.after)
		}
	}
}

// TestNodesOff: with node scaling off, no step is taken either way, and a
// short cluster is full, not scaling up (no node is coming), whatever the
// ceiling (the reference says ready whatever the capacity). Its region
// then gets a new cluster, and it is no ready sibling of an empty one.
// Multi-AZ, ceiling 31 → 30, step 2 → 3.
func TestNodesOff(t *testing.T) {
	off := func(c Cluster) Cluster { c.NodesOff = true; return c }
	for _, c := range []struct {
		name   string
		c      Cluster
		status Status
		nodes  int
		why    string
	}{
		{"short, a step fits: full", off(cluster(9, 2999, 1000)), Full, 9, "node scaling is off"},
		{"short at the ceiling: full", off(cluster(30, 0, 0)), Full, 30, "node scaling is off"},
		{"room: ready", off(cluster(9, 3000, 1000)), Ready, 9, "node scaling is off"},
		{"all spare: ready, no scale down", off(cluster(12, 1e6, 1e6)), Ready, 12, "node scaling is off"},
		// On, the same short cluster scales up: the status is the step's.
		{"on: short, a step fits: scaling up", cluster(9, 2999, 1000), ScalingUp, 12, "scale up 9 → 12"},
	} {
		d := DecideCluster(t0, c.c, dims)
		if d.Status != c.status || d.Nodes != c.nodes || (c.c.NodesOff && d.Action != None) || !strings.Contains(d.Why, c.why) {
			t.Errorf("%s: %s %q %d (%s); want %s %d (%q)", c.name, d.Status, d.Action, d.Nodes, d.Why, c.status, c.nodes, c.why)
		}
		if r := StatusOf(c.c, dims); r.Status != d.Status {
			t.Errorf("%s: StatusOf %s, DecideCluster %s", c.name, r.Status, d.Status)
		}
	}
	short := off(cluster(9, 0, 0))
	empty := off(cluster(9, 1e6, 1e6))
	empty.Name, empty.InstancesKnown, empty.EmptyLongEnough = "c2", true, true
	east := Place{"aws", "us-east-1"}
	r := Decide(t0, []Place{east}, []Cluster{short}, dims)
	if len(r.Plan.Create) != 1 || r.Plan.Create[0] != east {
		t.Errorf("one short cluster, nodes off: creates %v, want one in %s", r.Plan.Create, east)
	}
	r = Decide(t0, []Place{east}, []Cluster{short, empty}, dims)
	if len(r.Plan.Delete) != 0 {
		t.Errorf("an empty cluster beside a short one, nodes off: deletes %v, want none (the short one is no ready sibling)", r.Plan.Delete)
	}
}

// TestStatusOf: the status is a function of the report alone, in the
// reference's order: the provider's failed and in progress first, then a
// reporter not ready, missing numbers, and capacity. Multi-AZ, ceiling 31
// → 30, step 2 → 3; an instance needs 3000 connections, 1000 partitions.
func TestStatusOf(t *testing.T) {
	with := func(nodes int, conn, part float64, f func(*Cluster)) Cluster {
		c := cluster(nodes, conn, part)
		if f != nil {
			f(&c)
		}
		return c
	}
	for _, c := range []struct {
		name string
		c    Cluster
		want Status
	}{
		{"room in both", with(9, 3000, 1000, nil), Ready},
		{"room in both, in progress", with(9, 3000, 1000, func(c *Cluster) { c.InProgress = true }), Ready},
		{"one short, 27 + 3 = 30 fits", with(27, 2999, 1000, nil), ScalingUp},
		{"one short while a step is in progress", with(9, 3000, 999, func(c *Cluster) { c.InProgress = true }), ScalingUp},
		{"one short, 28 + 3 = 31 > 30", with(28, 3000, 999, nil), Full},
		{"short at the ceiling", with(30, 0, 0, nil), Full},
		{"failed, whatever it reports", with(9, 3000, 1000, func(c *Cluster) { c.Status, c.ReporterReady = Failed, false }), Failed},
		{"being provisioned or deleted", with(9, 0, 0, func(c *Cluster) { c.Status = Provisioning }), Provisioning},
		{"reporter not ready", with(9, 3000, 1000, func(c *Cluster) { c.ReporterReady = false }), WaitingForReporter},
		{"reporter not ready, numbers missing", with(9, 0, 0, func(c *Cluster) { c.ReporterReady, c.Remaining = false, nil }), WaitingForReporter},
		{"a number missing", with(9, 0, 0, func(c *Cluster) { delete(c.Remaining, "partitions") }), Unknown},
		{"held by the caller", with(9, 3000, 1000, func(c *Cluster) { c.Hold = "ceiling override failed" }), Unknown},
	} {
		r := StatusOf(c.c, dims)
		if r.Status != c.want {
			t.Errorf("%s: %s (%+v), want %s", c.name, r.Status, r, c.want)
		}
		if d := DecideCluster(t0, c.c, dims); d.Status != r.Status {
			t.Errorf("%s: DecideCluster says %s, StatusOf %s", c.name, d.Status, r.Status)
		}
	}
}

// TestMissingHoldsEverything: a dimension missing or NaN holds every
// action; the status is unknown (neither a ready sibling nor full).
func TestMissingHoldsEverything(t *testing.T) {
	for _, rem := range []map[string]float64{{"connections": 0}, {"connections": 0, "partitions": math.NaN()}, {"connections": math.Inf(1), "partitions": 0}} {
		c := cluster(9, 0, 0)
		c.Remaining = rem
		c.Status = Full
		d := DecideCluster(t0, c, dims)
		if d.Action != None || d.Hold == "" || d.Status != Unknown {
			t.Errorf("%v: %+v; want held, status unknown", rem, d)
		}
	}
}

func TestPlanClusters(t *testing.T) {
	east, west := Place{"aws", "us-east-1"}, Place{"aws", "us-west-2"}
	p := PlanClusters([]Place{east, west, {"gcp", "europe-west1"}}, []Member{
		{Name: "e1", Place: east, Status: Full},
		{Name: "e2", Place: east, Status: Failed},
		{Name: "w1", Place: west, Status: Full},
		{Name: "w2", Place: west, Status: Ready},
		{Name: "w3", Place: west, Status: Ready, Empty: true},
		{Name: "w4", Place: west, Status: Ready, Empty: true},
	})
	want := map[Place]bool{east: true, {"gcp", "europe-west1"}: true}
	if len(p.Create) != 2 || !want[p.Create[0]] || !want[p.Create[1]] {
		t.Errorf("creates %v: want us-east-1 (all full or failed) and europe-west1 (none)", p.Create)
	}
	// Three ready in us-west-2, two empty: both go, w2 stays.
	if strings.Join(p.Delete, ",") != "w3,w4" {
		t.Errorf("deletes %v: want w3, w4", p.Delete)
	}
	// Two empty ready, nothing else ready: one goes, one stays.
	p = PlanClusters(nil, []Member{{Name: "a", Place: west, Status: Ready, Empty: true}, {Name: "b", Place: west, Status: Ready, Empty: true}})
	if strings.Join(p.Delete, ",") != "a" {
		t.Errorf("deletes %v: want only a (b is the last ready)", p.Delete)
	}
	// A sibling that is full, not ready: no delete.
	p = PlanClusters(nil, []Member{{Name: "a", Place: west, Status: Ready, Empty: true}, {Name: "b", Place: west, Status: Full}})
	if len(p.Delete) != 0 {
		t.Errorf("deletes %v: want none (no ready sibling)", p.Delete)
	}
	// A sibling in another region does not count.
	p = PlanClusters(nil, []Member{{Name: "a", Place: west, Status: Ready, Empty: true}, {Name: "b", Place: east, Status: Ready}})
	if len(p.Delete) != 0 {
		t.Errorf("deletes %v: want none (the ready sibling is elsewhere)", p.Delete)
	}
	// One waiting for its capacity reporter: no create (it may have
	// room), and it is no ready sibling.
	p = PlanClusters([]Place{east}, []Member{{Name: "e1", Place: east, Status: Full}, {Name: "e3", Place: east, Status: WaitingForReporter}})
	if len(p.Create) != 0 {
		t.Errorf("creates %v: want none while one waits for its reporter", p.Create)
	}
	p = PlanClusters(nil, []Member{{Name: "a", Place: west, Status: Ready, Empty: true}, {Name: "b", Place: west, Status: WaitingForReporter}})
	if len(p.Delete) != 0 {
		t.Errorf("deletes %v: want none (the sibling waits for its reporter)", p.Delete)
	}
	// One being provisioned: no second create.
	p = PlanClusters([]Place{east}, []Member{{Name: "e1", Place: east, Status: Full}, {Name: "e3", Place: east, Status: Provisioning}})
	if len(p.Create) != 0 {
		t.Errorf("creates %v: want none while one is provisioning", p.Create)
	}
}

// TestProperties: over random fleets, a place never loses its last ready
// cluster, a step never crosses the restricted floor or ceiling, and no
// cluster gets two actions.
func TestProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	statuses := []Status{Ready, Full, Failed, Provisioning, ScalingUp}
	for run := 0; run < 2000; run++ {
		var places []Place
		var cs []Cluster
		for p := 0; p < 1+rng.IntN(4); p++ {
			pl := Place{"aws", string(rune('a' + p))}
			places = append(places, pl)
			for i := 0; i < rng.IntN(5); i++ {
				c := Cluster{Name: pl.Region + string(rune('0'+i)), Cloud: pl.Cloud, Region: pl.Region, MultiAZ: rng.IntN(2) == 0,
					Nodes: rng.IntN(40), Floor: rng.IntN(10), Ceiling: 5 + rng.IntN(40), WorkloadMinimum: rng.IntN(10), Step: 1 + rng.IntN(5),
					Remaining: map[string]float64{"connections": float64(rng.IntN(20000)), "partitions": float64(rng.IntN(6000))},
					Instances: float64(rng.IntN(3)), InstancesKnown: rng.IntN(4) > 0, EmptyLongEnough: rng.IntN(3) > 0,
					InProgress: rng.IntN(5) == 0, ReporterReady: rng.IntN(6) > 0, Zones: rng.IntN(6), Status: statuses[rng.IntN(len(statuses))]}
				cs = append(cs, c)
			}
		}
		r := Decide(t0, places, cs, dims)
		deleted := map[string]bool{}
		for _, n := range r.Plan.Delete {
			deleted[n] = true
		}
		readyLeft := map[Place]int{}
		readyBefore := map[Place]int{}
		for _, c := range cs {
			d := r.Clusters[c.Name]
			pl := Place{c.Cloud, c.Region}
			if d.Status == Ready {
				readyBefore[pl]++
				if !deleted[c.Name] {
					readyLeft[pl]++
				}
			}
			switch d.Action {
			case ScaleUp:
				if d.Nodes > d.Ceiling || c.InProgress || !c.ReporterReady {
					t.Fatalf("run %d: %s up to %d over ceiling %d (in progress %v)", run, c.Name, d.Nodes, d.Ceiling, c.InProgress)
				}
			case ScaleDown:
				if d.Nodes < d.Floor || d.Nodes < c.WorkloadMinimum || d.Nodes <= 0 || c.MultiAZ && d.Nodes < c.Multiple() || c.InProgress || !c.ReporterReady {
					t.Fatalf("run %d: %s down to %d (floor %d, minimum %d)", run, c.Name, d.Nodes, d.Floor, c.WorkloadMinimum)
				}
			}
			if d.Action != None && (abs(d.Nodes-c.Nodes) != d.Step || d.Step%c.Multiple() != 0) {
				t.Fatalf("run %d: %s moved %d → %d, not one step of %d in multiples of %d", run, c.Name, c.Nodes, d.Nodes, d.Step, c.Multiple())
			}
			if deleted[c.Name] && (d.Action != None || d.Nodes != c.Nodes) {
				t.Fatalf("run %d: %s deleted and %s", run, c.Name, d.Action)
			}
		}
		for pl, n := range readyBefore {
			if n > 0 && readyLeft[pl] == 0 {
				t.Fatalf("run %d: %s lost its last ready cluster", run, pl)
			}
		}
	}
}

// TestHeldClusterIsNoSibling: an empty ready cluster beside one whose
// numbers are missing is not deleted (the other may be full), nor is an
// empty one while it scales; a cluster both spare and empty is deleted
// with no node action.
func TestHeldClusterIsNoSibling(t *testing.T) {
	empty := func(name string) Cluster {
		c := cluster(6, 1e6, 1e6)
		c.Name, c.Instances, c.InstancesKnown, c.EmptyLongEnough, c.Floor, c.WorkloadMinimum = name, 0, true, true, 0, 0
		return c
	}
	held := cluster(30, 0, 0)
	held.Name, held.Remaining = "held", map[string]float64{"connections": 0}
	r := Decide(t0, nil, []Cluster{empty("a"), held}, dims)
	if len(r.Plan.Delete) != 0 {
		t.Errorf("deleted %v beside a cluster with missing numbers", r.Plan.Delete)
	}
	scaling := empty("b")
	scaling.InProgress = true
	r = Decide(t0, nil, []Cluster{empty("a"), scaling}, dims)
	if strings.Join(r.Plan.Delete, ",") != "a" {
		t.Errorf("deletes %v: want a only (b is scaling)", r.Plan.Delete)
	}
	if d := r.Clusters["a"]; d.Action != None || d.Nodes != 6 {
		t.Errorf("a deleted and %s to %d: want no node action", d.Action, d.Nodes)
	}
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// TestSpareFor: a scale-down waits until every dimension has spared a
// step's worth, evaluation after evaluation at the same count, for
// SpareFor (5m here). The cluster: multi-AZ, 12 nodes, step 2 → 3, so a
// step's worth is 3 × 1000 = 3000 connections and 3 × 500 = 1500
// partitions; 3001 and 1501 spare it, 1500 partitions does not; 2999
// connections is short of an instance's 3000.
func TestSpareFor(t *testing.T) {
	run := func(ago time.Duration, nodes int) SpareRun { return SpareRun{Since: t0.Add(-ago), Nodes: nodes} }
	spare := func(nodes int, r SpareRun, edit ...func(*Cluster)) Cluster {
		c := cluster(nodes, 3001, 1501)
		c.Spare, c.SpareFor = r, 5*time.Minute
		for _, e := range edit {
			e(&c)
		}
		return c
	}
	for _, c := range []struct {
		name   string
		c      Cluster
		action Action
		nodes  int
		// the run kept for the next evaluation, and when a held
		// scale-down would go (zero: none waits)
		run   SpareRun
		until time.Time
		why   string
	}{
		{"first spare evaluation: the run begins, nothing yet", spare(12, SpareRun{}), None, 12, run(0, 12), t0.Add(5 * time.Minute),
			"spare 3 nodes' worth for 0s of 5m: held, scale down 12 → 9 at 2026-05-04T12:05:00Z if it lasts"},
		{"2m10s of 5m: held", spare(12, run(2*time.Minute+10*time.Second, 12)), None, 12, run(2*time.Minute+10*time.Second, 12), t0.Add(2*time.Minute + 50*time.Second),
			"spare 3 nodes' worth for 2m10s of 5m: held"},
		{"4m55s of 5m: still held", spare(12, run(4*time.Minute+55*time.Second, 12)), None, 12, run(4*time.Minute+55*time.Second, 12), t0.Add(5 * time.Second),
			"for 4m55s of 5m: held"},
		// Kept as it is: if the gate holds the step, the next evaluation
		// asks again; once applied, 9 nodes start a run of their own.
		{"5m of 5m: down a step", spare(12, run(5*time.Minute, 12)), ScaleDown, 9, run(5*time.Minute, 12), time.Time{},
			"scale down 12 → 9: spare 3 nodes' worth for 5m of 5m: connections 3001 > 3000 (3 nodes × 1000), partitions 1501 > 1500 (3 nodes × 500)"},
		{"1h of 5m: down a step", spare(12, run(time.Hour, 12)), ScaleDown, 9, run(time.Hour, 12), time.Time{}, "for 1h of 5m"},
		{"a run at 15 nodes says nothing of 12: it begins again", spare(12, run(time.Hour, 15)), None, 12, run(0, 12), t0.Add(5 * time.Minute), "for 0s of 5m: held"},
		{"a run from after now (the clock went back) begins again now", spare(12, SpareRun{Since: t0.Add(time.Minute), Nodes: 12}), None, 12, run(0, 12), t0.Add(5 * time.Minute), "for 0s of 5m: held"},
		{"a dimension without a step to spare ends the run", spare(12, run(time.Hour, 12), func(c *Cluster) { c.Remaining["partitions"] = 1500 }), None, 12, SpareRun{}, time.Time{}, "none to spare"},
		{"short: up at once, the run ends", spare(9, run(time.Hour, 9), func(c *Cluster) { c.Remaining["connections"] = 2999 }), ScaleUp, 12, SpareRun{}, time.Time{}, "scale up 9 → 12"},
		{"a step in progress ends the run", spare(12, run(time.Hour, 12), func(c *Cluster) { c.InProgress = true }), None, 12, SpareRun{}, time.Time{}, "in progress"},
		{"missing numbers end the run", spare(12, run(time.Hour, 12), func(c *Cluster) { delete(c.Remaining, "partitions") }), None, 12, SpareRun{}, time.Time{}, ""},
		{"a reporter not ready ends the run", spare(12, run(time.Hour, 12), func(c *Cluster) { c.ReporterReady = false }), None, 12, SpareRun{}, time.Time{}, "not ready"},
		{"node scaling off ends the run", spare(12, run(time.Hour, 12), func(c *Cluster) { c.NodesOff = true }), None, 12, SpareRun{}, time.Time{}, "off"},
		// The run goes on: the bound may move (an override), and the
		// spare step has lasted all along.
		{"at the workload minimum: no step, the run goes on", spare(6, run(time.Minute, 6), func(c *Cluster) { c.WorkloadMinimum = 6 }), None, 6, run(time.Minute, 6), time.Time{},
			"6 nodes is not above the workload minimum 6"},
		{"spareFor 0: at once, as the reference", spare(12, SpareRun{}, func(c *Cluster) { c.SpareFor = 0 }), ScaleDown, 9, run(0, 12), time.Time{},
			"scale down 12 → 9: connections 3001 > 3000"},
	} {
		d := DecideCluster(t0, c.c, dims)
		if d.Action != c.action || d.Nodes != c.nodes || d.Spare != c.run || !d.SpareUntil.Equal(c.until) || !strings.Contains(d.Why, c.why) {
			t.Errorf("%s: %s to %d, run %+v, until %s (%s); want %q to %d, run %+v, until %s, why with %q",
				c.name, d.Action, d.Nodes, d.Spare, d.SpareUntil, d.Why, c.action, c.nodes, c.run, c.until, c.why)
		}
	}
}

// TestSpareForOverTime: evaluations every 30 s, each fed the run the one
// before kept, the node count what the last step left. Spare from 0s; at
// 3m the partitions drop to 1500 (no step to spare) for one evaluation;
// spare again from 3m30s, so the step down comes 5m later, at 8m30s, not
// at 5m. At 9m, 9 nodes, short: up at once.
func TestSpareForOverTime(t *testing.T) {
	var run SpareRun
	var got []string
	nodes := 12
	for at := time.Duration(0); at <= 9*time.Minute; at += 30 * time.Second {
		c := cluster(nodes, 3001, 1501)
		c.Spare, c.SpareFor = run, 5*time.Minute
		switch at {
		case 3 * time.Minute:
			c.Remaining["partitions"] = 1500
		case 9 * time.Minute:
			c.Remaining["connections"] = 0
		}
		d := DecideCluster(t0.Add(at), c, dims)
		run = d.Spare
		if d.Action != None {
			got = append(got, fmt.Sprintf("%s %s %d → %d", Dur(at), d.Action, nodes, d.Nodes))
			nodes = d.Nodes
		}
	}
	if want := "8m30s scale-down 12 → 9, 9m scale-up 9 → 12"; strings.Join(got, ", ") != want {
		t.Fatalf("steps %q, want %q", strings.Join(got, ", "), want)
	}
}

func TestDur(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "0s", 5 * time.Minute: "5m", 130 * time.Second: "2m10s", time.Hour: "1h", 65 * time.Minute: "1h5m", 3601 * time.Second: "1h0m1s", 1500 * time.Millisecond: "1.5s"} {
		if got := Dur(d); got != want {
			t.Errorf("Dur(%s) = %q, want %q", d, got, want)
		}
	}
}
