package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/internal/nritest"
)

// A NodePolicy planned and applied through the real binary and its NRI
// provider subprocess, plugged into the runtime's real NRI socket: the
// plan creates the policy with its pools; apply places the node's
// containers on their pools' CPUs; the next plan changes nothing and
// shows the pools the node runs.
func TestNodePolicyPlanAndApplyThroughTheAgent(t *testing.T) {
	rt := nritest.Start(t)
	shop := nritest.Pod("p1", "shop", "checkout-7d9f-abcde", nil)
	web := nritest.Pod("p2", "web", "front-1234-xyzab", nil)
	rt.Add(shop, nritest.Container(shop, "s1", "app", 1000, 0))
	rt.Add(web, nritest.Container(web, "w1", "app", 500, 0))
	dir := t.TempDir()
	env := fmt.Sprintf("apiVersion: setpoint.dev/v1alpha1\nkind: Environment\nmetadata: {name: node}\nspec:\n  providers: [{name: nri, config: {socket: %q, topology: 2x2x2}}]\n  state: {path: %s}\n", rt.Socket, filepath.Join(dir, "state.json"))
	np := "apiVersion: setpoint.dev/v1alpha1\nkind: NodePolicy\nmetadata: {name: latency}\nspec:\n  reserved: {cpus: \"3\"}\n  pools:\n    - {name: shop, namespaces: [shop], minCPUs: 1, maxCPUs: 4}\n  enforcement: {cpus: enforce}\n"
	for name, body := range map[string]string{"env.yaml": env, "np.yaml": np} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code := runCLI(t, "plan", dir)
	if code != 0 && code != 2 {
		t.Fatalf("plan: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"+ nri:NodePolicy/default/latency", "1 pool(s) (shop 1–4 CPUs)", `reserved CPUs "3"`, "cpus enforce"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s\n%s", want, out, errOut)
		}
	}
	if r := rt.Resources(); r["s1"].CPUs != "" {
		t.Fatalf("the plan placed a container: %v", r)
	}
	out, errOut, code = runCLI(t, "apply", "--auto-approve", dir)
	if code != 0 {
		t.Fatalf("apply: exit %d\n%s\n%s", code, out, errOut)
	}
	// shop: CPU 0; the default pool the rest but the reserved 3.
	if r := rt.Resources(); r["s1"].CPUs != "0" || r["w1"].CPUs != "1-2,4-7" {
		t.Fatalf("after apply: %v, want s1 on 0 and w1 on 1-2,4-7", r)
	}
	out, errOut, code = runCLI(t, "plan", "--detailed-exitcode", dir)
	if code != 0 {
		t.Fatalf("second plan: exit %d, want no change\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, `shop: CPUs "0", 1 container(s), 1000m requested`) {
		t.Errorf("the second plan does not show the node's pools:\n%s\n%s", out, errOut)
	}
}
