//go:build linux

package ebpf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/internal/bpftest"
	"github.com/setpoint-dev/setpoint/internal/kubetest"
	"github.com/setpoint-dev/setpoint/internal/testutil"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/kubernetes"
	"github.com/setpoint-dev/setpoint/providers/kubernetes/agentcr"
	"github.com/setpoint-dev/setpoint/providers/nodeagent"
	"github.com/setpoint-dev/setpoint/providers/route"
)

// cluster is a namespace and a node on the shared API server, with what a
// test needs to run agents there.
type cluster struct {
	env  *kubetest.Env
	ns   string
	node string
}

func newCluster(t *testing.T) *cluster {
	env := kubetest.Shared(t)
	ns := env.Namespace(t)
	node := "node-" + strings.ToLower(strings.ReplaceAll(ns, "_", "-"))
	env.Apply(t, fmt.Sprintf("apiVersion: v1\nkind: Node\nmetadata: {name: %s}\n", node))
	t.Cleanup(func() {
		_ = env.Clientset(t).CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{})
	})
	return &cluster{env: env, ns: ns, node: node}
}

// agent is the DaemonSet agent's reconciler on p, as `setpoint agent ebpf`
// builds it.
func (c *cluster) agent(t *testing.T, p *Provider) *agentcr.Reconciler {
	return &agentcr.Reconciler{Dyn: c.env.Dynamic(t), Namespace: c.ns, Node: c.node, Agent: nodeagent.EBPF, Provider: p,
		Object: func(ns, name string) addrs.Object {
			return addrs.Object{Provider: Name, Kind: route.Kind, Namespace: ns, Name: name}
		},
		Attr: route.AttrConfig, Observed: func(o providers.Object) any { return route.Summary(o.Attributes) }, Refresh: time.Hour}
}

func (c *cluster) nac(t *testing.T, name string, cfg route.Config) {
	t.Helper()
	raw, _ := json.Marshal(cfg)
	c.env.Apply(t, fmt.Sprintf("apiVersion: setpoint.dev/v1alpha1\nkind: NodeAgentConfig\nmetadata: {name: %s, namespace: %s}\nspec: {agent: ebpf, config: %s}\n", name, c.ns, raw))
}

// message is this node's status message on a NodeAgentConfig.
func (c *cluster) message(t *testing.T, name string) string {
	t.Helper()
	return fmt.Sprint(c.entry(t, name)["message"])
}

