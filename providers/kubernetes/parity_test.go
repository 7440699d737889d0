package kubernetes_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/cue/load"
	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	_ "github.com/setpoint-dev/setpoint/engine/kinds/all"
	"github.com/setpoint-dev/setpoint/engine/plan"
	"github.com/setpoint-dev/setpoint/engine/signals/embedded"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/internal/kubetest"
	"github.com/setpoint-dev/setpoint/providers"
	k8sprov "github.com/setpoint-dev/setpoint/providers/kubernetes"
	"github.com/setpoint-dev/setpoint/providers/sim"
)

// The shipped spec directory plans the same against the sim world and
// against a real API server holding the same objects, with the same
// signals: every kind, attribute, manager and annotation means the same to
// both providers.
func TestSimAndKubernetesPlanTheSame(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	docs, env := loadSpecs(t)
	// A Fleet's clusters are Cluster and MachineDeployment objects here,
	// one object in the sim world: this test mirrors objects one to one,
	// so the Fleet is left out (TestFleetPlansAndAppliesOnClusterAPI plans
	// it on the API server). So are the RouteGroup and the NodePolicy: the
	// sim world runs their loops itself, a cluster through a
	// NodeAgentConfig for its eBPF and NRI agents (providers/ebpf's and
	// providers/nri's agent tests).
	docs = slices.DeleteFunc(docs, func(d spec.Document) bool {
		switch d.(type) {
		case *spec.Fleet, *spec.RouteGroup, *spec.NodePolicy:
			return true
		}
		return false
	})
	// inventory needs more pods than it has, at once, and its memory moves
	// without waiting: so the plan holds a change of every kind.
	for _, d := range docs {
		if n, ok := d.(*spec.NFR); ok && n.Metadata.Name == "inventory" {
			n.Spec.Throughput.MinRPS = 600
			n.Spec.Safety.Stability = 0
		}
	}

	// The sim world, run to 10 minutes past its start, fills the store both
	// engines read their signals from.
	store := embedded.NewStore(0)
	world, err := sim.Open(env, store)
	if err != nil {
		t.Fatal(err)
	}
	now := world.World.Start().Add(10 * time.Minute)
	simEng := &engine.Engine{Env: env, Specs: docs, Providers: map[string]providers.Provider{"sim": world}, Signals: embedded.NewSource(store)}
	simPlan := simEng.Plan(ctx, now, state.New(), nil)

	// The cluster gets what the sim world has: every object the specs
	// read, with its attributes and the manager of each.
	kenv := kubetest.Shared(t)
	kp, err := k8sprov.NewForConfig(kenv.Config())
	if err != nil {
		t.Fatal(err)
	}
	var reads []providers.Address
	for _, c := range append(append([]plan.Change{}, simPlan.Changes...), simPlan.Held...) {
		reads = append(reads, c.Address)
	}
	for a := range simPlan.Observed {
		if o, err := providers.ParseAddress(strings.Fields(a)[0]); err == nil {
			reads = append(reads, o)
		}
	}
	mirror(t, ctx, kenv, world, dedupe(reads), now)

	kEnv := *env
	kEnv.Spec.Providers = []spec.Provider{{Name: "kubernetes"}}
	kEng := &engine.Engine{Env: &kEnv, Specs: docs, Providers: map[string]providers.Provider{"kubernetes": kp}, Signals: embedded.NewSource(store)}
	kPlan := kEng.Plan(ctx, now, state.New(), nil)

	simLines, kLines := lines(simPlan, "sim:"), lines(kPlan, "kubernetes:")
	if strings.Join(simLines, "\n") != strings.Join(kLines, "\n") {
		t.Fatalf("the plans differ\nsim:\n%s\n\nkubernetes:\n%s\n\nkubernetes errors: %v", strings.Join(simLines, "\n"), strings.Join(kLines, "\n"), kPlan.Errors)
	}
	// Equal empty plans would prove nothing: each kind of change is in it.
	joined := strings.Join(kLines, "\n")
	for _, want := range []string{
		"change update HorizontalPodAutoscaler/shop/checkout spec.minReplicas",
		"change update KnativeService/default/fib spec.template.metadata.annotations[\"autoscaling.knative.dev/min-scale\"]",
		"change update Deployment/shop/inventory spec.replicas",
		"change update Deployment/shop/inventory spec.template.spec.containers[name=app].resources.requests.memory",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("the plans have no change of %s:\n%s", want, joined)
		}
	}
	if len(kPlan.Errors) > 0 || len(simPlan.Errors) > 0 {
		t.Fatalf("errors: sim %v, kubernetes %v", simPlan.Errors, kPlan.Errors)
	}
}

func loadSpecs(t *testing.T) ([]spec.Document, *spec.Environment) {
	t.Helper()
	l, err := load.New()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := filepath.Abs(filepath.Join("..", "..", "specs"))
	if err != nil {
		t.Fatal(err)
	}
	r := l.LoadDir(dir)
	if len(r.Diags) > 0 {
		t.Fatalf("specs: %v", r.Diags)
	}
	docs := r.Specs()
	return docs, r.Environment()
}

