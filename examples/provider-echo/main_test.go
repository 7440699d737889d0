package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/plugin"
)

// TestEchoOverThePluginProtocol builds this provider, starts it as setpoint
// would (found on a plugin path, as a subprocess) and drives it.
func TestEchoOverThePluginProtocol(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "setpoint-provider-echo")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	m := &plugin.Manager{PluginPath: []string{dir}, Timeout: 10 * time.Second}
	defer m.Close()
	p := m.Provider("echo", &providers.ConfigureRequest{Config: []byte(`{}`)})
	ctx := context.Background()
	replicas, app := addrs.MustPath("spec.replicas"), addrs.MustPath(`metadata.labels["app"]`)
	sc, diags := p.Schema(ctx)
	if len(diags) > 0 || sc.Name != "echo" || sc.Version != "0.2.0" || len(sc.Kinds) != 1 || sc.Kinds[0].Attributes[0].Path != replicas || sc.Kinds[0].Attributes[0].Type != values.Count {
		t.Fatalf("schema: %+v %v", sc, diags)
	}
	a := providers.Address{Provider: "echo", Kind: "Deployment", Namespace: "shop", Name: "checkout"}
	if r := p.Read(ctx, providers.ReadRequest{Now: time.Now(), Addresses: []providers.Address{a}}); len(r.Objects) != 1 || r.Objects[0].Exists {
		t.Fatalf("read before apply: %+v", r)
	}
	create := providers.ObjectChange{Address: a, Action: action.Create, Manager: "setpoint", Changed: []addrs.Path{replicas},
		Attributes: map[addrs.Path]values.Value{replicas: values.CountOf(3), app: values.StringOf("checkout")}}
	// A dry run answers what would be, and changes nothing.
	pc := p.PlanChange(ctx, providers.PlanChangeRequest{Now: time.Now(), Changes: []providers.ObjectChange{create}})
	if len(pc.Results) != 1 || pc.Results[0].Err != "" || pc.Results[0].After[replicas] != values.CountOf(3) {
		t.Fatalf("plan: %+v", pc)
	}
	if r := p.Read(ctx, providers.ReadRequest{Now: time.Now(), Addresses: []providers.Address{a}}); r.Objects[0].Exists {
		t.Fatalf("the dry run created the object: %+v", r)
	}
	res := p.Apply(ctx, providers.ApplyRequest{Now: time.Now(), Changes: []providers.ObjectChange{create}})
	if len(res.Results) != 1 || res.Results[0].Err != "" || res.Results[0].After[app] != values.StringOf("checkout") {
		t.Fatalf("apply: %+v", res)
	}
	r := p.Read(ctx, providers.ReadRequest{Now: time.Now(), Addresses: []providers.Address{a}})
	if o := r.Objects[0]; !o.Exists || o.Attributes[replicas] != values.CountOf(3) || o.Managers[replicas] != "setpoint" || o.Generation != 1 || o.Labels["app"] != "checkout" {
		t.Fatalf("read after apply: %+v", o)
	}
	// Another manager's change to a field setpoint owns is a conflict
	// unless forced.
	other := providers.ObjectChange{Address: a, Action: action.Update, Manager: "kubectl", Changed: []addrs.Path{replicas},
		Attributes: map[addrs.Path]values.Value{replicas: values.CountOf(5)}}
	pc = p.PlanChange(ctx, providers.PlanChangeRequest{Now: time.Now(), Changes: []providers.ObjectChange{other}})
	if x := pc.Results[0]; x.Err == "" || len(x.Conflicts) != 1 || x.Conflicts[0] != (providers.Conflict{Path: replicas, Manager: "setpoint"}) {
		t.Fatalf("conflict: %+v", x)
	}
	other.Force = true
	if x := p.Apply(ctx, providers.ApplyRequest{Now: time.Now(), Changes: []providers.ObjectChange{other}}).Results[0]; x.Err != "" || x.After[replicas] != values.CountOf(5) {
		t.Fatalf("forced: %+v", x)
	}
	// A restore crosses the protocol (version 3): the user's value comes
	// back and the field is nobody's, in one change.
	take := providers.ObjectChange{Address: a, Action: action.Update, Manager: "setpoint", Force: true, Changed: []addrs.Path{replicas},
		Attributes: map[addrs.Path]values.Value{replicas: values.CountOf(7)}}
	if x := p.Apply(ctx, providers.ApplyRequest{Now: time.Now(), Changes: []providers.ObjectChange{take}}).Results[0]; x.Err != "" {
		t.Fatalf("take: %+v", x)
	}
	restore := providers.ObjectChange{Address: a, Action: action.Update, Manager: "setpoint", Restored: map[addrs.Path]values.Value{replicas: values.CountOf(5)}}
	if x := p.Apply(ctx, providers.ApplyRequest{Now: time.Now(), Changes: []providers.ObjectChange{restore}}).Results[0]; x.Err != "" {
		t.Fatalf("restore: %+v", x)
	}
	if o := p.Read(ctx, providers.ReadRequest{Now: time.Now(), Addresses: []providers.Address{a}}).Objects[0]; o.Attributes[replicas] != values.CountOf(5) || o.Managers[replicas] != "" {
		t.Fatalf("after the restore: %v, manager %q; want the user's 5, nobody's", o.Attributes[replicas], o.Managers[replicas])
	}
	// A field both set and restored is refused whole, on the wire.
	both := restore
	both.Attributes, both.Changed = map[addrs.Path]values.Value{replicas: values.CountOf(9)}, []addrs.Path{replicas}
	if x := p.Apply(ctx, providers.ApplyRequest{Now: time.Now(), Changes: []providers.ObjectChange{both}}).Results[0]; x.Err == "" {
		t.Fatal("a field both set and restored was taken")
	}
	// kubectl's again, for what follows.
	if x := p.Apply(ctx, providers.ApplyRequest{Now: time.Now(), Changes: []providers.ObjectChange{other}}).Results[0]; x.Err != "" {
		t.Fatalf("kubectl: %+v", x)
	}
	l := p.List(ctx, providers.ListRequest{Now: time.Now(), Provider: "echo", Kind: "Deployment", Selector: map[string]string{"app": "checkout"}})
	if len(l.Diagnostics) > 0 || len(l.Objects) != 1 || l.Objects[0].Address != a || l.Objects[0].Managers[replicas] != "kubectl" {
		t.Fatalf("list: %+v", l)
	}
	if l := p.List(ctx, providers.ListRequest{Now: time.Now(), Provider: "echo", Kind: "Deployment", Selector: map[string]string{"app": "cart"}}); len(l.Objects) != 0 {
		t.Fatalf("list app=cart: %+v", l)
	}
	del := p.Apply(ctx, providers.ApplyRequest{Now: time.Now(), Changes: []providers.ObjectChange{{Address: a, Action: action.Delete, Manager: "setpoint"}}})
	if del.Results[0].Err != "" || p.Read(ctx, providers.ReadRequest{Now: time.Now(), Addresses: []providers.Address{a}}).Objects[0].Exists {
		t.Fatalf("delete: %+v", del)
	}

	pid := m.Pid("echo")
	if pid == 0 {
		t.Fatal("no provider process")
	}
	m.Close()
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if syscall.Kill(pid, 0) == nil {
		t.Fatalf("provider process %d still running 5 s after Close", pid)
	}
}
