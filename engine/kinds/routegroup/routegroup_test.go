package routegroupkind

import (
	"slices"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/cue/load"
	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/decide/routegroup"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/internal/simtest"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/nodeagent"
	"github.com/setpoint-dev/setpoint/providers/route"
	"github.com/setpoint-dev/setpoint/providers/workload"
)

func loadGroup(t *testing.T, body string) *spec.RouteGroup {
	t.Helper()
	dir := simtest.WriteDir(t, map[string]string{"rg.yaml": body,
		"env.yaml": "apiVersion: setpoint.dev/v1alpha1\nkind: Environment\nmetadata: {name: node}\nspec:\n  providers: [{name: ebpf, config: {cgroup: /sys/fs/cgroup}}]\n"})
	l, err := load.New()
	if err != nil {
		t.Fatal(err)
	}
	r := l.LoadDir(dir)
	if len(r.Diags) > 0 {
		t.Fatalf("specs: %v", r.Diags)
	}
	return r.Specs()[0].(*spec.RouteGroup)
}

// The spec's units become the field's: durations in seconds, percents as
// ratios, a budget per minute per second, enforce as the table mode.
func TestResolve(t *testing.T) {
	r := loadGroup(t, `apiVersion: setpoint.dev/v1alpha1
kind: RouteGroup
metadata: {name: vip, namespace: shop}
spec:
  vip: 127.100.0.1:8080/udp
  backends: {endpoints: [127.0.0.1:9002, 127.0.0.1:9001]}
  table: {slots: 101, builder: replicate}
  tick: {every: 100ms, jitter: 10%}
  filter: {alpha: 0.5}
  pressure:
    weights: {queue: 0, latency: 3, errors: 1}
    refs: {queue: 20, latency: 250ms, errorRate: 2%}
    errorClip: 4
    errorPenalty: {above: 10%, add: 7}
  saturation: {queueLimit: 50, horizon: 3s}
  viscosity: {maxSlotsPerTick: 9}
  skewGuard: {epsilon: 0.05, shrink: 0.25, minConnects: 40}
  regimes: {transitionAbove: 1.5, crisisAbove: 3, recoveryTicks: 4}
  admission: {softShed: 30%, hardBudget: 6000/m, burst: 12}
  failsafe: {after: 500ms}
  enforcement: {table: enforce}
`)
	c, err := Resolve(r, []string{"127.0.0.1:9001", "127.0.0.1:9002"})
	if err != nil {
		t.Fatal(err)
	}
	want := routegroup.Params{
		Slots: 101, Alpha: 0.5, WQueue: 0, WLatency: 3, WErrors: 1, QueueRef: 20, LatencyRef: 0.25, ErrorRef: 0.02, ErrorClip: 4,
		PenaltyAbove: 0.1, PenaltyAdd: 7, QueueLimit: 50, Horizon: 3 * time.Second, MaxSlotsPerTick: 9,
		SkewEpsilon: 0.05, SkewShrink: 0.25, MinConnects: 40, TransitionAbove: 1.5, CrisisAbove: 3, RecoveryTicks: 4,
		SoftShed: 0.3, HardBudget: 100,
	}
	if c.Params != want {
		t.Errorf("params\n%+v\nwant\n%+v", c.Params, want)
	}
	if c.VIP != "127.100.0.1:8080" || c.Proto != "udp" || c.Builder != routegroup.BuildReplicate || c.Every != 100*time.Millisecond ||
		c.Jitter != 0.1 || c.Burst != 12 || c.Failsafe != 500*time.Millisecond || c.Table != route.TableEnforce {
		t.Errorf("config %+v", c)
	}
	r.Spec.Enforcement.Table = spec.ModeOff
	if c, _ := Resolve(r, c.Endpoints); c.Table != route.TableObserve {
		t.Errorf("enforcement off: table %s, want observe (the field is still reported)", c.Table)
	}
}

