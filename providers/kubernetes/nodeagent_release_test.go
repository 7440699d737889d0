package kubernetes

import (
	"testing"

	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/internal/kubetest"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/kubernetes/agentcr"
)

// A released RouteGroup's NodeAgentConfig loses its spec.config (the
// agents then stop routing the VIP, as a local release does), keeps
// spec.agent handed back, and takes the config again when the spec comes
// back. A released NodePolicy's loses its config too (its agents give the
// containers their CPUs back).
func TestReleasedEBPFAgentConfigIsRemoved(t *testing.T) {
	env := kubetest.Shared(t)
	ns := env.Namespace(t)
	p := newProvider(t, env.Config())
	cfg, _ := values.StructuredOf([]byte(`{"vip":"127.100.0.1:8080","proto":"tcp"}`))
	pools, _ := values.StructuredOf([]byte(`{"pools":[{"name":"latency","minCPUs":2,"maxCPUs":8}]}`))
	create := func(name, agent string, v values.Value) addrs.Object {
		t.Helper()
		a := addr(KindNodeAgent, ns, name)
		if res := apply(t, p, providers.ObjectChange{Address: a, Action: action.Create,
			Attributes: map[addrs.Path]values.Value{AttrAgent: values.StringOf(agent), AttrAgentConfig: v}, Changed: []addrs.Path{AttrAgent, AttrAgentConfig}}); res.Err != "" {
			t.Fatal(res.Err)
		}
		return a
	}
	release := func(a addrs.Object) {
		t.Helper()
		if res := apply(t, p, providers.ObjectChange{Address: a, Released: []addrs.Path{AttrAgent, AttrAgentConfig}}); res.Err != "" {
			t.Fatal(res.Err)
		}
	}
	rg, np := create("checkout-vip", "ebpf", cfg), create("pools", "nri", pools)
	// The dry run of the release is accepted and changes nothing.
	if r := p.PlanChange(ctxT(t), providers.PlanChangeRequest{Changes: []providers.ObjectChange{withManager(providers.ObjectChange{Address: rg,
		Released: []addrs.Path{AttrAgent, AttrAgentConfig}})}}).Results[0]; r.Err != "" {
		t.Fatalf("dry run of the release: %s", r.Err)
	}
	if o := read(t, p, rg); o.Attributes[AttrAgentConfig] != cfg {
		t.Fatalf("a dry run removed the config: %v", o.Attributes)
	}
	release(rg)
	release(np)

	o := read(t, p, rg)
	if v, ok := o.Attributes[AttrAgentConfig]; ok {
		t.Fatalf("a released RouteGroup's config is still there: %v (manager %q)", v, o.Managers[AttrAgentConfig])
	}
	if o.Attributes[AttrAgent] != values.StringOf("ebpf") || o.Managers[AttrAgent] != HandbackManager {
		t.Fatalf("spec.agent: %v managed by %q, want ebpf handed back", o.Attributes[AttrAgent], o.Managers[AttrAgent])
	}
	agent := &agentcr.Client{Dyn: env.Dynamic(t), Namespace: ns, Name: "checkout-vip", Node: "node-a"}
	if c, err := agent.Get(ctxT(t)); err != nil || len(c.Config) != 0 {
		t.Fatalf("the agents read %q %v, want no config", c.Config, err)
	}
	if o := read(t, p, np); func() bool { _, ok := o.Attributes[AttrAgentConfig]; return ok }() {
		t.Fatalf("a released NodePolicy's config is still there: %v managed by %q", o.Attributes[AttrAgentConfig], o.Managers[AttrAgentConfig])
	}
	nri := &agentcr.Client{Dyn: env.Dynamic(t), Namespace: ns, Name: "pools", Node: "node-a"}
	if c, err := nri.Get(ctxT(t)); err != nil || len(c.Config) != 0 {
		t.Fatalf("the NRI agents read %q %v, want no config", c.Config, err)
	}

	// The spec back: its config is missing, so planned and applied again.
	if res := apply(t, p, providers.ObjectChange{Address: rg, Attributes: map[addrs.Path]values.Value{AttrAgent: values.StringOf("ebpf"), AttrAgentConfig: cfg},
		Changed: []addrs.Path{AttrAgentConfig}}); res.Err != "" {
		t.Fatal(res.Err)
	}
	if o := read(t, p, rg); o.Attributes[AttrAgentConfig] != cfg || o.Managers[AttrAgentConfig] != Manager {
		t.Fatalf("after the spec came back: %v managed by %q", o.Attributes[AttrAgentConfig], o.Managers[AttrAgentConfig])
	}
}