func dedupe(as []providers.Address) []providers.Address {
	seen := map[providers.Address]bool{}
	var out []providers.Address
	for _, a := range as {
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// lines is a plan's changes and holds, with the provider's name taken off
// the addresses: what both worlds must agree on.
func lines(p *plan.Plan, prefix string) []string {
	var out []string
	for _, set := range []struct {
		name string
		cs   []plan.Change
	}{{"change", p.Changes}, {"held", p.Held}} {
		for _, c := range set.cs {
			held := ""
			if c.Held != nil {
				held = c.Held.String()
			}
			out = append(out, fmt.Sprintf("%s %s %s %s: %s → %s (wanted %s; manager %s; force %v) %s | %s",
				set.name, c.Action, strings.TrimPrefix(c.Address.String(), prefix), c.Attribute, c.From, c.To, c.Wanted, c.Manager, c.Force, held, c.Reason))
		}
	}
	sort.Strings(out)
	return out
}

var gvrs = map[string]schema.GroupVersionResource{
	"Deployment":              {Group: "apps", Version: "v1", Resource: "deployments"},
	"HorizontalPodAutoscaler": {Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"},
	"KnativeService":          {Group: "serving.knative.dev", Version: "v1", Resource: "services"},
}

// mirror makes in the cluster each object the sim world has at now: its
// writable attributes set by the manager the world names for each.
func mirror(t *testing.T, ctx context.Context, kenv *kubetest.Env, world *sim.Provider, as []providers.Address, now time.Time) {
	t.Helper()
	resp := world.Read(ctx, providers.ReadRequest{Now: now, Addresses: as})
	cs := kenv.Clientset(t)
	dyn := kenv.Dynamic(t)
	made := map[string]bool{}
	for _, o := range resp.Objects {
		if !o.Exists {
			continue
		}
		ns := o.Address.Namespace
		if !made[ns] {
			made[ns] = true
			if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
				t.Fatal(err)
			}
		}
		byManager := map[string]map[addrs.Path]values.Value{}
		for path, v := range o.Attributes {
			if path.HasPrefix(addrs.MustPath("status")) {
				continue
			}
			m := o.Managers[path]
			if m == "" {
				m = sim.DefaultManager
			}
			if byManager[m] == nil {
				byManager[m] = map[addrs.Path]values.Value{}
			}
			byManager[m][path] = v
		}
		// First what kubectl made (the whole object), then each other
		// manager's fields, applied by that manager.
		managers := []string{sim.DefaultManager}
		for m := range byManager {
			if m != sim.DefaultManager {
				managers = append(managers, m)
			}
		}
		sort.Strings(managers[1:])
		for i, m := range managers {
			obj := skeleton(o.Address, byManager[sim.DefaultManager])
			if i > 0 {
				obj = fieldsOnly(o.Address, byManager[m])
			}
			if err := k8sprov.Encode(o.Address.Kind, obj, byManager[m]); err != nil {
				t.Fatal(err)
			}
			rc := dyn.Resource(gvrs[o.Address.Kind]).Namespace(ns)
			var err error
			if i == 0 {
				_, err = rc.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{FieldManager: m})
				if err == nil {
					// The specs' namespaces are fixed: gone at the end, so
					// the test runs again on the shared API server (-count).
					name := o.Address.Name
					t.Cleanup(func() { _ = rc.Delete(context.Background(), name, metav1.DeleteOptions{}) })
				}
			} else {
				_, err = rc.Apply(ctx, o.Address.Name, &unstructured.Unstructured{Object: obj}, metav1.ApplyOptions{FieldManager: m, Force: true})
			}
			if err != nil {
				t.Fatalf("mirroring %s as %s: %v", o.Address, m, err)
			}
		}
	}
}

func meta(a providers.Address) map[string]any {
	return map[string]any{"name": a.Name, "namespace": a.Namespace, "labels": map[string]any{"app": a.Name}}
}

func fieldsOnly(a providers.Address, _ map[addrs.Path]values.Value) map[string]any {
	api := map[string][2]string{"Deployment": {"apps/v1", "Deployment"}, "HorizontalPodAutoscaler": {"autoscaling/v2", "HorizontalPodAutoscaler"}, "KnativeService": {"serving.knative.dev/v1", "Service"}}[a.Kind]
	return map[string]any{"apiVersion": api[0], "kind": api[1], "metadata": map[string]any{"name": a.Name, "namespace": a.Namespace}}
}

// skeleton is the rest of a valid object: a selector, images, the HPA's
// target.
func skeleton(a providers.Address, attrs map[addrs.Path]values.Value) map[string]any {
	obj := fieldsOnly(a, nil)
	obj["metadata"] = meta(a)
	containers := []any{}
	seen := map[string]bool{}
	for path := range attrs {
		if c, ok := path.Selected("name"); ok && !seen[c] {
			seen[c] = true
			containers = append(containers, map[string]any{"name": c, "image": "registry.example/" + c + ":1"})
		}
	}
	sort.Slice(containers, func(i, j int) bool {
		return containers[i].(map[string]any)["name"].(string) < containers[j].(map[string]any)["name"].(string)
	})
	switch a.Kind {
	case "Deployment":
		obj["spec"] = map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"app": a.Name}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": a.Name}}, "spec": map[string]any{"containers": containers}}}
	case "KnativeService":
		obj["spec"] = map[string]any{"template": map[string]any{"spec": map[string]any{"containers": containers}}}
	case "HorizontalPodAutoscaler":
		obj["spec"] = map[string]any{"scaleTargetRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": a.Name}}
	}
	return obj
}