// entry is this node's status entry on a NodeAgentConfig.
func (c *cluster) entry(t *testing.T, name string) map[string]any {
	t.Helper()
	u, err := c.env.Dynamic(t).Resource(agentcr.GVR).Namespace(c.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	entries, _, _ := unstructured.NestedSlice(u.Object, "status", "nodes")
	for _, e := range entries {
		if m := e.(map[string]any); m["name"] == c.node {
			return m
		}
	}
	return nil
}

func syncOnce(t *testing.T, r *agentcr.Reconciler) {
	t.Helper()
	if err := r.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A RouteGroup released in a cluster stops routing, as a release on an
// agent setpoint runs itself does: the engine's release goes through the
// kubernetes provider to the NodeAgentConfig, the agent sees its config
// gone, stops the group and removes the VIP entry. The spec back, the
// config is applied again and the VIP routes.
func TestClusterReleaseStopsRouting(t *testing.T) {
	c := newCluster(t)
	kp, err := kubernetes.NewForConfig(c.env.Config())
	if err != nil {
		t.Fatal(err)
	}
	b := startBackend(t)
	p := configured(t)
	r := c.agent(t, p)
	clock := time.Now()
	r.Now = func() time.Time { return clock }
	cfg := testConfig([]string{b.addr.String()})
	raw, _ := json.Marshal(cfg)
	v, err := values.StructuredOf(raw)
	if err != nil {
		t.Fatal(err)
	}
	nac := addrs.Object{Provider: "kubernetes", Kind: nodeagent.Kind, Namespace: c.ns, Name: "checkout-vip"}
	engineApply := func(ch providers.ObjectChange) {
		t.Helper()
		ch.Address, ch.Manager = nac, kubernetes.Manager
		if res := kp.Apply(context.Background(), providers.ApplyRequest{Now: time.Now(), Changes: []providers.ObjectChange{ch}}).Results[0]; res.Err != "" {
			t.Fatal(res.Err)
		}
	}
	// What the engine sends for a RouteGroup with target kubernetes.
	engineApply(providers.ObjectChange{Action: action.Create, Attributes: map[addrs.Path]values.Value{nodeagent.Agent: values.StringOf(nodeagent.EBPF), nodeagent.Config: v},
		Changed: []addrs.Path{nodeagent.Agent, nodeagent.Config}})
	syncOnce(t, r)
	testutil.Eventually(t, 5*time.Second, "the VIP reaches its backend", func() bool { return reaches(cfg.VIP, b) })

	// The spec deleted: the engine releases what it applied.
	engineApply(providers.ObjectChange{Action: action.Update, Released: []addrs.Path{nodeagent.Agent, nodeagent.Config}})
	syncOnce(t, r)
	if _, err := bpftestConnect(cfg.VIP); err == nil {
		t.Fatal("a released RouteGroup's VIP still routes on the node")
	}
	if exists(p, r.Object(c.ns, "checkout-vip")) {
		t.Fatal("a released RouteGroup's loop still runs on the node")
	}
	if m := c.message(t, "checkout-vip"); !strings.Contains(m, "no spec.config") {
		t.Fatalf("the node's report after the release: %q", m)
	}
	// Said once: released configs stay, and every node refreshing its
	// report on each would load the API server for nothing.
	r.Refresh = 0
	said := c.entry(t, "checkout-vip")["updated"]
	clock = clock.Add(time.Minute)
	syncOnce(t, r)
	if again := c.entry(t, "checkout-vip")["updated"]; again != said {
		t.Fatalf("a released config's report was refreshed: %v, then %v", said, again)
	}

	// The spec back: the config is missing, so the engine applies it again.
	engineApply(providers.ObjectChange{Action: action.Update, Attributes: map[addrs.Path]values.Value{nodeagent.Agent: values.StringOf(nodeagent.EBPF), nodeagent.Config: v},
		Changed: []addrs.Path{nodeagent.Config}})
	syncOnce(t, r)
	testutil.Eventually(t, 5*time.Second, "the VIP routes again", func() bool { return reaches(cfg.VIP, b) })
	if m := c.message(t, "checkout-vip"); m != "ok" {
		t.Fatalf("the node's report once the config is back: %q", m)
	}
}

// An agent that stops without cleanup (a crash: loops gone, pins left)
// leaves its VIPs on the failsafe. What changed meanwhile is settled when
// the next agent starts: a config deleted is released and its VIP removed,
// a config that names another VIP now has its old one removed, and the
// one unchanged is resumed and routed by its config.
func TestAgentRestartSettlesConfigsChangedWhileDown(t *testing.T) {
	c := newCluster(t)
	cg := bpftest.Cgroup(t)
	pins := bpftest.BPFFS(t) + "/setpoint"
	ba, bb, bc := startBackend(t), startBackend(t), startBackend(t)
	gone, kept, moved := testConfig([]string{ba.addr.String()}), testConfig([]string{bb.addr.String()}), testConfig([]string{bc.addr.String()})
	gone.VIP, kept.VIP, moved.VIP = "127.100.0.1:8080", "127.100.0.2:8080", "127.100.0.3:8080"
	c.nac(t, "gone", gone)
	c.nac(t, "kept", kept)
	c.nac(t, "moved", moved)

	first := pinnedAgent(t, cg, pins)
	syncOnce(t, c.agent(t, first))
	testutil.Eventually(t, 5*time.Second, "the three VIPs routed", func() bool {
		return reaches(gone.VIP, ba) && reaches(kept.VIP, bb) && reaches(moved.VIP, bc)
	})
	if err := first.Leave(); err != nil {
		t.Fatal(err)
	}

	// While no agent runs: one config deleted, one moved to another VIP.
	dyn := c.env.Dynamic(t)
	if err := dyn.Resource(agentcr.GVR).Namespace(c.ns).Delete(context.Background(), "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	oldVIP := moved.VIP
	moved.VIP = "127.100.0.4:8080"
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"config": moved}})
	if _, err := dyn.Resource(agentcr.GVR).Namespace(c.ns).Patch(context.Background(), "moved", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// The failsafe still routes them: what the next agent must settle.
	if !reaches(gone.VIP, ba) || !reaches(oldVIP, bc) {
		t.Fatal("no agent runs, and the pinned dataplane's failsafe does not route its VIPs")
	}

	second := pinnedAgent(t, cg, pins)
	t.Cleanup(func() { _ = second.Shutdown() })
	syncOnce(t, c.agent(t, second))
	if _, err := bpftestConnect(gone.VIP); err == nil {
		t.Error("the VIP of a config deleted while no agent ran still routes")
	}
	if _, err := bpftestConnect(oldVIP); err == nil {
		t.Error("the VIP a config no longer names still routes")
	}
	testutil.Eventually(t, 5*time.Second, "the kept and the moved config routed", func() bool {
		return reaches(kept.VIP, bb) && reaches(moved.VIP, bc)
	})
	if d := second.Read(context.Background(), providers.ReadRequest{}).Diagnostics; len(d) != 0 {
		t.Fatalf("after the first pass: %v", d)
	}

	// Crashed again: the cleanup takes everything, the owners' record too.
	if err := second.Leave(); err != nil {
		t.Fatal(err)
	}
	if err := Cleanup(pins, DefaultGroups, DefaultSlots); err != nil {
		t.Fatalf("cleanup of a crashed agent's pins: %v", err)
	}
	if _, err := os.Stat(pins); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the pin directory after a cleanup: %v", err)
	}
	if _, err := bpftestConnect(kept.VIP); err == nil {
		t.Fatal("a VIP still routes after the cleanup")
	}
}

