package kubernetes

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/internal/kubetest"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/workload"
)

// TestHPAScaleTargetRef: an HPA says what it scales, read and listed, so
// setpoint finds a Deployment's HPA whatever its name; an HPA setpoint
// would create for a Deployment that one of another name already scales
// is refused, in the dry run too, and nothing is created.
func TestHPAScaleTargetRef(t *testing.T) {
	env := kubetest.Shared(t)
	ns := env.Namespace(t)
	env.Apply(t, deployment(ns, "web", 2))
	env.Apply(t, fmt.Sprintf(`apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web-autoscaler, namespace: %s}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 2
  maxReplicas: 10
`, ns))
	p := newProvider(t, env.Config())
	other := addr(KindHPA, ns, "web-autoscaler")
	o := read(t, p, other)
	if o.Attributes[workload.ScaleTargetKind] != values.StringOf("Deployment") || o.Attributes[workload.ScaleTargetName] != values.StringOf("web") {
		t.Fatalf("read: %v", o.Attributes)
	}
	l := p.List(ctxT(t), workload.HPAList(addrs.Object(addr(workload.Deployment, ns, "web"))))
	if len(l.Diagnostics) > 0 || len(workload.ScaledBy(l.Objects, addrs.Object(addr(workload.Deployment, ns, "web")))) != 1 {
		t.Fatalf("listed: %+v", l)
	}

	h := addr(KindHPA, ns, "web")
	create := providers.ObjectChange{Address: h, Action: action.Create, Manager: Manager, Attributes: map[addrs.Path]values.Value{
		AttrMinReplicas: values.CountOf(3), AttrMaxReplicas: values.CountOf(12), AttrTargetCPU: values.CountOf(70)}, Changed: []addrs.Path{AttrMinReplicas}}
	want := fmt.Sprintf("Deployment %s/web is already scaled by HorizontalPodAutoscaler web-autoscaler", ns)
	if dr := p.PlanChange(ctxT(t), providers.PlanChangeRequest{Changes: []providers.ObjectChange{create}}).Results[0]; !strings.Contains(dr.Err, want) {
		t.Fatalf("dry run: %+v; want %q", dr, want)
	}
	if res := apply(t, p, create); !strings.Contains(res.Err, want) {
		t.Fatalf("apply: %+v; want %q", res, want)
	}
	if o := read(t, p, h); o.Exists {
		t.Fatal("a second HPA was created")
	}
	// For a Deployment no HPA scales, it is created.
	env.Apply(t, deployment(ns, "api", 2))
	create.Address = addr(KindHPA, ns, "api")
	if res := apply(t, p, create); res.Err != "" {
		t.Fatal(res.Err)
	}
}

