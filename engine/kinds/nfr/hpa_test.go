package nfrkind_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/cue/load"
	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	_ "github.com/setpoint-dev/setpoint/engine/kinds/all"
	"github.com/setpoint-dev/setpoint/engine/plan"
	"github.com/setpoint-dev/setpoint/engine/signals/embedded"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/workload"
)

// world is an in-memory provider: Read and List answer with what the test
// put there.
type world map[addrs.Object]providers.Object

func (w world) Read(_ context.Context, req providers.ReadRequest) providers.ReadResponse {
	var r providers.ReadResponse
	for _, a := range req.Addresses {
		o := w[a]
		o.Address = a
		r.Objects = append(r.Objects, o)
	}
	return r
}

func (w world) List(_ context.Context, req providers.ListRequest) providers.ListResponse {
	var r providers.ListResponse
	for a, o := range w {
		if a.Provider == req.Provider && a.Kind == req.Kind && a.Namespace == req.Namespace {
			o.Address = a
			r.Objects = append(r.Objects, o)
		}
	}
	slices.SortFunc(r.Objects, func(x, y providers.Object) int { return strings.Compare(x.Address.String(), y.Address.String()) })
	return r
}

func (w world) PlanChange(_ context.Context, req providers.PlanChangeRequest) providers.PlanChangeResponse {
	var r providers.PlanChangeResponse
	for _, c := range req.Changes {
		r.Results = append(r.Results, providers.ObjectResult{Address: c.Address, After: c.Attributes})
	}
	return r
}

func (w world) Apply(context.Context, providers.ApplyRequest) providers.ApplyResponse {
	return providers.ApplyResponse{}
}

var checkout = addrs.Object{Provider: "k8s", Kind: workload.Deployment, Namespace: "shop", Name: "checkout"}

func deployment() providers.Object {
	return providers.Object{Exists: true, Generation: 1,
		Attributes: map[addrs.Path]values.Value{workload.Replicas: values.CountOf(2), workload.ReadyReplicas: values.CountOf(2)},
		Managers:   map[addrs.Path]string{workload.Replicas: "kubectl"}}
}

// hpa is an HPA of shop named name that scales the Deployment scales.
func hpa(name, scales string) (addrs.Object, providers.Object) {
	a := addrs.Object{Provider: "k8s", Kind: workload.HPA, Namespace: "shop", Name: name}
	return a, providers.Object{Exists: true, Generation: 1,
		Attributes: map[addrs.Path]values.Value{workload.MinReplicas: values.CountOf(2), workload.MaxReplicas: values.CountOf(20),
			workload.ScaleTargetKind: values.StringOf(workload.Deployment), workload.ScaleTargetName: values.StringOf(scales)},
		Managers: map[addrs.Path]string{workload.MinReplicas: "kubectl"}}
}

// planNFR plans an NFR on checkout that wants ceil((400 / 100) × (1000m /
// 500m)) = 8 replicas, with extra appended to its spec.
func planNFR(t *testing.T, w world, extra string) *plan.Plan {
	t.Helper()
	return planSpecs(t, w, `apiVersion: setpoint.dev/v1alpha1
kind: NFR
metadata: {name: checkout, namespace: shop}
spec:
  target: {kind: Deployment, name: checkout}
  policy: reference
  throughput: {minRPS: 400}
  cpuPerPod: 500m
  latency: {p99: 250ms}
  signals: {rps: "vector(100)", cpu: "vector(1000)", p99: "vector(0.1)"}
  enforcement: {replicas: enforce, memory: off}
`+extra, state.New())
}

// planSpecs plans the NFR given beside an Environment of the k8s world,
// from state st.
func planSpecs(t *testing.T, w world, nfrYAML string, st *state.State) *plan.Plan {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"env.yaml": "apiVersion: setpoint.dev/v1alpha1\nkind: Environment\nmetadata: {name: t}\nspec:\n  providers: [{name: k8s, config: {}}]\n",
		"nfr.yaml": nfrYAML,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l, err := load.New()
	if err != nil {
		t.Fatal(err)
	}
	r := l.LoadDir(dir)
	if len(r.Diags) > 0 {
		t.Fatalf("specs: %v", r.Diags)
	}
	e := &engine.Engine{Env: r.Environment(), Specs: r.Specs(), Providers: map[string]providers.Provider{"k8s": w}, Signals: embedded.NewSource(embedded.NewStore(time.Hour))}
	return e.Plan(context.Background(), time.Date(2026, 3, 10, 9, 0, 0, 0, time.UTC), st, nil)
}

// replicaChanges lists the plan's changes and holds as "address attribute".
func replicaChanges(p *plan.Plan) []string {
	var out []string
	for _, c := range append(append([]plan.Change{}, p.Changes...), p.Held...) {
		out = append(out, c.Address.String()+" "+c.Attribute.String())
	}
	slices.Sort(out)
	return out
}

