package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/signals/embedded"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/cluster"
)

// TestFleetDrainEvicts: nodes drained under instances evict them, the
// newest first, to the fullest cluster with room, the rest refused.
// Clusters a (4 nodes) and b (2), one connection a node, one an instance,
// no arrivals: the 6 instances at the start fill b (the fuller) and then
// a. b grows to 4 (10 s to join); a then drops to 1 node: its 3 instances
// too many are evicted, 2 find room on b, 1 is refused.
func TestFleetDrainEvicts(t *testing.T) {
	fl := spec.SimFleet{Namespace: "streaming", Name: "streaming", Cloud: "aws", Templates: []string{"standard"},
		PerNode: map[string]float64{"connections": 1}, PerInstance: map[string]float64{"connections": 1},
		JoinTime: spec.Duration(10 * time.Second), DrainTime: spec.Duration(30 * time.Second), ProvisionTime: spec.Duration(time.Minute),
		Clusters:         []spec.SimCluster{{Name: "a", Region: "us-east-1", Nodes: 4}, {Name: "b", Region: "us-east-1", Nodes: 2}},
		InitialInstances: 6}
	fl.Arrivals.Lifetime = spec.Duration(10 * time.Hour)
	store := embedded.NewStore(0)
	w, err := NewWithTrace(spec.SimConfig{Seed: 1, Fleets: []spec.SimFleet{fl}}, constTrace(1, 600), Options{Sink: store})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{w: w, src: embedded.NewSource(store), p: &Provider{World: w}}
	nodes := func(name string, n int64) providers.ObjectChange {
		return providers.ObjectChange{Address: providers.Address{Provider: "sim", Kind: cluster.Kind, Namespace: "streaming", Name: name},
			Action: action.Update, Manager: "setpoint", Force: true, Attributes: map[addrs.Path]values.Value{cluster.Nodes: values.CountOf(n)}, Changed: []addrs.Path{cluster.Nodes}}
	}
	instances := func(name string, sec int) float64 {
		return r.value(t, `sum(fleet_instances{cluster="`+name+`"})`, sec)
	}
	if a, b := instances("a", 5), instances("b", 5); a != 4 || b != 2 {
		t.Fatalf("at the start: a %v, b %v instances; want 4 and 2", a, b)
	}
	if res := r.apply(t, 5, nodes("b", 4)); res[0].Err != "" {
		t.Fatal(res[0].Err)
	}
	if res := r.apply(t, 30, nodes("a", 1)); res[0].Err != "" {
		t.Fatal(res[0].Err)
	}
	for _, c := range []struct {
		expr string
		want float64
	}{
		{`sum(fleet_instances{cluster="a"})`, 1},
		{`sum(fleet_instances{cluster="b"})`, 4},
		{`sum(fleet_remaining{cluster="a"})`, 0},
		{`sum(fleet_remaining{cluster="b"})`, 0},
		{`sum(fleet_instances_evicted_total)`, 3},
		{`sum(fleet_instances_refused_total)`, 1},
	} {
		if got := r.value(t, c.expr, 45); got != c.want {
			t.Errorf("%s = %v, want %v", c.expr, got, c.want)
		}
	}
}

// TestFleetDeleteRechecksInstances: the world checks a delete against
// the instances a cluster runs when it is applied, not when it was
// planned: a plan (a saved one, applied later) that saw b empty is
// refused once an instance landed there, and goes through on an empty
// cluster.
func TestFleetDeleteRechecksInstances(t *testing.T) {
	fl := spec.SimFleet{Namespace: "streaming", Name: "streaming", Cloud: "aws", Templates: []string{"standard"},
		PerNode: map[string]float64{"connections": 1}, PerInstance: map[string]float64{"connections": 1},
		JoinTime: spec.Duration(10 * time.Second), DrainTime: spec.Duration(30 * time.Second), ProvisionTime: spec.Duration(time.Minute),
		Clusters:         []spec.SimCluster{{Name: "a", Region: "us-east-1", Nodes: 1}, {Name: "b", Region: "us-east-1", Nodes: 3}, {Name: "c", Region: "us-east-1", Nodes: 3}},
		InitialInstances: 2}
	fl.Arrivals.Lifetime = spec.Duration(10 * time.Hour)
	w, err := NewWithTrace(spec.SimConfig{Seed: 1, Fleets: []spec.SimFleet{fl}}, constTrace(1, 600), Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{w: w, p: &Provider{World: w}}
	del := func(name string) providers.ObjectChange {
		return providers.ObjectChange{Address: providers.Address{Provider: "sim", Kind: cluster.Kind, Namespace: "streaming", Name: name}, Action: action.Delete, Manager: "setpoint"}
	}
	// The first instance fills a (1 node), the second goes to b (the
	// fuller of b and c after a): b runs one, c none.
	if res := r.apply(t, 5, del("b")); !strings.Contains(res[0].Err, "cluster b still runs 1 instances") {
		t.Fatalf("delete of b running an instance: %q; want refused", res[0].Err)
	}
	if res := r.apply(t, 5, del("c")); res[0].Err != "" {
		t.Fatalf("delete of the empty c: %q", res[0].Err)
	}
}
