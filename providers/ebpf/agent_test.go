//go:build linux

package ebpf

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/internal/bpftest"
	"github.com/setpoint-dev/setpoint/internal/kubetest"
	"github.com/setpoint-dev/setpoint/internal/testutil"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/kubernetes/agentcr"
	"github.com/setpoint-dev/setpoint/providers/nodeagent"
	"github.com/setpoint-dev/setpoint/providers/route"
)

func TestMain(m *testing.M) { kubetest.Main(m, kubetest.WithCRDs("../../deploy/crds")) }

// The DaemonSet mode end to end, on a real API server and this kernel: the
// agent takes the NodeAgentConfigs that select its node, routes their VIPs,
// reports each in its status entry, follows an edit, refuses a config it may
// not run (saying why in the status), ignores configs for other nodes, and
// releases a deleted one.
func TestAgentRunsFromNodeAgentConfigs(t *testing.T) {
	env := kubetest.Shared(t)
	ns := env.Namespace(t)
	dyn := env.Dynamic(t)
	ctx := context.Background()
	node := "node-" + strings.ToLower(strings.ReplaceAll(ns, "_", "-"))
	env.Apply(t, fmt.Sprintf("apiVersion: v1\nkind: Node\nmetadata: {name: %s, labels: {pool: edge}}\n", node))
	t.Cleanup(func() { _ = env.Clientset(t).CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}) })

	b := startBackend(t)
	p := configured(t)
	r := &agentcr.Reconciler{Dyn: dyn, Namespace: ns, Node: node, Agent: nodeagent.EBPF, Provider: p,
		Object: func(ns, name string) addrs.Object {
			return addrs.Object{Provider: Name, Kind: route.Kind, Namespace: ns, Name: name}
		},
		Attr: route.AttrConfig, Observed: func(o providers.Object) any { return route.Summary(o.Attributes) }, Key: route.SummaryKey, KeyEvery: time.Nanosecond, Refresh: time.Hour}
	nac := func(name string, c route.Config, selector string) {
		t.Helper()
		raw, _ := json.Marshal(c)
		env.Apply(t, fmt.Sprintf("apiVersion: setpoint.dev/v1alpha1\nkind: NodeAgentConfig\nmetadata: {name: %s, namespace: %s}\nspec: {agent: ebpf, nodeSelector: %s, config: %s}\n", name, ns, selector, raw))
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

	cfg := testConfig([]string{b.addr.String()})
	nac("checkout", cfg, "{pool: edge}")
	other := cfg
	other.VIP = "127.100.0.3:8080"
	nac("elsewhere", other, "{pool: gpu}")
	outside := cfg
	outside.VIP = "10.1.2.3:80"
	nac("outside", outside, "{}")
	sync()
	testutil.Eventually(t, 5*time.Second, "the VIP reaches its backend", func() bool { return reaches(cfg.VIP, b) })
	if _, err := bpftestConnect(other.VIP); err == nil {
		t.Error("a config for another node's pool was routed here")
	}
	st := status("checkout")
	if st == nil || st["message"] != "ok" || st["observedGeneration"] != int64(1) {
		t.Fatalf("checkout's status for this node: %v", st)
	}
	if s := status("outside"); s == nil || !strings.Contains(fmt.Sprint(s["message"]), "outside what this agent may route") {
		t.Fatalf("outside's status: %v, want the refusal", s)
	}
	if status("elsewhere") != nil {
		t.Error("this node reported on a config that does not select it")
	}
	// The loop's figures reach the report once it has ticked, as soon as
	// their key changed (KeyEvery is a nanosecond here), not at the next
	// refresh (an hour).
	testutil.Eventually(t, 5*time.Second, "the report carries the regime", func() bool {
		sync()
		obs, _ := status("checkout")["observed"].(map[string]any)
		return obs["regime"] == "laminar" && obs["backends"] == int64(1)
	})

	// An edit: observe only. The VIP is no longer rewritten.
	cfg.Table = route.TableObserve
	raw, _ := json.Marshal(map[string]any{"spec": map[string]any{"config": cfg}})
	if _, err := dyn.Resource(agentcr.GVR).Namespace(ns).Patch(ctx, "checkout", types.MergePatchType, raw, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	sync()
	testutil.Eventually(t, 5*time.Second, "observe stops the rewriting", func() bool {
		_, err := bpftestConnect(cfg.VIP)
		return err != nil
	})
	if st := status("checkout"); st["observedGeneration"] != int64(2) {
		t.Fatalf("after the edit: %v", st)
	}

	// Deleted: released, the group's loop ends.
	if err := dyn.Resource(agentcr.GVR).Namespace(ns).Delete(ctx, "checkout", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	sync()
	if o := p.Read(ctx, providers.ReadRequest{Addresses: []addrs.Object{r.Object(ns, "checkout")}}).Objects[0]; o.Exists {
		t.Fatal("a deleted NodeAgentConfig's group still runs")
	}
}

func bpftestConnect(vip string) (netip.AddrPort, error) {
	return bpftest.Connect(netip.MustParseAddrPort(vip))
}

var agentManifest sync.Once

// The DaemonSet's role is enough for the agent, and each of its rules is
// needed: with a rule removed, a pass fails.
func TestAgentRoleIsEnoughAndEachRuleNeeded(t *testing.T) {
	env := kubetest.Shared(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	manifest, err := os.ReadFile("../../deploy/agent-ebpf.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Cluster-wide and kept by the shared API server: once a process, so
	// the test runs again under -count (the loop below leaves the role as
	// the manifest has it).
	agentManifest.Do(func() {
		env.Apply(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: setpoint-system}\n---\n"+string(manifest))
	})
	node := "node-rbac-" + ns
	env.Apply(t, fmt.Sprintf("apiVersion: v1\nkind: Node\nmetadata: {name: %s}\n", node))
	t.Cleanup(func() { _ = env.Clientset(t).CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}) })
	b := startBackend(t)
	raw, _ := json.Marshal(testConfig([]string{b.addr.String()}))
	env.Apply(t, fmt.Sprintf("apiVersion: setpoint.dev/v1alpha1\nkind: NodeAgentConfig\nmetadata: {name: checkout, namespace: %s}\nspec: {agent: ebpf, config: %s}\n", ns, raw))

	sa := env.ConfigAs("system:serviceaccount:setpoint-system:setpoint-agent-ebpf", "system:serviceaccounts", "system:serviceaccounts:setpoint-system", "system:authenticated")
	dyn, err := dynamic.NewForConfig(sa)
	if err != nil {
		t.Fatal(err)
	}
	r := &agentcr.Reconciler{Dyn: dyn, Namespace: ns, Node: node, Agent: nodeagent.EBPF, Provider: configured(t),
		Object: func(ns, name string) addrs.Object {
			return addrs.Object{Provider: Name, Kind: route.Kind, Namespace: ns, Name: name}
		},
		Attr: route.AttrConfig, Observed: func(o providers.Object) any { return route.Summary(o.Attributes) }}
	var last error
	testutil.Eventually(t, 10*time.Second, "a pass with the DaemonSet's role", func() bool { last = r.Sync(ctx); return last == nil })

	admin := env.Dynamic(t)
	roles := admin.Resource(schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"})
	role, err := roles.Get(ctx, "setpoint-agent-ebpf", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	setRules := func(rs []any) {
		t.Helper()
		u, err := roles.Get(ctx, "setpoint-agent-ebpf", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedSlice(u.Object, rs, "rules"); err != nil {
			t.Fatal(err)
		}
		if _, err := roles.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range rules {
		without := append(slices.Clone(rules[:i]), rules[i+1:]...)
		setRules(without)
		testutil.Eventually(t, 10*time.Second, fmt.Sprintf("a pass fails without rule %v", rules[i]), func() bool {
			return r.Sync(ctx) != nil
		})
		setRules(rules)
		testutil.Eventually(t, 10*time.Second, "a pass with the whole role again", func() bool { return r.Sync(ctx) == nil })
	}
}
