package kubernetes_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/cue/load"
	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/signals/embedded"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/internal/kubetest"
	"github.com/setpoint-dev/setpoint/providers"
	k8sprov "github.com/setpoint-dev/setpoint/providers/kubernetes"
)

var (
	gvrCluster = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta1", Resource: "clusters"}
	gvrMD      = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta1", Resource: "machinedeployments"}
)

// fleetOnCluster makes n Cluster API clusters of fleet "streaming" in a
// new namespace (3 ready nodes each, provisioned), a Fleet spec for them,
// and a store whose remaining capacity makes the first cluster short of
// one instance and every other one comfortable; it returns the engine and
// the time to plan at.
func fleetOnCluster(tb testing.TB, env *kubetest.Env, n int) (*engine.Engine, string, time.Time) {
	tb.Helper()
	ctx := context.Background()
	ns := env.Namespace(tb)
	dyn := env.Dynamic(tb)
	now := time.Now().Truncate(time.Second)
	store := embedded.NewStore(0)
	for i := range n {
		name := fmt.Sprintf("c%03d", i)
		cl := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
			"metadata": map[string]any{"name": name, "namespace": ns, "labels": map[string]any{"setpoint.dev/fleet": "streaming", "setpoint.dev/region": "us-east-1", "setpoint.dev/cloud": "aws"}}}}
		md := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment",
			"metadata": map[string]any{"name": name + "-md-0", "namespace": ns, "labels": map[string]any{"cluster.x-k8s.io/cluster-name": name}},
			"spec":     map[string]any{"clusterName": name, "replicas": int64(3)}}}
		for _, o := range []struct {
			gvr    schema.GroupVersionResource
			u      *unstructured.Unstructured
			status map[string]any
		}{{gvrCluster, cl, map[string]any{"phase": "Provisioned"}}, {gvrMD, md, map[string]any{"replicas": int64(3), "readyReplicas": int64(3)}}} {
			created, err := dyn.Resource(o.gvr).Namespace(ns).Create(ctx, o.u, metav1.CreateOptions{FieldManager: "capi-controller"})
			if err != nil {
				tb.Fatal(err)
			}
			created.Object["status"] = o.status
			if _, err := dyn.Resource(o.gvr).Namespace(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
				tb.Fatal(err)
			}
		}
		left := 9000.0
		if i == 0 {
			left = 1000 // short of one instance's 3000
		}
		for _, s := range []struct {
			name string
			v    float64
			kv   []string
		}{
			{"fleet_remaining", left, []string{"dimension", "connections"}},
			{"fleet_instances", 1, nil},
		} {
			kv := append([]string{"__name__", s.name, "namespace", ns, "cluster", name}, s.kv...)
			for ts := now.Add(-time.Minute); !ts.After(now); ts = ts.Add(15 * time.Second) {
				if _, err := store.Append(labels.FromStrings(kv...), ts.UnixMilli(), s.v); err != nil {
					tb.Fatal(err)
				}
			}
		}
	}
	dir := tb.TempDir()
	files := map[string]string{
		"env.yaml": "apiVersion: setpoint.dev/v1alpha1\nkind: Environment\nmetadata: {name: fleet}\nspec:\n  providers: [{name: kubernetes}]\n",
		"fleet.yaml": fmt.Sprintf(`apiVersion: setpoint.dev/v1alpha1
kind: Fleet
metadata: {name: streaming, namespace: %s}
spec:
  cloud: aws
  regions: [us-east-1]
  clusterTemplate: streaming-standard
  capacity: [{name: connections, perInstance: 3000, perNode: 3000}]
  nodes: {step: 3, floor: 3, ceiling: 30, workloadMinimum: 3}
  remaining: {connections: 'sum by (cluster) (fleet_remaining{dimension="connections"})'}
  instances: sum by (cluster) (fleet_instances)
  enforcement: {nodes: enforce, clusters: enforce}
`, ns),
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	l, err := load.New()
	if err != nil {
		tb.Fatal(err)
	}
	r := l.LoadDir(dir)
	if len(r.Diags) > 0 {
		tb.Fatal(r.Diags)
	}
	kp, err := k8sprov.NewForConfig(env.Config())
	if err != nil {
		tb.Fatal(err)
	}
	e := &engine.Engine{Env: r.Environment(), Specs: r.Specs(), Providers: map[string]providers.Provider{"kubernetes": kp}, Signals: embedded.NewSource(store)}
	return e, ns, now
}

// TestFleetPlansAndAppliesOnClusterAPI: the short cluster gets one step
// (3 → 6 on its MachineDeployment), the others none; once applied, the
// next plan holds it while its nodes join (status behind spec).
func TestFleetPlansAndAppliesOnClusterAPI(t *testing.T) {
	env := kubetest.Shared(t)
	e, ns, now := fleetOnCluster(t, env, 3)
	ctx := context.Background()
	st := state.New()
	p := e.Plan(ctx, now, st, nil)
	if len(p.Errors) > 0 || len(p.Changes) != 1 {
		t.Fatalf("changes %+v, errors %+v; want one step of c000", p.Changes, p.Errors)
	}
	c := p.Changes[0]
	if c.Address.Name != "c000" || c.Action != action.Update || c.From != "3" || c.To != "6" {
		t.Fatalf("%+v: want c000 3 → 6", c)
	}
	for _, r := range e.Apply(ctx, now, p, st) {
		if r.Err != "" {
			t.Fatal(r.Err)
		}
	}
	md, err := env.Dynamic(t).Resource(gvrMD).Namespace(ns).Get(ctx, "c000-md-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n, _, _ := unstructured.NestedInt64(md.Object, "spec", "replicas"); n != 6 {
		t.Fatalf("MachineDeployment replicas %d, want 6", n)
	}
	p = e.Plan(ctx, now.Add(time.Second), st, nil)
	for _, c := range append(p.Changes, p.Held...) {
		if c.Address.Name == "c000" {
			t.Fatalf("while its nodes join: %+v; want no step", c)
		}
	}
}

// BenchmarkPlan100Clusters: one plan of a Fleet of 100 Cluster API
// clusters against the real API server: the List of Clusters and of
// MachineDeployments, the grouped queries, the decisions, the dry run of
// the one step.
func BenchmarkPlan100Clusters(b *testing.B) {
	env := kubetest.Shared(b)
	e, _, now := fleetOnCluster(b, env, 100)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := e.Plan(ctx, now, state.New(), nil)
		if len(p.Errors) > 0 || len(p.Changes) != 1 {
			b.Fatalf("changes %d, errors %v", len(p.Changes), p.Errors)
		}
	}
}
