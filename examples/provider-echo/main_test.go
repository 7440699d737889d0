package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

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
	sc, diags := p.Schema(ctx)
	if len(diags) > 0 || sc.Name != "echo" || sc.Version != "0.1.0" {
		t.Fatalf("schema: %+v %v", sc, diags)
	}
	a := providers.Address{Provider: "echo", Kind: "Deployment", Namespace: "shop", Name: "checkout"}
	if r := p.Read(ctx, providers.ReadRequest{Now: time.Now(), Addresses: []providers.Address{a}}); len(r.Objects) != 1 || r.Objects[0].Exists {
		t.Fatalf("read before apply: %+v", r)
	}
	res := p.Apply(ctx, providers.ApplyRequest{Now: time.Now(), Changes: []providers.Change{{Address: a, Attribute: "spec.replicas", Value: "3", Manager: "setpoint"}}})
	if len(res.Results) != 1 || res.Results[0].Err != "" {
		t.Fatalf("apply: %+v", res)
	}
	r := p.Read(ctx, providers.ReadRequest{Now: time.Now(), Addresses: []providers.Address{a}})
	if o := r.Objects[0]; !o.Exists || o.Attributes["spec.replicas"] != "3" || o.Managers["spec.replicas"] != "setpoint" || o.Generation != 1 {
		t.Fatalf("read after apply: %+v", o)
	}
	pid := m.Pid("echo")
	if pid == 0 {
		t.Fatal("no provider process")
	}
	m.Close()
	time.Sleep(100 * time.Millisecond)
	if syscall.Kill(pid, 0) == nil {
		t.Fatalf("provider process %d still running after Close", pid)
	}
}
