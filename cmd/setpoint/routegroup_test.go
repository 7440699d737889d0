//go:build linux

package main

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/internal/bpftest"
	"github.com/setpoint-dev/setpoint/internal/testutil"
)

// A RouteGroup planned, then run by watch through the real binary and its
// eBPF agent subprocess, in this kernel: the plan creates the group with
// its numbers; under watch the agent routes the VIP to the backends; when
// watch stops cleanly the agent detaches the program.
func TestRouteGroupPlanAndWatchThroughTheAgent(t *testing.T) {
	cg := bpftest.Cgroup(t)
	servers := bpftest.Servers(t, 2)
	dir := t.TempDir()
	// Pinned, so only the agent's clean exit (not its process ending)
	// detaches the program; unmounting the bpffs drops whatever is left.
	pins := bpftest.BPFFS(t)
	env := fmt.Sprintf("apiVersion: setpoint.dev/v1alpha1\nkind: Environment\nmetadata: {name: node}\nspec:\n  providers: [{name: ebpf, config: {cgroup: %q, pinDir: %q}}]\n  state: {path: %s}\n", cg, filepath.Join(pins, "setpoint"), filepath.Join(dir, "state.json"))
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
	for _, want := range []string{"+ ebpf:RouteGroup/shop/checkout-vip", "127.100.0.1:8080 over 2 backend(s)", "maglev table of 65537 slots", "table enforce"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s\n%s", want, out, errOut)
		}
	}
	vip := netip.MustParseAddrPort("127.100.0.1:8080")
	if _, err := bpftest.Connect(vip); err == nil {
		t.Fatal("the plan's agent left the VIP routed")
	}
	w := startProc(t, "watch", dir)
	testutil.Eventually(t, 30*time.Second, "the VIP routed to a backend", func() bool {
		peer, err := bpftest.Connect(vip)
		return err == nil && (peer == servers[0] || peer == servers[1])
	})
	w.stop(t, 20*time.Second)
	if _, err := bpftest.Connect(vip); err == nil {
		t.Error("after watch stopped cleanly the VIP is still routed")
	}
}
