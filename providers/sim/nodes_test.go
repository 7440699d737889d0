package sim

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/decide/nodepolicy"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/noderes"
)

// Two nodes: "a" (1 socket × 4 cores × 2 threads: core c is CPUs c and
// c+4) labelled tier=web, and "b" (2 × 2 × 1). checkout (1500m a pod) runs
// on both, its pods alternating a, b, a, ...; batch (250m) only on b.
func nodeWorld(t *testing.T, state string, checkoutPods int) *Provider {
	t.Helper()
	co := deployment("checkout", checkoutPods)
	co.CPURequest = 1500
	co.Containers = append(co.Containers, spec.SimContainer{Name: "sidecar", Request: 32 * spec.MiB, Limit: 64 * spec.MiB, WorkingSet: 20 * spec.MiB})
	batch := deployment("batch", 2)
	batch.Namespace, batch.CPURequest = "jobs", 250
	cfg := spec.SimConfig{Seed: 1, Workloads: []spec.SimWorkload{co, batch}, Nodes: []spec.SimNode{
		{Name: "a", Topology: "1x4x2", Labels: map[string]string{"tier": "web"}, Workloads: []string{"shop/checkout"}},
		{Name: "b", Topology: "2x2x1", Workloads: []string{"shop/checkout", "jobs/batch"}},
	}}
	p, err := NewProvider(cfg, constTrace(50, 600), state, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func policyAddr(name string) providers.Address {
	return providers.Address{Provider: "sim", Kind: KindNodePolicy, Namespace: "platform", Name: name}
}

func applyPolicy(t *testing.T, name string, act action.Action, c noderes.Config) providers.ObjectChange {
	t.Helper()
	raw, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	v, err := values.StructuredOf(raw)
	if err != nil {
		t.Fatal(err)
	}
	return providers.ObjectChange{Address: policyAddr(name), Action: act, Manager: "setpoint", Changed: []addrs.Path{noderes.AttrConfig},
		Attributes: map[addrs.Path]values.Value{noderes.AttrConfig: v}}
}

func webPolicy(maxCPUs int) noderes.Config {
	return noderes.Config{Policy: nodepolicy.Policy{CPUs: nodepolicy.Enforce, Memory: nodepolicy.Observe,
		Pools: []nodepolicy.Pool{{Name: "web", Namespaces: []string{"shop"}, MinCPUs: 1, MaxCPUs: maxCPUs}}},
		NodeSelector: map[string]string{"tier": "web"}}
}

func nodeStatuses(t *testing.T, p *Provider, name string, sec int) []noderes.NodeStatus {
	t.Helper()
	o := p.Read(context.Background(), providers.ReadRequest{Now: at(p, sec), Addresses: []providers.Address{policyAddr(name)}}).Objects[0]
	if !o.Exists {
		t.Fatalf("policy %s absent at %d s", name, sec)
	}
	var out []noderes.NodeStatus
	if err := json.Unmarshal(o.Attributes[noderes.AttrNodes].JSON(), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func poolCPUs(st noderes.NodeStatus) map[string]string {
	m := map[string]string{}
	for _, p := range st.Pools {
		m[p.Name] = p.CPUs.String()
	}
	return m
}

func nodeReport(t *testing.T, p *Provider, node string, sec int) NodeReport {
	t.Helper()
	o := p.Read(context.Background(), providers.ReadRequest{Now: at(p, sec), Addresses: []providers.Address{{Provider: "sim", Kind: KindNodeReport, Name: node}}}).Objects[0]
	r, err := DecodeNodeReport(o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A policy runs on the nodes its selector matches; its pools grow with the
// pods placed there, whole cores first, lowest IDs, up to maxCPUs.
func TestNodePolicyPoolsFollowPods(t *testing.T) {
	p := nodeWorld(t, "", 4) // checkout pods 1, 3 on a; 2, 4 on b
	if r := applyAt(t, p, 10, applyPolicy(t, "web", action.Create, webPolicy(4))); r.Err != "" {
		t.Fatal(r.Err)
	}
	st := nodeStatuses(t, p, "web", 10) // at once, as the agent on a new config
	if len(st) != 1 || st[0].Node != "a" || st[0].Topology != "1x4x2" {
		t.Fatalf("statuses %+v: want node a only (b has no tier=web)", st)
	}
	// Two pods of 1500m: 3 CPUs, whole core 0 (0, 4) then the lowest, 1.
	if got := poolCPUs(st[0]); got["web"] != "0-1,4" || got["default"] != "2-3,5-7" || len(got) != 2 {
		t.Fatalf("pools %v, want web 0-1,4 and default 2-3,5-7", got)
	}
	if c := st[0].Pools[0].Containers; len(c) != 4 {
		t.Fatalf("web has %v: want both pods' app and sidecar", c)
	}

	// Six pods: three on a, 4500m, but web stops at its maxCPUs of 4: the
	// whole cores 0 and 1. Each of the four containers placed before moves.
	applyAt(t, p, 20, change(addr(KindDeployment, "checkout"), "setpoint", true, AttrReplicas, count(6)))
	st = nodeStatuses(t, p, "web", 21)
	if got := poolCPUs(st[0]); got["web"] != "0-1,4-5" || got["default"] != "2-3,6-7" {
		t.Fatalf("pools %v, want web 0-1,4-5 and default 2-3,6-7", got)
	}
	r := nodeReport(t, p, "a", 21)
	if r.Policy != "platform/web" || r.Rebalances != 2 || r.Moves != 4 || r.Containers != 6 || r.CPUs != nodepolicy.Enforce {
		t.Fatalf("report %+v: want 2 rebalances, 4 moves, 6 containers", r)
	}
	if r.Pools[0].Name != "web" || r.Pools[0].MinSize != 3 || r.Pools[0].MaxSize != 4 || r.Pools[1].MinSize != 4 || r.Pools[1].MaxSize != 5 {
		t.Fatalf("pool sizes %+v", r.Pools)
	}
	// Nothing moves while the pods stay: no rebalance.
	if r := nodeReport(t, p, "a", 120); r.Rebalances != 2 {
		t.Fatalf("%d rebalances with the same pods", r.Rebalances)
	}
	if r := nodeReport(t, p, "b", 120); r.Policy != "" || r.Rebalances != 0 || len(r.Pools) != 0 {
		t.Fatalf("node b ran a policy: %+v", r)
	}
}

// A node runs one policy: a second whose selector takes it is refused;
// one for the other node is not. A problem the node finds (a reserved CPU
// outside its topology) comes back positioned at its field.
func TestNodePolicyOnePerNode(t *testing.T) {
	p := nodeWorld(t, "", 2)
	applyAt(t, p, 10, applyPolicy(t, "web", action.Create, webPolicy(4)))
	all := webPolicy(2)
	all.NodeSelector = nil
	if r := applyAt(t, p, 11, applyPolicy(t, "all", action.Create, all)); !strings.Contains(r.Err, "sim node a runs node policy platform/web already") {
		t.Fatalf("a second policy on node a: %q", r.Err)
	}
	other := webPolicy(2)
	other.NodeSelector = map[string]string{}
	other.Reserved = nodepolicy.CPUSet{9}
	other.Pools[0].Namespaces = []string{"jobs"}
	// nil and empty selectors both match every node: refused as well.
	if r := applyAt(t, p, 11, applyPolicy(t, "other", action.Create, other)); r.Err == "" {
		t.Fatal("an empty selector takes node a too: want a refusal")
	}
	// Release web; then other runs on both nodes and reports CPU 9 on each.
	del := providers.ObjectChange{Address: policyAddr("web"), Action: action.Delete, Manager: "setpoint"}
	if r := applyAt(t, p, 12, del); r.Err != "" {
		t.Fatal(r.Err)
	}
	if r := applyAt(t, p, 12, applyPolicy(t, "other", action.Create, other)); r.Err != "" {
		t.Fatal(r.Err)
	}
	st := nodeStatuses(t, p, "other", 13)
	if len(st) != 2 {
		t.Fatalf("statuses %+v: want both nodes", st)
	}
	for _, s := range st {
		if len(s.Problems) == 0 || s.Problems[0].Field != "spec.reserved.cpus" || !strings.Contains(s.Problems[0].Message, "9") {
			t.Fatalf("node %s problems %+v: want reserved CPU 9 reported at spec.reserved.cpus", s.Node, s.Problems)
		}
	}
	// b: batch's two pods of 250m: jobs' pool at its minimum, 1 CPU.
	if got := poolCPUs(st[1]); got["web"] != "0" || got["default"] != "1-3" {
		t.Fatalf("node b pools %v", got)
	}
}

// Applied policies are in the state file: another process over it sees
// the same pools. A world without nodes refuses a policy.
func TestNodePolicyReplayed(t *testing.T) {
	state := filepath.Join(t.TempDir(), "sim-state.json")
	p := nodeWorld(t, state, 4)
	if r := applyAt(t, p, 10, applyPolicy(t, "web", action.Create, webPolicy(4))); r.Err != "" {
		t.Fatal(r.Err)
	}
	want := poolCPUs(nodeStatuses(t, p, "web", 30)[0])
	q := nodeWorld(t, state, 4)
	if got := poolCPUs(nodeStatuses(t, q, "web", 30)[0]); got["web"] != want["web"] || got["default"] != want["default"] {
		t.Fatalf("replayed %v, applied %v", got, want)
	}

	bare, err := NewProvider(spec.SimConfig{Seed: 1, Workloads: []spec.SimWorkload{deployment("checkout", 1)}}, constTrace(50, 60), "", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r := applyAt(t, bare, 1, applyPolicy(t, "web", action.Create, webPolicy(4))); !strings.Contains(r.Err, "no nodes") {
		t.Fatalf("a world without nodes: %q", r.Err)
	}
}

// Bad nodes are refused when the world is built: a topology that does not
// parse, a workload the world does not have, a node twice.
func TestSimNodesRefused(t *testing.T) {
	for _, tc := range []struct {
		nodes []spec.SimNode
		want  string
	}{
		{[]spec.SimNode{{Name: "a", Topology: "2x0x2"}}, "sim node a"},
		{[]spec.SimNode{{Name: "a", Topology: "1x2x2", Workloads: []string{"shop/nope"}}}, "no sim workload shop/nope"},
		{[]spec.SimNode{{Name: "a", Topology: "1x2x2"}, {Name: "a", Topology: "1x2x2"}}, "sim node a twice"},
		{[]spec.SimNode{{Name: "a", Topology: "64x64x2"}}, "sim node a"},
	} {
		cfg := spec.SimConfig{Seed: 1, Workloads: []spec.SimWorkload{deployment("checkout", 1)}, Nodes: tc.nodes}
		if _, err := NewProvider(cfg, constTrace(1, 10), "", Options{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.nodes, err, tc.want)
		}
	}
}

// A node runs at most MaxNodePods pods, as a kubelet its max-pods: the
// rest are left out of its pools and counted.
func TestNodePodsBounded(t *testing.T) {
	co := deployment("checkout", MaxNodePods+88)
	co.CPURequest = 1
	cfg := spec.SimConfig{Seed: 1, Workloads: []spec.SimWorkload{co}, Nodes: []spec.SimNode{{Name: "a", Topology: "1x4x2", Labels: map[string]string{"tier": "web"}}}}
	p, err := NewProvider(cfg, constTrace(50, 60), "", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r := applyAt(t, p, 1, applyPolicy(t, "web", action.Create, webPolicy(4))); r.Err != "" {
		t.Fatal(r.Err)
	}
	if r := nodeReport(t, p, "a", 2); r.Containers != MaxNodePods || r.Unplaced != 88 {
		t.Fatalf("%d containers, %d unplaced: want %d and 88", r.Containers, r.Unplaced, MaxNodePods)
	}
}

// BenchmarkNodeRebalance is one sim node's rebalance after a pod came or
// went: listing its 250 pods' 500 containers and running the policy core
// on a 2×32×2 node. The world pays it only when pods change.
func BenchmarkNodeRebalance(b *testing.B) {
	co := deployment("checkout", 250)
	co.Containers = append(co.Containers, spec.SimContainer{Name: "sidecar", Request: 32 * spec.MiB, Limit: 64 * spec.MiB, WorkingSet: 20 * spec.MiB})
	cfg := spec.SimConfig{Seed: 1, Workloads: []spec.SimWorkload{co}, Nodes: []spec.SimNode{{Name: "a", Topology: "2x32x2", Labels: map[string]string{"tier": "web"}}}}
	p, err := NewProvider(cfg, constTrace(50, 60), "", Options{})
	if err != nil {
		b.Fatal(err)
	}
	pol := webPolicy(64)
	pol.Pools[0].MaxCPUs = 100
	raw, _ := json.Marshal(pol)
	v, _ := values.StructuredOf(raw)
	c := providers.ObjectChange{Address: policyAddr("web"), Action: action.Create, Manager: "setpoint", Changed: []addrs.Path{noderes.AttrConfig},
		Attributes: map[addrs.Path]values.Value{noderes.AttrConfig: v}}
	if r := p.Apply(context.Background(), providers.ApplyRequest{Now: at(p, 1), Changes: []providers.ObjectChange{c}}); r.Results[0].Err != "" {
		b.Fatal(r.Results[0].Err)
	}
	n, wl := p.World.nodes[0], p.World.wls[0]
	if len(n.res.Assign) != 500 {
		b.Fatalf("%d containers", len(n.res.Assign))
	}
	b.ReportAllocs()
	for b.Loop() {
		wl.podGen++
		n.step(1)
	}
}

// Pools stay where they are: a pool that was there first keeps its CPUs
// when another, earlier in the spec, grows beside it; and two workloads of
// one name in two namespaces are two sets of containers.
func TestNodePoolsStayPut(t *testing.T) {
	co := deployment("api", 0)
	co.CPURequest = 1500
	jobs := deployment("api", 2)
	jobs.Namespace, jobs.CPURequest = "jobs", 250
	cfg := spec.SimConfig{Seed: 1, Workloads: []spec.SimWorkload{co, jobs}, Nodes: []spec.SimNode{{Name: "a", Topology: "1x4x2"}}}
	p, err := NewProvider(cfg, constTrace(50, 60), "", Options{})
	if err != nil {
		t.Fatal(err)
	}
	pol := noderes.Config{Policy: nodepolicy.Policy{CPUs: nodepolicy.Enforce, Memory: nodepolicy.Observe, Pools: []nodepolicy.Pool{
		{Name: "web", Namespaces: []string{"shop"}, MaxCPUs: 4}, {Name: "jobs", Namespaces: []string{"jobs"}, MaxCPUs: 4}}}}
	if r := applyAt(t, p, 1, applyPolicy(t, "two", action.Create, pol)); r.Err != "" {
		t.Fatal(r.Err)
	}
	// jobs' two pods of 250m: 1 CPU, the lowest.
	if got := poolCPUs(nodeStatuses(t, p, "two", 1)[0]); got["jobs"] != "0" || got["web"] != "" {
		t.Fatalf("pools %v, want jobs 0", got)
	}
	// shop/api's pod (same pod names as jobs/api's) needs 2 CPUs: web takes
	// the next whole core, 1 and 5; jobs keeps 0 (from scratch, web, first
	// in the spec, would take core 0 and move jobs).
	applyAt(t, p, 5, change(addr(KindDeployment, "api"), "setpoint", true, AttrReplicas, count(1)))
	st := nodeStatuses(t, p, "two", 6)[0]
	if got := poolCPUs(st); got["jobs"] != "0" || got["web"] != "1,5" {
		t.Fatalf("pools %v, want jobs 0 kept and web 1,5", got)
	}
	if r := nodeReport(t, p, "a", 6); r.Containers != 3 || r.Moves != 0 {
		t.Fatalf("report %+v: want 3 containers (two jobs/api, one shop/api), none moved", r)
	}
}