// TestReplicaFailure: a Deployment whose controller cannot create pods
// says so in its ReplicaFailure condition, read with its message.
func TestReplicaFailure(t *testing.T) {
	env := kubetest.Shared(t)
	ns := env.Namespace(t)
	env.Apply(t, deployment(ns, "web", 0))
	p := newProvider(t, env.Config())
	a := addr(KindDeployment, ns, "web")
	if o := read(t, p, a); o.Attributes[workload.ReplicaFailure].IsValid() {
		t.Fatalf("no condition yet: %v", o.Attributes)
	}
	rc := env.Dynamic(t).Resource(kinds[KindDeployment].gvr).Namespace(ns)
	u, err := rc.Get(ctxT(t), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	msg := `pods "web-5d8f7c-abcde" is forbidden: exceeded quota: compute, requested: requests.memory=256Mi, used: requests.memory=1Gi, limited: requests.memory=1Gi`
	if err := unstructured.SetNestedSlice(u.Object, []any{map[string]any{"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate", "message": msg}}, "status", "conditions"); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.UpdateStatus(ctxT(t), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	o := read(t, p, a)
	if got, ok := workload.ReplicaFailed(o); !ok || got != msg {
		t.Fatalf("read %v; want the condition's message", o.Attributes)
	}
}

// userHPA is an HPA a user made with kubectl (manager
// kubectl-client-side-apply), with spec's lines under spec.
func userHPA(t *testing.T, env *kubetest.Env, ns, name, spec string) {
	t.Helper()
	env.Apply(t, deployment(ns, name, 2))
	create(t, env, fmt.Sprintf(`apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: %s, namespace: %s}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: %s}
  minReplicas: 2
  maxReplicas: 10
%s`, name, ns, name, spec))
}

// hpaOf is the HPA as the API server holds it.
func hpaOf(t *testing.T, env *kubetest.Env, ns, name string) *autoscalingv2.HorizontalPodAutoscaler {
	t.Helper()
	h, err := env.Clientset(t).AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctxT(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// metricsText is an HPA's metrics list, in order, each as "type name
// target": "Pods requests_per_second AverageValue 10; Resource cpu
// Utilization 70".
func metricsText(h *autoscalingv2.HorizontalPodAutoscaler) string {
	var out []string
	for _, m := range h.Spec.Metrics {
		var name string
		var tg autoscalingv2.MetricTarget
		switch {
		case m.Resource != nil:
			name, tg = string(m.Resource.Name), m.Resource.Target
		case m.Pods != nil:
			name, tg = m.Pods.Metric.Name, m.Pods.Target
		default:
			name = "?"
		}
		v := "?"
		switch {
		case tg.AverageUtilization != nil:
			v = fmt.Sprint(*tg.AverageUtilization)
		case tg.AverageValue != nil:
			v = tg.AverageValue.String()
		}
		out = append(out, fmt.Sprintf("%s %s %s %s", m.Type, name, tg.Type, v))
	}
	return strings.Join(out, "; ")
}

// owns says whether manager's applied fields hold the field at p of the
// HPA.
func owns(t *testing.T, h *autoscalingv2.HorizontalPodAutoscaler, manager string, p addrs.Path) bool {
	t.Helper()
	fp, err := fieldPath(p)
	if err != nil {
		t.Fatal(err)
	}
	return ownedBy(managedSets(h.GetManagedFields()), manager).Has(fp)
}

const threeMetrics = `  metrics:
  - type: Pods
    pods: {metric: {name: requests_per_second}, target: {type: AverageValue, averageValue: "10"}}
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 70}}
  - type: Resource
    resource: {name: memory, target: {type: Utilization, averageUtilization: 80}}
`

// TestHPATargetCPUInUserMetrics: the CPU utilisation target of a user's
// HPA whose metrics hold others beside it is read, and written as the
// whole (atomic) list with only that number changed, the other metrics
// carried in their order; setpoint then owns spec.metrics, so another
// manager's later edit of the list is a conflict, and a restore puts the
// user's number back into the list as it is then and hands the list back.
func TestHPATargetCPUInUserMetrics(t *testing.T) {
	env := kubetest.Shared(t)
	ns := env.Namespace(t)
	userHPA(t, env, ns, "web", threeMetrics)
	p := newProvider(t, env.Config())
	h := addr(KindHPA, ns, "web")
	o := read(t, p, h)
	if o.Attributes[AttrTargetCPU] != values.CountOf(70) || o.Managers[AttrTargetCPU] != "kubectl-client-side-apply" {
		t.Fatalf("read: %v %v", o.Attributes, o.Managers)
	}
	const pods = "Pods requests_per_second AverageValue 10; "
	want := func(when, metrics string) *autoscalingv2.HorizontalPodAutoscaler {
		t.Helper()
		hpa := hpaOf(t, env, ns, "web")
		if got := metricsText(hpa); got != metrics {
			t.Fatalf("%s: metrics\n%s\nwant\n%s", when, got, metrics)
		}
		return hpa
	}
	set := func(pct int64, force bool) providers.ObjectChange {
		return providers.ObjectChange{Address: h, Attributes: map[addrs.Path]values.Value{AttrTargetCPU: values.CountOf(pct)}, Changed: []addrs.Path{AttrTargetCPU}, Force: force}
	}
	// kubectl made the list: taking it needs the gate's Force.
	if res := apply(t, p, set(85, false)); len(res.Conflicts) != 1 || res.Conflicts[0] != (providers.Conflict{Path: AttrTargetCPU, Manager: "kubectl-client-side-apply"}) {
		t.Fatalf("unforced write over kubectl's list: %+v", res)
	}
	// The dry run builds the same list, and stores nothing.
	if dr := p.PlanChange(ctxT(t), providers.PlanChangeRequest{Changes: []providers.ObjectChange{withManager(set(85, true))}}).Results[0]; dr.Err != "" || dr.After[AttrTargetCPU] != values.CountOf(85) {
		t.Fatalf("dry run: %+v", dr)
	}
	want("after the dry run", pods+"Resource cpu Utilization 70; Resource memory Utilization 80")
	if res := apply(t, p, set(85, true)); res.Err != "" || res.After[AttrTargetCPU] != values.CountOf(85) {
		t.Fatalf("forced write: %+v", res)
	}
	hpa := want("after the write", pods+"Resource cpu Utilization 85; Resource memory Utilization 80")
	// The Event says what moved, from the list as it was (the live
	// object the new list was built from is left as read).
	if !slices.ContainsFunc(events(t, env, ns, "web"), func(e corev1.Event) bool {
		return e.Reason == "SetpointApplied" && strings.Contains(e.Message, AttrTargetCPU.String()+" 70 → 85")
	}) {
		t.Fatalf("events: %+v", events(t, env, ns, "web"))
	}
	if !owns(t, hpa, Manager, pathMetrics) || owns(t, hpa, "kubectl-client-side-apply", pathMetrics) {
		t.Fatalf("spec.metrics should be setpoint's alone: %+v", hpa.GetManagedFields())
	}
	if o := read(t, p, h); o.Attributes[AttrTargetCPU] != values.CountOf(85) || o.Managers[AttrTargetCPU] != Manager {
		t.Fatalf("read after the write: %v %v", o.Attributes, o.Managers)
	}
	// A change of another field carries the list as it is.
	if res := apply(t, p, providers.ObjectChange{Address: h, Attributes: map[addrs.Path]values.Value{AttrTargetCPU: values.CountOf(85), AttrMinReplicas: values.CountOf(3)},
		Changed: []addrs.Path{AttrMinReplicas}, Force: true}); res.Err != "" {
		t.Fatal(res.Err)
	}
	want("after a minReplicas change", pods+"Resource cpu Utilization 85; Resource memory Utilization 80")

	// A kubectl-like edit of the list (the memory target) takes it.
	hpa = hpaOf(t, env, ns, "web")
	*hpa.Spec.Metrics[2].Resource.Target.AverageUtilization = 75
	if _, err := env.Clientset(t).AutoscalingV2().HorizontalPodAutoscalers(ns).Update(ctxT(t), hpa, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	if o := read(t, p, h); o.Attributes[AttrTargetCPU] != values.CountOf(85) || o.Managers[AttrTargetCPU] != "kubectl-edit" {
		t.Fatalf("read after kubectl's edit: %v %v", o.Attributes, o.Managers)
	}
	// The next write is a conflict naming it, in the dry run too, and
	// changes nothing.
	conflict := []providers.Conflict{{Path: AttrTargetCPU, Manager: "kubectl-edit"}}
	if dr := p.PlanChange(ctxT(t), providers.PlanChangeRequest{Changes: []providers.ObjectChange{withManager(set(90, false))}}).Results[0]; !slices.Equal(dr.Conflicts, conflict) {
		t.Fatalf("dry run after kubectl's edit: %+v", dr)
	}
	if res := apply(t, p, set(90, false)); !slices.Equal(res.Conflicts, conflict) {
		t.Fatalf("write after kubectl's edit: %+v", res)
	}
	// So is a restore.
	restore := providers.ObjectChange{Address: h, Attributes: map[addrs.Path]values.Value{AttrMinReplicas: values.CountOf(3)}, Restored: map[addrs.Path]values.Value{AttrTargetCPU: values.CountOf(70)}}
	if res := apply(t, p, restore); !slices.Equal(res.Conflicts, conflict) {
		t.Fatalf("restore after kubectl's edit: %+v", res)
	}
	// A change that only carries the target does not take the list back.
	if res := apply(t, p, providers.ObjectChange{Address: h, Attributes: map[addrs.Path]values.Value{AttrTargetCPU: values.CountOf(85), AttrMinReplicas: values.CountOf(4)},
		Changed: []addrs.Path{AttrMinReplicas}, Force: true}); res.Err != "" {
		t.Fatal(res.Err)
	}
	hpa = want("after the conflicts", pods+"Resource cpu Utilization 85; Resource memory Utilization 75")
	if owns(t, hpa, Manager, pathMetrics) {
		t.Fatal("a change that carried the target took the list back")
	}

	// Taken again (the gate allowed it): kubectl's memory target stays.
	if res := apply(t, p, set(90, true)); res.Err != "" {
		t.Fatal(res.Err)
	}
	want("after the takeover", pods+"Resource cpu Utilization 90; Resource memory Utilization 75")
	// The restore: the user's 70 in the list as it is, the list handed
	// back, in the dry run nothing changed.
	if dr := p.PlanChange(ctxT(t), providers.PlanChangeRequest{Changes: []providers.ObjectChange{withManager(restore)}}).Results[0]; dr.Err != "" {
		t.Fatalf("dry run of the restore: %+v", dr)
	}
	want("after the restore's dry run", pods+"Resource cpu Utilization 90; Resource memory Utilization 75")
	if res := apply(t, p, restore); res.Err != "" {
		t.Fatal(res.Err)
	}
	for _, when := range []string{"after the restore", "after a later minReplicas change"} {
		hpa = want(when, pods+"Resource cpu Utilization 70; Resource memory Utilization 75")
		if owns(t, hpa, Manager, pathMetrics) || !owns(t, hpa, HandbackManager, pathMetrics) {
			t.Fatalf("%s: spec.metrics should be handed back: %+v", when, hpa.GetManagedFields())
		}
		if o := read(t, p, h); o.Attributes[AttrTargetCPU] != values.CountOf(70) || o.Managers[AttrTargetCPU] != HandbackManager {
			t.Fatalf("%s: read %v %v", when, o.Attributes, o.Managers)
		}
		// Another field moves; the restored list is not named.
		if res := apply(t, p, providers.ObjectChange{Address: h, Attributes: map[addrs.Path]values.Value{AttrMinReplicas: values.CountOf(5)}, Changed: []addrs.Path{AttrMinReplicas}}); res.Err != "" {
			t.Fatal(res.Err)
		}
	}
}

// TestHPATargetCPUWithoutCPUMetric: an HPA with no CPU utilisation
// metric, or two, has no target to read, and writing one is refused
// (setpoint adds no metric the user did not choose), its list untouched.
func TestHPATargetCPUWithoutCPUMetric(t *testing.T) {
	env := kubetest.Shared(t)
	ns := env.Namespace(t)
	userHPA(t, env, ns, "mem", `  metrics:
  - type: Resource
    resource: {name: memory, target: {type: Utilization, averageUtilization: 60}}
  - type: Resource
    resource: {name: cpu, target: {type: AverageValue, averageValue: 200m}}
`)
	userHPA(t, env, ns, "two", `  metrics:
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 60}}
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 90}}
`)
	p := newProvider(t, env.Config())
	for name, why := range map[string]string{
		"mem": "has no cpu Resource metric with a Utilization target (its metrics: \"Resource memory\", \"Resource cpu\"): setpoint changes the target of the user's CPU metric, it does not add a metric",
		"two": "has 2 cpu Resource metrics with a Utilization target",
	} {
		h := addr(KindHPA, ns, name)
		before := metricsText(hpaOf(t, env, ns, name))
		if o := read(t, p, h); o.Attributes[AttrTargetCPU].IsValid() || o.Managers[AttrTargetCPU] != "" {
			t.Fatalf("%s: a CPU target read: %v %v", name, o.Attributes, o.Managers)
		}
		write := providers.ObjectChange{Address: h, Attributes: map[addrs.Path]values.Value{AttrTargetCPU: values.CountOf(70)}, Changed: []addrs.Path{AttrTargetCPU}, Force: true}
		restore := providers.ObjectChange{Address: h, Attributes: map[addrs.Path]values.Value{}, Restored: map[addrs.Path]values.Value{AttrTargetCPU: values.CountOf(70)}, Force: true}
		for what, res := range map[string]providers.ObjectResult{
			"dry run": p.PlanChange(ctxT(t), providers.PlanChangeRequest{Changes: []providers.ObjectChange{withManager(write)}}).Results[0],
			"write":   apply(t, p, write),
			"restore": apply(t, p, restore),
		} {
			if !strings.Contains(res.Err, why) || len(res.Conflicts) > 0 {
				t.Errorf("%s: %s: %+v; want an error saying %q", name, what, res, why)
			}
		}
		hpa := hpaOf(t, env, ns, name)
		if got := metricsText(hpa); got != before || owns(t, hpa, Manager, pathMetrics) || owns(t, hpa, HandbackManager, pathMetrics) {
			t.Fatalf("%s: metrics %s (were %s), managed %+v", name, got, before, hpa.GetManagedFields())
		}
	}
}

// TestHPAScaleDownWindow: the scale-down stabilization window is read
// when set, written as a field of its own (the behavior's policies and
// selectPolicy stay the user's), bounded as the API server bounds it, and
// restored to the user's value and handed back.
func TestHPAScaleDownWindow(t *testing.T) {
	env := kubetest.Shared(t)
	ns := env.Namespace(t)
	userHPA(t, env, ns, "web", `  behavior:
    scaleDown:
      stabilizationWindowSeconds: 120
      selectPolicy: Min
      policies:
      - {type: Percent, value: 10, periodSeconds: 60}
      - {type: Pods, value: 2, periodSeconds: 30}
    scaleUp:
      stabilizationWindowSeconds: 15
      policies:
      - {type: Pods, value: 4, periodSeconds: 15}
`+threeMetrics)
	p := newProvider(t, env.Config())
	h := addr(KindHPA, ns, "web")
	if o := read(t, p, h); o.Attributes[AttrScaleDownWindow] != values.CountOf(120) || o.Managers[AttrScaleDownWindow] != "kubectl-client-side-apply" {
		t.Fatalf("read: %v %v", o.Attributes, o.Managers)
	}
	behavior := func(hpa *autoscalingv2.HorizontalPodAutoscaler) string {
		b, err := json.Marshal(hpa.Spec.Behavior)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	userBehavior := behavior(hpaOf(t, env, ns, "web"))
	// The user's behavior with the window w.
	withWindow := func(w int) string {
		return strings.Replace(userBehavior, `"stabilizationWindowSeconds":120`, fmt.Sprintf(`"stabilizationWindowSeconds":%d`, w), 1)
	}
	check := func(when string, w int, manager string) {
		t.Helper()
		hpa := hpaOf(t, env, ns, "web")
		if got := behavior(hpa); got != withWindow(w) {
			t.Fatalf("%s: behavior\n%s\nwant\n%s", when, got, withWindow(w))
		}
		if got := metricsText(hpa); got != "Pods requests_per_second AverageValue 10; Resource cpu Utilization 70; Resource memory Utilization 80" {
			t.Fatalf("%s: metrics %s", when, got)
		}
		if o := read(t, p, h); o.Attributes[AttrScaleDownWindow] != values.CountOf(int64(w)) || o.Managers[AttrScaleDownWindow] != manager {
			t.Fatalf("%s: read %v %v", when, o.Attributes[AttrScaleDownWindow], o.Managers)
		}
	}
	set := func(w int64) providers.ObjectChange {
		return providers.ObjectChange{Address: h, Attributes: map[addrs.Path]values.Value{AttrScaleDownWindow: values.CountOf(w)}, Changed: []addrs.Path{AttrScaleDownWindow}, Force: true}
	}
	// Above what Kubernetes takes: refused before any request.
	if res := apply(t, p, set(3601)); !strings.Contains(res.Err, "above 3600") {
		t.Fatalf("a window of 3601 s: %+v", res)
	}
	if res := apply(t, p, set(600)); res.Err != "" || res.After[AttrScaleDownWindow] != values.CountOf(600) {
		t.Fatalf("write: %+v", res)
	}
	check("after the write", 600, Manager)
	if !owns(t, hpaOf(t, env, ns, "web"), Manager, AttrScaleDownWindow) || owns(t, hpaOf(t, env, ns, "web"), Manager, addrs.MustPath("spec.behavior.scaleDown.policies")) {
		t.Fatal("setpoint should own the window and nothing else of the behavior")
	}
	// The restore: the user's 120, handed back, kept by a later apply.
	restore := providers.ObjectChange{Address: h, Attributes: map[addrs.Path]values.Value{AttrMinReplicas: values.CountOf(3)}, Restored: map[addrs.Path]values.Value{AttrScaleDownWindow: values.CountOf(120)}, Force: true}
	if res := apply(t, p, restore); res.Err != "" {
		t.Fatal(res.Err)
	}
	check("after the restore", 120, HandbackManager)
	if owns(t, hpaOf(t, env, ns, "web"), Manager, AttrScaleDownWindow) {
		t.Fatal("the restored window is still setpoint's")
	}
	if res := apply(t, p, providers.ObjectChange{Address: h, Attributes: map[addrs.Path]values.Value{AttrMinReplicas: values.CountOf(4)}, Changed: []addrs.Path{AttrMinReplicas}, Force: true}); res.Err != "" {
		t.Fatal(res.Err)
	}
	check("after a later minReplicas change", 120, HandbackManager)

	// An HPA with no behavior waits 300 s, and its window reads so, with
	// no manager: the user's value an NFR records and may put back.
	userHPA(t, env, ns, "plain", "")
	// So does one whose behavior leaves it out (Kubernetes' defaults fill
	// in the policies, not the window).
	userHPA(t, env, ns, "up", "  behavior: {scaleUp: {stabilizationWindowSeconds: 0}}\n")
	if o := read(t, p, addr(KindHPA, ns, "up")); o.Attributes[AttrScaleDownWindow] != values.CountOf(300) || o.Managers[AttrScaleDownWindow] != "" {
		t.Fatalf("the window of an HPA whose behavior has none: %v %v", o.Attributes, o.Managers)
	}
	plain := addr(KindHPA, ns, "plain")
	if o := read(t, p, plain); o.Attributes[AttrScaleDownWindow] != values.CountOf(300) || o.Managers[AttrScaleDownWindow] != "" {
		t.Fatalf("the window of an HPA without one: %v %v", o.Attributes, o.Managers)
	}
	// Written, the window is setpoint's alone (the API server fills the
	// rest of the behavior with Kubernetes' defaults, owned by nobody); a
	// release keeps setpoint's value, a restore writes the 300 read.
	if res := apply(t, p, providers.ObjectChange{Address: plain, Attributes: map[addrs.Path]values.Value{AttrScaleDownWindow: values.CountOf(900)}, Changed: []addrs.Path{AttrScaleDownWindow}}); res.Err != "" {
		t.Fatal(res.Err)
	}
	hpa := hpaOf(t, env, ns, "plain")
	if o := read(t, p, plain); o.Attributes[AttrScaleDownWindow] != values.CountOf(900) || o.Managers[AttrScaleDownWindow] != Manager ||
		owns(t, hpa, Manager, addrs.MustPath("spec.behavior.scaleDown.policies")) || owns(t, hpa, Manager, addrs.MustPath("spec.behavior.scaleUp.policies")) {
		t.Fatalf("written on an HPA without behavior: %v %v %+v", o.Attributes, o.Managers, hpa.GetManagedFields())
	}
	if res := apply(t, p, providers.ObjectChange{Address: plain, Attributes: map[addrs.Path]values.Value{}, Released: []addrs.Path{AttrScaleDownWindow}}); res.Err != "" {
		t.Fatal(res.Err)
	}
	if o := read(t, p, plain); o.Attributes[AttrScaleDownWindow] != values.CountOf(900) || o.Managers[AttrScaleDownWindow] != HandbackManager {
		t.Fatalf("released: %v %v", o.Attributes, o.Managers)
	}
}
