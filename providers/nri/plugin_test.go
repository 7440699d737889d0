package nri

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine/decide/nodepolicy"
	"github.com/setpoint-dev/setpoint/internal/nritest"
	"github.com/setpoint-dev/setpoint/internal/testutil"
	"github.com/setpoint-dev/setpoint/providers/noderes"
)

// 2 sockets × 2 cores × 2 threads: socket 0 is CPUs {0,4},{1,5}, socket 1
// is {2,6},{3,7}.
var topo8 = nodepolicy.Topology{Sockets: 2, Cores: 2, Threads: 2}

func shopPolicy(maxCPUs int, cpus nodepolicy.Mode) *PolicyState {
	return &PolicyState{Address: "nri:NodePolicy/default/latency", Config: noderes.Config{Policy: nodepolicy.Policy{
		CPUs: cpus, Memory: nodepolicy.Observe,
		Pools: []nodepolicy.Pool{{Name: "shop", Namespaces: []string{"shop"}, MinCPUs: 1, MaxCPUs: maxCPUs}}}}}
}

// agent is a pipeline and its plugin connected to a runtime.
type agent struct {
	p      *Pipeline
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	events []string
}

func (a *agent) saw(kind string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Contains(a.events, kind)
}

func startAgent(t *testing.T, rt *nritest.Runtime, path string, policy *PolicyState) *agent {
	t.Helper()
	p, err := NewPipeline(topo8, path, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	a := &agent{p: p, done: make(chan struct{})}
	p.Hook = func(kind string) {
		a.mu.Lock()
		a.events = append(a.events, kind)
		a.mu.Unlock()
	}
	pl := NewPlugin(p, slog.Default())
	p.Start(pl.Send)
	if policy != nil {
		if err := p.SetPolicy(context.Background(), policy); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	go func() {
		defer close(a.done)
		_ = pl.Run(ctx, rt.Socket, "10", nil)
	}()
	testutil.Eventually(t, 10*time.Second, "the plugin's Synchronize", func() bool { return a.saw("synchronize") })
	rt.WaitRegistered()
	t.Cleanup(a.stop)
	return a
}

func (a *agent) stop() {
	a.cancel()
	<-a.done
	a.p.Stop()
}

func resourcesOf(rt *nritest.Runtime, id string) nritest.Resources { return rt.Resources()[id] }

func TestPluginOverTheRealSocket(t *testing.T) {
	rt := nritest.Start(t)
	ctx := context.Background()
	shop := nritest.Pod("p1", "shop", "checkout-7d9f-abcde", nil)
	web := nritest.Pod("p2", "web", "front-1234-xyzab", nil)
	rt.Add(shop, nritest.Container(shop, "s1", "app", 1000, 0))
	rt.Add(web, nritest.Container(web, "w1", "app", 500, 0))
	path := filepath.Join(t.TempDir(), "node.json")
	a := startAgent(t, rt, path, shopPolicy(4, nodepolicy.Enforce))

	// Synchronize: shop wants one CPU, the lowest of socket 0.
	if got := resourcesOf(rt, "s1"); got.CPUs != "0" || got.Mems != "0-1" {
		t.Fatalf("s1 after synchronize: %+v, want CPU 0", got)
	}
	if got := resourcesOf(rt, "w1"); got.CPUs != "1-7" {
		t.Fatalf("w1 after synchronize: %+v, want the default pool 1-7", got)
	}

	// A second shop container asking 2 CPUs: shop grows to 3 (its core's
	// sibling 4, then CPU 1 on its socket), the adjustment comes on the
	// create, and the reply moves s1 and w1 too.
	s2 := nritest.Container(shop, "s2", "sidecar", 2000, 0)
	rpl, err := rt.Create(ctx, shop, s2)
	if err != nil {
		t.Fatal(err)
	}
	if got := rpl.GetAdjust().GetLinux().GetResources().GetCpu().GetCpus(); got != "0-1,4" {
		t.Fatalf("s2's adjustment: cpus %q, want 0-1,4", got)
	}
	moved := map[string]string{}
	for _, u := range rpl.Update {
		moved[u.ContainerId] = u.GetLinux().GetResources().GetCpu().GetCpus()
	}
	if len(moved) != 2 || moved["s1"] != "0-1,4" || moved["w1"] != "2-3,5-7" {
		t.Fatalf("updates in the create's reply: %v, want s1 → 0-1,4 and w1 → 2-3,5-7", moved)
	}
	for id, want := range map[string]string{"s1": "0-1,4", "s2": "0-1,4", "w1": "2-3,5-7"} {
		if got := resourcesOf(rt, id).CPUs; got != want {
			t.Fatalf("%s has %q, want %q", id, got, want)
		}
	}

	// A policy change is no runtime event: its updates go through
	// UpdateContainers. maxCPUs 2: shop keeps core 0; s2 no longer fits
	// and goes to the default pool.
	changed := rt.Changed()
	if err := a.p.SetPolicy(ctx, shopPolicy(2, nodepolicy.Enforce)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no UpdateContainers after the policy change")
	}
	testutil.Eventually(t, 10*time.Second, "every container on its new pool", func() bool {
		r := rt.Resources()
		return r["s1"].CPUs == "0,4" && r["s2"].CPUs == "1-3,5-7" && r["w1"].CPUs == "1-3,5-7"
	})
	var ids []string
	for _, u := range rt.Unsolicited() {
		ids = append(ids, u.ContainerId)
	}
	slices.Sort(ids)
	if !slices.Equal(slices.Compact(ids), []string{"s1", "s2", "w1"}) {
		t.Fatalf("unsolicited updates reached %v, want s1, s2 and w1", ids)
	}
	snap, err := a.p.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "nothing pending", func() bool {
		s, _ := a.p.Snapshot(ctx)
		return s.Pending == 0
	})
	if len(snap.Result.Problems) != 1 {
		t.Fatalf("problems %v, want s2's overflow", snap.Result.Problems)
	}

	// A restarted agent resynchronises from its cache to the same state:
	// the same pools, and not one update.
	before := rt.Resources()
	unsolicited := len(rt.Unsolicited())
	a.stop()
	b := startAgent(t, rt, path, nil)
	snap2, err := b.p.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ch := nodepolicy.Changed(snap.Result.Assign, snap2.Result.Assign); len(ch) > 0 || snap2.Policy == nil {
		t.Fatalf("the restarted agent moved %v (policy %v)", ch, snap2.Policy)
	}
	if after := rt.Resources(); !equalResources(before, after) || len(rt.Unsolicited()) != unsolicited {
		t.Fatalf("the restart changed the containers: %v → %v", before, after)
	}

	// Stopping s1 gives its pool's share back: s2 fits again.
	rplStop, err := rt.Stop(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if len(rplStop.Update) == 0 {
		t.Fatal("stopping s1 moved nobody")
	}
	if got := resourcesOf(rt, "s2").CPUs; got != "0,4" {
		t.Fatalf("s2 after s1 stopped: %q, want shop's 0,4", got)
	}
}

func equalResources(a, b map[string]nritest.Resources) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// In observe the agent computes and reports pools but adjusts nothing.
func TestPluginObserveAdjustsNothing(t *testing.T) {
	rt := nritest.Start(t)
	shop := nritest.Pod("p1", "shop", "checkout-7d9f-abcde", nil)
	rt.Add(shop, nritest.Container(shop, "s1", "app", 1000, 0))
	a := startAgent(t, rt, "", shopPolicy(4, nodepolicy.Observe))
	rpl, err := rt.Create(context.Background(), shop, nritest.Container(shop, "s2", "app", 1000, 0))
	if err != nil {
		t.Fatal(err)
	}
	if rpl.GetAdjust().GetLinux().GetResources().GetCpu().GetCpus() != "" || len(rpl.Update) != 0 {
		t.Fatalf("observe adjusted: %v", rpl)
	}
	snap, err := a.p.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := snap.Result.Pools[0]; got.Name != "shop" || got.CPUs.String() != "0,4" || len(got.Containers) != 2 {
		t.Fatalf("observed pool %+v, want shop on 0,4 with both containers", got)
	}
	for id, r := range rt.Resources() {
		if r.CPUs != "" {
			t.Fatalf("%s got CPUs %q in observe", id, r.CPUs)
		}
	}
}
