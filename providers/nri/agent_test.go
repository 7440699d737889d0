package nri

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/decide/nodepolicy"
	"github.com/setpoint-dev/setpoint/internal/kubetest"
	"github.com/setpoint-dev/setpoint/internal/nritest"
	"github.com/setpoint-dev/setpoint/internal/testutil"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/kubernetes/agentcr"
	"github.com/setpoint-dev/setpoint/providers/nodeagent"
	"github.com/setpoint-dev/setpoint/providers/noderes"
)

func TestMain(m *testing.M) {
	if os.Getenv(allocEnv) != "" {
		allocChild() // a process in a test's memory cgroup (workingset_test.go)
		return
	}
	kubetest.Main(m, kubetest.WithCRDs("../../deploy/crds"))
}

// The DaemonSet mode end to end, on a real API server and the runtime's
// real NRI socket: the agent takes the NodeAgentConfig that selects its
// node and places the node's containers, reports its pools and problems
// in its status entry, refuses a second policy for the same node (saying
// why), ignores configs for other nodes, and lets go of a deleted one
// (containers back on every CPU).
func TestAgentRunsFromNodeAgentConfigs(t *testing.T) {
	env := kubetest.Shared(t)
	ns := env.Namespace(t)
	dyn := env.Dynamic(t)
	ctx := context.Background()
	node := "node-" + strings.ToLower(strings.ReplaceAll(ns, "_", "-"))
	env.Apply(t, fmt.Sprintf("apiVersion: v1\nkind: Node\nmetadata: {name: %s, labels: {pool: compute}}\n", node))
	t.Cleanup(func() { _ = env.Clientset(t).CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}) })

	rt := nritest.Start(t)
	shop := nritest.Pod("p1", "shop", "checkout-7d9f-abcde", nil)
	web := nritest.Pod("p2", "web", "front-1234-xyzab", nil)
	rt.Add(shop, nritest.Container(shop, "s1", "app", 1000, 0))
	rt.Add(web, nritest.Container(web, "w1", "app", 500, 0))
	p := New()
	if err := p.Start(Config{Socket: rt.Socket, PluginIdx: "10", Topology: "2x2x2", Cache: filepath.Join(t.TempDir(), "cache.json")}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown() })
	r := &agentcr.Reconciler{Dyn: dyn, Namespace: ns, Node: node, Agent: nodeagent.NRI, Provider: p,
		Object: func(ns, name string) addrs.Object {
			return addrs.Object{Provider: Name, Kind: noderes.Kind, Namespace: ns, Name: name}
		},
		Attr: noderes.AttrConfig, Observed: func(o providers.Object) any { return Summary(o.Attributes) }, Refresh: time.Hour}
	nac := func(name string, pol nodepolicy.Policy, selector string) {
		t.Helper()
		raw, _ := json.Marshal(noderes.Config{Policy: pol})
		env.Apply(t, fmt.Sprintf("apiVersion: setpoint.dev/v1alpha1\nkind: NodeAgentConfig\nmetadata: {name: %s, namespace: %s}\nspec: {agent: nri, nodeSelector: %s, config: %s}\n", name, ns, selector, raw))
	}
	status := func(name string) map[string]any {
		t.Helper()
		u, err := dyn.Resource(agentcr.GVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		entries, _, _ := unstructured.NestedSlice(u.Object, "status", "nodes")
		for _, e := range entries {
			if m := e.(map[string]any); m["name"] == node {
				return m
			}
		}
		return nil
	}
	sync := func() {
		t.Helper()
		if err := r.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	pol := shopPolicy(4, nodepolicy.Enforce).Config.Policy
	nac("latency", pol, "{pool: compute}")
	nac("gpu-only", pol, "{pool: gpu}")
	sync()
	if res := rt.Resources(); res["s1"].CPUs != "0" || res["w1"].CPUs != "1-7" {
		t.Fatalf("after the first pass: %v, want s1 on 0 and w1 on 1-7", res)
	}
	st := status("latency")
	if st == nil || st["message"] != "ok" {
		t.Fatalf("latency's status: %v", st)
	}
	obs, _ := st["observed"].(map[string]any)
	if pools, _ := obs["pools"].(map[string]any); pools["shop"] != "0 (1 containers)" || obs["topology"] != "2x2x2" {
		t.Fatalf("latency's report: %v", obs)
	}
	if status("gpu-only") != nil {
		t.Error("this node reported on a config that does not select it")
	}

	// A second policy for the node is refused, in its own status.
	nac("second", pol, "{}")
	sync()
	if s := status("second"); s == nil || !strings.Contains(fmt.Sprint(s["message"]), "already runs") {
		t.Fatalf("second's status: %v, want the refusal", s)
	}

	// An edit whose minimum does not fit: the problem, with its field, in
	// the status (the kind turns it into a note at the spec's position).
	big := pol
	big.Pools = []nodepolicy.Pool{{Name: "shop", Namespaces: []string{"shop"}, MinCPUs: 8, MaxCPUs: 8}}
	raw, _ := json.Marshal(map[string]any{"spec": map[string]any{"config": noderes.Config{Policy: big}}})
	if _, err := dyn.Resource(agentcr.GVR).Namespace(ns).Patch(ctx, "latency", types.MergePatchType, raw, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	sync()
	testutil.Eventually(t, 5*time.Second, "the problem in the status", func() bool {
		return strings.HasPrefix(fmt.Sprint(status("latency")["message"]), "spec.pools.0.minCPUs: minCPUs 8 does not fit")
	})

	// Deleted: the agent lets go, containers are back on every CPU.
	for _, name := range []string{"latency", "second"} {
		if err := dyn.Resource(agentcr.GVR).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	sync()
	testutil.Eventually(t, 10*time.Second, "containers back on every CPU", func() bool {
		res := rt.Resources()
		return res["s1"].CPUs == "0-7" && res["w1"].CPUs == "0-7"
	})
}