// TestHPAFoundByScaleTargetRef: the NFR's lower bound goes to the HPA
// whose scaleTargetRef names checkout, whatever its name; an HPA named
// checkout that scales another Deployment is not checkout's (the bound
// then goes to the Deployment's replicas); two HPAs on checkout, or the
// name setpoint would create one under taken by another's, are errors.
func TestHPAFoundByScaleTargetRef(t *testing.T) {
	own, ownObj := hpa("checkout-autoscaler", "checkout")
	named, namedObj := hpa("checkout", "checkout-v1")
	second, secondObj := hpa("checkout-2", "checkout")
	for _, c := range []struct {
		name    string
		objs    world
		extra   string
		changes []string
		err     string
	}{
		{"an HPA of another name", world{checkout: deployment(), own: ownObj, named: namedObj}, "",
			[]string{own.String() + " spec.minReplicas"}, ""},
		{"an HPA of its name that scales another", world{checkout: deployment(), named: namedObj}, "",
			[]string{checkout.String() + " spec.replicas"}, ""},
		{"two HPAs", world{checkout: deployment(), own: ownObj, second: secondObj}, "",
			nil, "2 HorizontalPodAutoscalers scale " + checkout.String()},
		{"create where the name is taken", world{checkout: deployment(), named: namedObj}, "  autoscaler: {create: true, maxReplicas: 20}\n",
			nil, "autoscaler.create: " + named.String() + ", where setpoint would create the HPA of " + checkout.String() + ", scales Deployment checkout-v1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := planNFR(t, c.objs, c.extra)
			if got := replicaChanges(p); strings.Join(got, "\n") != strings.Join(c.changes, "\n") {
				t.Errorf("changes %v, want %v", got, c.changes)
			}
			switch {
			case c.err == "" && len(p.Errors) > 0:
				t.Errorf("errors %v", p.Errors)
			case c.err != "" && (len(p.Errors) != 1 || !strings.Contains(p.Errors[0].Message, c.err)):
				t.Errorf("errors %v, want one saying %q", p.Errors, c.err)
			}
		})
	}
}

// TestAutoscalerOwnership: what an NFR writes of an HPA it found beside
// minReplicas, by autoscaler.owns and the replicas mode. Owning the count,
// it writes the CPU target — 100 req/s at 400m is 4m a request, a pod
// 125 req/s, M/M/5 at 40 ms within 250 ms runs at 0.8097: 81% — and the
// scale-down window, the stability's 60 s (held by the stability window on
// a first plan, as any NFR change; by observe, under observe). Back to the floor, it puts back the user's values it recorded
// (70%, 300 s): at once under enforce, held under observe, at once when
// replicas enforcement is off (as every dimension turned off).
func TestAutoscalerOwnership(t *testing.T) {
	own, ownObj := hpa("checkout", "checkout")
	ownObj.Attributes[workload.TargetCPU] = values.CountOf(85)
	ownObj.Attributes[workload.ScaleDownWindow] = values.CountOf(60)
	_, userObj := hpa("checkout", "checkout")
	userObj.Attributes[workload.TargetCPU] = values.CountOf(70)
	userObj.Attributes[workload.ScaleDownWindow] = values.CountOf(300)
	target := addrs.Attr{Object: own, Path: workload.TargetCPU}
	window := addrs.Attr{Object: own, Path: workload.ScaleDownWindow}
	written := func() *state.State {
		st := state.New()
		at := time.Date(2026, 3, 10, 8, 0, 0, 0, time.UTC)
		for a, user := range map[addrs.Attr]int64{target: 70, window: 300} {
			u := values.CountOf(user)
			e := st.Entry(a)
			e.User = &u
			e.Applied = &state.Applied{Value: ownObj.Attributes[a.Path], At: at, By: []string{"NFR/shop/checkout"}}
		}
		return st
	}
	slo := "  policy: slo\n  latency: {p99: 250ms, serviceTime: 40ms}\n"
	for _, c := range []struct {
		name, extra string
		obj         providers.Object
		st          *state.State
		// what each of the two attributes does: "" nothing, "change
		// N" applied now, "held N (why)".
		target, window string
	}{
		{"count, enforce", "  autoscaler: {owns: count}\n", userObj, state.New(), "held 81 (stable", "held 60 (stable"},
		{"count, observe", "  autoscaler: {owns: count}\n", userObj, state.New(), "held 81 (observe", "held 60 (observe"},
		{"floor, enforce, written before", "", ownObj, written(), "change 70", "change 300"},
		{"floor, observe, written before", "", ownObj, written(), "held 70 (observe", "held 300 (observe"},
		{"floor, off, written before", "", ownObj, written(), "change 70", "change 300"},
		{"floor, nothing written", "", userObj, state.New(), "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			extra := slo + c.extra
			mode := "enforce"
			switch {
			case strings.Contains(c.name, "observe"):
				mode = "observe"
			case strings.Contains(c.name, "off"):
				mode = "off"
			}
			p := planNFRWith(t, world{checkout: deployment(), own: c.obj}, extra, mode, c.st)
			for _, a := range []struct {
				attr addrs.Attr
				want string
			}{{target, c.target}, {window, c.window}} {
				got := ""
				for _, ch := range p.Changes {
					if ch.Address == a.attr.Object && ch.Attribute == a.attr.Path {
						got = "change " + ch.To
					}
				}
				for _, h := range p.Held {
					if h.Address == a.attr.Object && h.Attribute == a.attr.Path {
						got = "held " + h.To + " (" + h.Held.String()
					}
				}
				if a.want == "" && got != "" || a.want != "" && !strings.HasPrefix(got, a.want) {
					t.Errorf("%s: %q, want %q", a.attr.Path, got, a.want)
				}
			}
		})
	}
}

// planNFRWith plans an NFR of the slo policy on checkout (100 req/s at
// 400m) with the replicas mode and the state given.
func planNFRWith(t *testing.T, w world, extra, replicas string, st *state.State) *plan.Plan {
	t.Helper()
	return planSpecs(t, w, `apiVersion: setpoint.dev/v1alpha1
kind: NFR
metadata: {name: checkout, namespace: shop}
spec:
  target: {kind: Deployment, name: checkout}
  throughput: {minRPS: 400}
  cpuPerPod: 500m
  signals: {rps: "vector(100)", cpu: "vector(400)", p99: "vector(0.1)"}
  enforcement: {replicas: `+replicas+`, memory: off}
`+extra, st)
}