// A clean exit leaves nothing pinned, the owners' record included, and a
// local release of a resumed group's config removes its VIP: the entry is
// setpoint's whether this agent started the group or resumed it.
func TestReleaseOfAResumedGroupAndCleanExit(t *testing.T) {
	cg := bpftest.Cgroup(t)
	pins := bpftest.BPFFS(t) + "/setpoint"
	b := startBackend(t)
	first := pinnedAgent(t, cg, pins)
	cfg := testConfig([]string{b.addr.String()})
	if err := apply(t, first, change(t, cfg, action.Create)); err != "" {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "the VIP reaches its backend", func() bool { return reaches(cfg.VIP, b) })
	if err := first.Leave(); err != nil {
		t.Fatal(err)
	}

	second := pinnedAgent(t, cg, pins)
	t.Cleanup(func() { _ = second.Shutdown() })
	held, err := second.Resumed(context.Background())
	if err != nil || len(held) != 1 || held[0] != rg {
		t.Fatalf("resumed %v %v, want %s", held, err, rg)
	}
	if err := apply(t, second, providers.ObjectChange{Address: rg, Action: action.Update, Released: []addrs.Path{route.AttrConfig}}); err != "" {
		t.Fatal(err)
	}
	if _, err := bpftestConnect(cfg.VIP); err == nil {
		t.Fatal("a released config's resumed VIP still routes")
	}
	if d := readDiags(second); len(d) != 0 {
		t.Fatalf("after the release: %v", d)
	}
	if err := second.Shutdown(); err != nil {
		t.Fatalf("a clean exit: %v", err)
	}
	if _, err := os.Stat(pins); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the pin directory after a clean exit: %v", err)
	}
}

// With nothing pinned, nothing survived: asking what was resumed at an
// agent's start attaches nothing (no config may ever ask this node to).
func TestResumedWithNothingPinnedAttachesNothing(t *testing.T) {
	p := agentWith(t, Config{PinDir: bpftest.BPFFS(t) + "/setpoint"})
	held, err := p.Resumed(context.Background())
	if err != nil || len(held) != 0 {
		t.Fatalf("resumed %v %v", held, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dp != nil {
		t.Fatal("asking what was resumed loaded the dataplane")
	}
}
