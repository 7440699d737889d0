package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/internal/kubetest"
	"github.com/setpoint-dev/setpoint/providers/kubernetes/agentcr"
	"github.com/setpoint-dev/setpoint/providers/kubernetes/kstate"
	"github.com/setpoint-dev/setpoint/providers/nodeagent"
)

// A spec deleted while no replica watched is released by the replica that
// holds the gone spec's shard, though it holds no live spec to reconcile,
// and only once its copy of the directory is newer than the field's last
// apply: a copy that lags (a ConfigMap volume the kubelet has not synced
// yet) cannot tell a deleted spec from one not delivered.
func TestGoneSpecReleasedByItsShardHolder(t *testing.T) {
	env := kubetest.Start(t, kubetest.WithCRDs("../../deploy/crds"))
	stateNS := env.Namespace(t)
	src := t.TempDir()
	policy := func(name, node string) string {
		return "apiVersion: setpoint.dev/v1alpha1\nkind: NodePolicy\nmetadata: {name: " + name + "}\nspec:\n  target: {provider: kubernetes}\n  nodeSelector: {kubernetes.io/hostname: " + node +
			"}\n  pools:\n    - {name: shop, namespaces: [shop], minCPUs: 1, maxCPUs: 1}\n  enforcement: {cpus: enforce}\n"
	}
	files := map[string]string{
		"env.yaml":    "apiVersion: setpoint.dev/v1alpha1\nkind: Environment\nmetadata: {name: prod}\nspec:\n  providers: [{name: kubernetes}]\n  state: {backend: kubernetes}\n  tick: 1s\n",
		"pinned.yaml": policy("pinned", "node-a"),
		"spare.yaml":  policy("spare", "node-b"),
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	so, se, code := runCLI(t, "apply", "--auto-approve", "--kubeconfig", env.Kubeconfig, "--state-namespace", stateNS, src)
	if code != 0 {
		t.Fatalf("apply: exit %d\n%s\n%s", code, so, se)
	}
	ctx := context.Background()
	cs := env.Clientset(t)
	b := kstate.New(cs, stateNS, "prod")
	pinned := addrs.Object{Provider: "kubernetes", Kind: nodeagent.Kind, Namespace: "default", Name: "pinned"}
	attr := addrs.Attr{Object: pinned, Path: nodeagent.Config}
	entry := func() *state.Entry {
		t.Helper()
		st, err := b.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		e, _ := st.Lookup(attr)
		return e
	}
	applied := entry()
	if applied == nil || applied.Applied == nil {
		t.Fatalf("pinned's config not applied: %+v\n%s\n%s", applied, so, se)
	}
	config := func() bool {
		t.Helper()
		c, err := (&agentcr.Client{Dyn: env.Dynamic(t), Namespace: "default", Name: "pinned", Node: "node-a"}).Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(c.Config) > 0
	}
	if !config() {
		t.Fatal("the agents read no config for pinned")
	}

	// pinned's spec deleted, as a ConfigMap volume shows it: every file
	// a symlink through ..data, which the kubelet swaps. This copy's swap
	// is older than the apply.
	vol := filepath.Join(t.TempDir(), "specs")
	version := func(v string, edit string, at time.Time) {
		t.Helper()
		for name, body := range files {
			if name == "pinned.yaml" {
				continue
			}
			if name == "env.yaml" {
				body += edit
			}
			if err := os.MkdirAll(filepath.Join(vol, v), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(vol, v, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		tmp := filepath.Join(vol, "..data_tmp")
		if err := os.Symlink(v, tmp); err != nil {
			t.Fatal(err)
		}
		ts := []unix.Timespec{unix.NsecToTimespec(at.UnixNano()), unix.NsecToTimespec(at.UnixNano())}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, tmp, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(vol, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	version("..v1", "", applied.Applied.At.Add(-time.Hour))
	for _, n := range []string{"env.yaml", "spare.yaml"} {
		if err := os.Symlink(filepath.Join("..data", n), filepath.Join(vol, n)); err != nil {
			t.Fatal(err)
		}
	}

	// Every shard but the gone spec's is another replica's, which holds
	// them for an hour: this replica holds no live spec to reconcile.
	gone := kstate.ShardOf("NodePolicy/default/pinned", kstate.DefaultShards)
	spare := addrs.Object{Provider: "kubernetes", Kind: nodeagent.Kind, Namespace: "default", Name: "spare"}
	if kstate.ShardOf(spare.String(), kstate.DefaultShards) == gone {
		t.Fatal("the live spec's group falls on the gone spec's shard: rename one")
	}
	for i := range kstate.DefaultShards {
		if i != gone {
			holdLease(t, cs, stateNS, b.ShardLease(i), "another replica")
		}
	}

	log, waitLog := clusterWatch(t, env, stateNS, vol)
	waitLog("the release held for the copy's age", func() bool {
		return count(log.String(), "msg=held", "NodeAgentConfig/default/pinned", "spec.config", "may not have reached it yet") >= 1
	})
	if e := entry(); e == nil || e.Applied == nil {
		t.Fatalf("released from a copy older than the apply: %+v\n%s", e, log.String())
	}
	// The replica holds the gone spec's shard and no other: no live spec
	// brought this plan.
	for who, held := range shardHolders(t, cs, stateNS, "prod") {
		if who != "another replica" && (len(held) != 1 || held[0] != gone) {
			t.Fatalf("the replica %s holds shards %v, want only %d", who, held, gone)
		}
	}

	// The kubelet's next swap (another edit) is newer than the apply.
	version("..v2", "# another edit\n", applied.Applied.At.Add(engine.DefaultCopyLag+time.Second))
	released := func() int {
		return count(log.String(), "msg=released", "NodeAgentConfig/default/pinned", "spec.config")
	}
	waitLog("the release", func() bool { return released() >= 1 })
	if n := released(); n != 1 {
		t.Fatalf("released %d times, want once\n%s", n, log.String())
	}
	if e := entry(); e == nil || e.Applied != nil || e.Released == nil {
		t.Fatalf("state after the release: %+v", e)
	}
	if config() {
		t.Fatal("the agents still read a config for the released pinned")
	}
}

// holdLease makes Lease name in ns held by who for an hour from now.
func holdLease(t *testing.T, cs k8s.Interface, ns, name, who string) {
	t.Helper()
	ctx := context.Background()
	now := metav1.NewMicroTime(time.Now())
	secs := int32(3600)
	spec := coordv1.LeaseSpec{HolderIdentity: &who, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now}
	leases := cs.CoordinationV1().Leases(ns)
	l, err := leases.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = leases.Create(ctx, &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec}, metav1.CreateOptions{})
	case err == nil:
		l.Spec = spec
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}