// A selector's backends are its ready pods' IPs at the selector's port,
// sorted; a pod without an IP yet, or not ready, is left out.
func TestSelectorEndpoints(t *testing.T) {
	r := loadGroup(t, `apiVersion: setpoint.dev/v1alpha1
kind: RouteGroup
metadata: {name: vip, namespace: shop}
spec:
  vip: 127.100.0.1:8080/tcp
  backends: {selector: {app: checkout}, port: 9001}
`)
	pod := func(name, ip string) providers.Object {
		o := providers.Object{Address: addrs.Object{Provider: "kubernetes", Kind: workload.Pod, Namespace: "shop", Name: name}, Exists: true,
			Attributes: map[addrs.Path]values.Value{workload.PodReady: values.StringOf("True")}}
		if ip != "" {
			o.Attributes[workload.PodIP] = values.StringOf(ip)
		}
		return o
	}
	key := engine.ListKey(podList(r))
	unready, noCondition := pod("unready", "10.0.0.3"), pod("starting", "10.0.0.4")
	unready.Attributes[workload.PodReady] = values.StringOf("False")
	delete(noCondition.Attributes, workload.PodReady)
	obs := engine.Observation{Listed: map[string][]providers.Object{key: {pod("b", "10.0.0.2"), pod("pending", ""), pod("a", "10.0.0.1"), pod("v6", "fd00::1"), unready, noCondition}}}
	eps, why := endpoints(r, obs)
	if why != "" || !slices.Equal(eps, []string{"10.0.0.1:9001", "10.0.0.2:9001"}) {
		t.Errorf("endpoints %v (%s), want the two IPv4 pods at 9001", eps, why)
	}
	obs = engine.Observation{ListFailed: map[string]string{key: "forbidden"}}
	if _, why := endpoints(r, obs); why == "" {
		t.Error("a failed list gave endpoints")
	}
}

// A group whose target is the kubernetes provider runs on the cluster's
// eBPF agents: its config goes to a NodeAgentConfig for them, created
// with the agent named, and a node's report of a problem comes back as a
// note on the spec.
func TestInClusterGoesThroughTheNodeAgents(t *testing.T) {
	r := loadGroup(t, `apiVersion: setpoint.dev/v1alpha1
kind: RouteGroup
metadata: {name: vip, namespace: shop}
spec:
  target: {provider: kubernetes}
  vip: 127.100.0.1:8080/tcp
  backends: {endpoints: [127.0.0.1:9001]}
`)
	tick := &engine.Tick{DefaultProvider: "ebpf"}
	nac := addrs.Object{Provider: "kubernetes", Kind: nodeagent.Kind, Namespace: "shop", Name: "vip"}
	if got := (decider{}).Reads(r, "ebpf"); !slices.Equal(got, []addrs.Object{nac}) {
		t.Fatalf("reads %v, want %v", got, nac)
	}
	its, notes, errs := decider{}.Decide(tick, r, nil, engine.Observation{}, nil)
	if len(errs) > 0 || len(notes) > 0 || len(its) != 2 {
		t.Fatalf("intents %+v notes %v errors %v", its, notes, errs)
	}
	cfg, agent := its[0], its[1]
	if cfg.Attr != (addrs.Attr{Object: nac, Path: nodeagent.Config}) || cfg.Create == nil || cfg.Create.Attributes[nodeagent.Agent] != values.StringOf("ebpf") {
		t.Errorf("config intent %+v", cfg)
	}
	if c, err := route.Parse(cfg.Value.JSON()); err != nil || c.VIP != "127.100.0.1:8080" {
		t.Errorf("the NodeAgentConfig's config is no route config: %v %+v", err, c)
	}
	if agent.Attr != (addrs.Attr{Object: nac, Path: nodeagent.Agent}) || agent.Value != values.StringOf("ebpf") {
		t.Errorf("agent intent %+v", agent)
	}
	obs := engine.Observation{Objects: map[addrs.Object]providers.Object{nac: {Address: nac, Exists: true, Attributes: map[addrs.Path]values.Value{
		nodeagent.NodeAttr("node-a", "message"): values.StringOf("ok"),
		nodeagent.NodeAttr("node-b", "message"): values.StringOf("VIP 127.100.0.1:8080 is outside what this agent may route"),
	}}}}
	its, notes, _ = decider{}.Decide(tick, r, nil, obs, nil)
	if its[0].Create != nil {
		t.Error("an existing NodeAgentConfig is created again")
	}
	if len(notes) != 1 || notes[0].Message != "node node-b's eBPF agent: VIP 127.100.0.1:8080 is outside what this agent may route" {
		t.Errorf("notes %v, want node-b's report", notes)
	}
}
