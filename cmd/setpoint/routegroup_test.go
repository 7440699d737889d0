//go:build linux

package main

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/internal/bpftest"
)

// A RouteGroup planned and applied through the real binary and its eBPF
// provider subprocess, in this kernel: the plan creates the group with
// its numbers; apply hands the config over and the agent routes the VIP
// while it runs; it exits cleanly when apply ends, detaching the program.
func TestRouteGroupPlanAndApplyThroughTheAgent(t *testing.T) {
	cg := bpftest.Cgroup(t)
	servers := bpftest.Servers(t, 2)
	dir := t.TempDir()
	env := fmt.Sprintf("apiVersion: setpoint.dev/v1alpha1\nkind: Environment\nmetadata: {name: node}\nspec:\n  providers: [{name: ebpf, config: {cgroup: %q}}]\n  state: {path: %s}\n", cg, filepath.Join(dir, "state.json"))
	rg := fmt.Sprintf("apiVersion: setpoint.dev/v1alpha1\nkind: RouteGroup\nmetadata: {name: checkout-vip, namespace: shop}\nspec:\n  vip: 127.100.0.1:8080/tcp\n  backends: {endpoints: [%q, %q]}\n  table: {slots: 65537, builder: maglev}\n  enforcement: {table: enforce}\n", servers[0], servers[1])
	for name, body := range map[string]string{"env.yaml": env, "rg.yaml": rg} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code := runCLI(t, "plan", dir)
	if code != 2 && code != 0 {
		t.Fatalf("plan: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"ebpf:RouteGroup/shop/checkout-vip", "127.100.0.1:8080 over 2 backend(s)", "maglev table of 65537 slots", "table enforce"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s\n%s", want, out, errOut)
		}
	}
	out, errOut, code = runCLI(t, "apply", "--auto-approve", dir)
	if code != 0 {
		t.Fatalf("apply: exit %d\n%s\n%s", code, out, errOut)
	}
	// The agent exited with apply: a clean exit detaches the program.
	if _, err := bpftest.Connect(netip.MustParseAddrPort("127.100.0.1:8080")); err == nil {
		t.Error("after the agent's clean exit the VIP is still routed")
	}
	out, _, _ = runCLI(t, "plan", dir)
	t.Logf("second plan:\n%s", out)
}
