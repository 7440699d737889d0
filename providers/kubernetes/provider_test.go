package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/yaml"

	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/internal/kubetest"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/kubernetes/agentcr"
)

func TestMain(m *testing.M) { kubetest.Main(m, kubetest.WithCRDs("../../deploy/crds")) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newProvider is a provider on the shared API server as the admin.
func newProvider(t *testing.T, rc *rest.Config) *Provider {
	t.Helper()
	p, err := NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func addr(kind, ns, name string) providers.Address {
	return providers.Address{Provider: "kubernetes", Kind: kind, Namespace: ns, Name: name}
}

// deployment is a Deployment as `kubectl create` would make it, with an
// "app" container (memory 256Mi/512Mi) and a "side" one.
func deployment(ns, name string, replicas int) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %s, namespace: %s, labels: {app: %s}}
spec:
  replicas: %d
  selector: {matchLabels: {app: %s}}
  template:
    metadata: {labels: {app: %s}}
    spec:
      containers:
      - name: app
        image: registry.example/app:1
        resources: {requests: {memory: 256Mi, cpu: 100m}, limits: {memory: 512Mi}}
      - name: side
        image: registry.example/side:1
`, name, ns, name, replicas, name, name)
}

// create makes the objects of a YAML document as `kubectl apply` does the
// first time: a create by field manager kubectl-client-side-apply.
func create(t *testing.T, env *kubetest.Env, doc string) {
	t.Helper()
	var u unstructured.Unstructured
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	var k *kind
	for _, kk := range kinds {
		if kk.apiKind == u.GetKind() && kk.apiVersion == u.GetAPIVersion() {
			k = kk
		}
	}
	if k == nil {
		t.Fatalf("create: no kind for %s", u.GetKind())
	}
	if _, err := env.Dynamic(t).Resource(k.gvr).Namespace(u.GetNamespace()).Create(ctxT(t), &u, metav1.CreateOptions{FieldManager: "kubectl-client-side-apply"}); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, p *Provider, a providers.Address) providers.Object {
	t.Helper()
	resp := p.Read(ctxT(t), providers.ReadRequest{Addresses: []providers.Address{a}})
	if len(resp.Diagnostics) > 0 {
		t.Fatalf("read %s: %v", a, resp.Diagnostics)
	}
	return resp.Objects[0]
}

func apply(t *testing.T, p *Provider, c providers.ObjectChange) providers.ObjectResult {
	t.Helper()
	if c.Manager == "" {
		c.Manager = Manager
	}
	if c.Action == action.NoOp {
		c.Action = action.Update
	}
	return p.Apply(ctxT(t), providers.ApplyRequest{Now: time.Now(), Changes: []providers.ObjectChange{c}}).Results[0]
}

func events(t *testing.T, env *kubetest.Env, ns, name string) []corev1.Event {
	t.Helper()
	l, err := env.Clientset(t).CoreV1().Events(ns).List(ctxT(t), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// A Deployment kubectl made, then kubectl-client-side-apply'd: setpoint's
// apply of a field kubectl owns is a conflict naming kubectl, unless
// forced; forced, setpoint owns it and an Event says so with the numbers.
func TestApplyAgainstKubectlClientSideApply(t *testing.T) {
	env := kubetest.Shared(t)
	ns := env.Namespace(t)
	cs := env.Clientset(t)
	// What `kubectl apply` (client-side) writes: an Update by
	// kubectl-client-side-apply holding every field of the manifest.
	create(t, env, deployment(ns, "web", 2))
	raw, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{"kubectl.kubernetes.io/last-applied-configuration": "{}"}}, "spec": map[string]any{"replicas": 2}})
	if _, err := cs.AppsV1().Deployments(ns).Patch(ctxT(t), "web", types.MergePatchType, raw, metav1.PatchOptions{FieldManager: "kubectl-client-side-apply"}); err != nil {
		t.Fatal(err)
	}
	p := newProvider(t, env.Config())
	a := addr(KindDeployment, ns, "web")
	o := read(t, p, a)
	if !o.Exists || o.Attributes[AttrReplicas] != values.CountOf(2) || o.Generation < 1 {
		t.Fatalf("read: %+v", o)
	}
	if m := o.Managers[AttrReplicas]; m != "kubectl-client-side-apply" {
		t.Fatalf("manager of spec.replicas: %q (managers %v)", m, o.Managers)
	}
	if o.Attributes[ContainerAttr("app", "requests")] != values.BytesOf(256<<20) || o.Attributes[ContainerAttr("app", "limits")] != values.BytesOf(512<<20) {
		t.Fatalf("memory: %v", o.Attributes)
	}
	change := providers.ObjectChange{Address: a, Attributes: map[addrs.Path]values.Value{AttrReplicas: values.CountOf(5)},
		Changed: []addrs.Path{AttrReplicas}, Reason: "spec.replicas 2 → 5: ceil(240 rps / 50 rps per pod) = 5"}
	// The dry run reports the conflict too, and stores nothing.
	dr := p.PlanChange(ctxT(t), providers.PlanChangeRequest{Changes: []providers.ObjectChange{withManager(change)}}).Results[0]
	if len(dr.Conflicts) != 1 || dr.Conflicts[0].Manager != "kubectl-client-side-apply" || dr.Conflicts[0].Path != AttrReplicas {
		t.Fatalf("dry-run conflicts: %+v", dr)
	}
	res := apply(t, p, change)
	if len(res.Conflicts) != 1 || res.Conflicts[0].Manager != "kubectl-client-side-apply" || res.Conflicts[0].Path != AttrReplicas {
		t.Fatalf("conflicts: %+v", res)
	}
	if got := read(t, p, a).Attributes[AttrReplicas]; got != values.CountOf(2) {
		t.Fatalf("a conflicting apply changed replicas to %s", got)
	}
	change.Force = true
	res = apply(t, p, change)
	if res.Err != "" || res.After[AttrReplicas] != values.CountOf(5) {
		t.Fatalf("forced apply: %+v", res)
	}
	o = read(t, p, a)
	if o.Attributes[AttrReplicas] != values.CountOf(5) || o.Managers[AttrReplicas] != Manager {
		t.Fatalf("after the takeover: %v %v", o.Attributes[AttrReplicas], o.Managers)
	}
	var applied, conflicted bool
	for _, e := range events(t, env, ns, "web") {
		switch e.Reason {
		case "SetpointApplied":
			applied = strings.Contains(e.Message, "spec.replicas 2 → 5") && strings.Contains(e.Message, "ceil(240 rps")
		case "SetpointConflict":
			conflicted = e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, "kubectl-client-side-apply")
		}
	}
	if !applied || !conflicted {
		t.Fatalf("events: applied %v conflict %v: %+v", applied, conflicted, events(t, env, ns, "web"))
	}
}

func withManager(c providers.ObjectChange) providers.ObjectChange {
	c.Manager, c.Action = Manager, action.Update
	return c
}

// A field another applier (a GitOps controller) manages is a conflict;
// setpoint's own earlier fields are never dropped by a later apply, even
// one whose attributes forgot them.
func TestOwnershipAndNothingDropped(t *testing.T) {
	env := kubetest.Shared(t)
	ns := env.Namespace(t)
	create(t, env, deployment(ns, "api", 3))
	dyn := env.Dynamic(t)
	gitops := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "api", "namespace": ns}, "spec": map[string]any{"replicas": int64(3)}}}
	if _, err := dyn.Resource(kinds[KindDeployment].gvr).Namespace(ns).Apply(ctxT(t), "api", gitops, metav1.ApplyOptions{FieldManager: "argocd-controller", Force: true}); err != nil {
		t.Fatal(err)
	}
	p := newProvider(t, env.Config())
	a := addr(KindDeployment, ns, "api")
	req, lim := ContainerAttr("app", "requests"), ContainerAttr("app", "limits")
	// kubectl made the memory fields: taking them is a conflict the gate
	// allows for a manager that is not a GitOps controller (Force).
	res := apply(t, p, providers.ObjectChange{Address: a, Attributes: map[addrs.Path]values.Value{req: values.BytesOf(320 << 20), lim: values.BytesOf(480 << 20)}, Changed: []addrs.Path{req, lim}, Force: true})
	if res.Err != "" {
		t.Fatal(res.Err)
	}
	res = apply(t, p, providers.ObjectChange{Address: a, Attributes: map[addrs.Path]values.Value{AttrReplicas: values.CountOf(6)}, Changed: []addrs.Path{AttrReplicas}})
	// Both managers of the field are named (kubectl made it, the GitOps
	// controller applied it since), each a cause of its own.
	if len(res.Conflicts) != 2 || res.Conflicts[0].Manager != "argocd-controller" || res.Conflicts[1].Manager != "kubectl-client-side-apply" {
		t.Fatalf("conflict with the GitOps manager: %+v", res)
	}
	// The engine's state lost the memory fields: the apply still carries
	// them (read back from managedFields), so they are neither removed nor
	// reset.
	res = apply(t, p, providers.ObjectChange{Address: a, Attributes: map[addrs.Path]values.Value{AttrReplicas: values.CountOf(6)}, Changed: []addrs.Path{AttrReplicas}, Force: true})
	if res.Err != "" {
		t.Fatal(res.Err)
	}
	o := read(t, p, a)
	if o.Attributes[req] != values.BytesOf(320<<20) || o.Attributes[lim] != values.BytesOf(480<<20) || o.Managers[req] != Manager || o.Managers[lim] != Manager {
		t.Fatalf("setpoint's memory fields after an apply that did not name them: %v %v", o.Attributes, o.Managers)
	}
	// The other container and the image are untouched.
	d, err := env.Clientset(t).AppsV1().Deployments(ns).Get(ctxT(t), "api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Spec.Template.Spec.Containers) != 2 || d.Spec.Template.Spec.Containers[0].Image != "registry.example/app:1" {
		t.Fatalf("containers: %+v", d.Spec.Template.Spec.Containers)
	}
	// Released: the value stays, setpoint no longer manages it.
	res = apply(t, p, providers.ObjectChange{Address: a, Attributes: map[addrs.Path]values.Value{AttrReplicas: values.CountOf(6), lim: values.BytesOf(480 << 20)}, Released: []addrs.Path{req}})
	if res.Err != "" {
		t.Fatal(res.Err)
	}
	o = read(t, p, a)
	if o.Attributes[req] != values.BytesOf(320<<20) || o.Managers[req] != HandbackManager || o.Managers[lim] != Manager {
		t.Fatalf("after release: %v %v", o.Attributes[req], o.Managers)
	}
	// A second release keeps the first one's value too.
	res = apply(t, p, providers.ObjectChange{Address: a, Attributes: map[addrs.Path]values.Value{AttrReplicas: values.CountOf(6)}, Released: []addrs.Path{lim}})
	if res.Err != "" {
		t.Fatal(res.Err)
	}
	o = read(t, p, a)
	if o.Attributes[req] != values.BytesOf(320<<20) || o.Attributes[lim] != values.BytesOf(480<<20) || o.Managers[req] != HandbackManager || o.Managers[lim] != HandbackManager {
		t.Fatalf("after the second release: %v %v", o.Attributes, o.Managers)
	}
	// A dry run the server accepts stores nothing.
	dr := p.PlanChange(ctxT(t), providers.PlanChangeRequest{Changes: []providers.ObjectChange{withManager(providers.ObjectChange{Address: a,
		Attributes: map[addrs.Path]values.Value{AttrReplicas: values.CountOf(9)}, Changed: []addrs.Path{AttrReplicas}})}}).Results[0]
	if dr.Err != "" || dr.After[AttrReplicas] != values.CountOf(9) {
		t.Fatalf("dry run: %+v", dr)
	}
	if o = read(t, p, a); o.Attributes[AttrReplicas] != values.CountOf(6) {
		t.Fatalf("a dry run stored replicas %v", o.Attributes[AttrReplicas])
	}
}

// An HPA is created only when the change asks; an existing HPA's
// maxReplicas and metrics are left to their manager.
func TestHPA(t *testing.T) {
	env := kubetest.Shared(t)
	ns := env.Namespace(t)
	env.Apply(t, deployment(ns, "shop", 2))
	p := newProvider(t, env.Config())
	h := addr(KindHPA, ns, "shop")
	res := apply(t, p, providers.ObjectChange{Address: h, Attributes: map[addrs.Path]values.Value{AttrMinReplicas: values.CountOf(3)}, Changed: []addrs.Path{AttrMinReplicas}})
	if !strings.Contains(res.Err, "does not exist") {
		t.Fatalf("an update of a missing HPA: %+v", res)
	}
	if o := read(t, p, h); o.Exists {
		t.Fatal("an update created the HPA")
	}
	create := providers.ObjectChange{Address: h, Action: action.Create, Attributes: map[addrs.Path]values.Value{
		AttrMinReplicas: values.CountOf(3), AttrMaxReplicas: values.CountOf(12), AttrTargetCPU: values.CountOf(70)}, Changed: []addrs.Path{AttrMinReplicas}}
	if res = apply(t, p, create); res.Err != "" {
		t.Fatal(res.Err)
	}
	hpa, err := env.Clientset(t).AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctxT(t), "shop", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if hpa.Spec.ScaleTargetRef.Name != "shop" || hpa.Spec.ScaleTargetRef.Kind != "Deployment" || *hpa.Spec.MinReplicas != 3 || hpa.Spec.MaxReplicas != 12 ||
		len(hpa.Spec.Metrics) != 1 || *hpa.Spec.Metrics[0].Resource.Target.AverageUtilization != 70 {
		t.Fatalf("created HPA: %+v", hpa.Spec)
	}
	// A later change of minReplicas alone keeps the target and metrics
	// setpoint set at creation.
	res = apply(t, p, providers.ObjectChange{Address: h, Attributes: map[addrs.Path]values.Value{AttrMinReplicas: values.CountOf(4)}, Changed: []addrs.Path{AttrMinReplicas}})
	if res.Err != "" {
		t.Fatal(res.Err)
	}
	o := read(t, p, h)
	if o.Attributes[AttrMinReplicas] != values.CountOf(4) || o.Attributes[AttrMaxReplicas] != values.CountOf(12) || o.Attributes[AttrTargetCPU] != values.CountOf(70) {
		t.Fatalf("after a minReplicas change: %v", o.Attributes)
	}

	// Someone else's HPA: minReplicas changes (forced past its creator),
	// maxReplicas and metrics stay its own.
	env.Apply(t, deployment(ns, "other", 2))
	env.Apply(t, fmt.Sprintf(`apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: other, namespace: %s}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: other}
  minReplicas: 1
  maxReplicas: 10
  metrics:
  - type: Resource
    resource: {name: memory, target: {type: Utilization, averageUtilization: 60}}
`, ns))
	oh := addr(KindHPA, ns, "other")
	res = apply(t, p, providers.ObjectChange{Address: oh, Attributes: map[addrs.Path]values.Value{AttrMinReplicas: values.CountOf(4)}, Changed: []addrs.Path{AttrMinReplicas}, Force: true})
	if res.Err != "" {
		t.Fatal(res.Err)
	}
	o = read(t, p, oh)
	if o.Attributes[AttrMinReplicas] != values.CountOf(4) || o.Attributes[AttrMaxReplicas] != values.CountOf(10) || o.Managers[AttrMaxReplicas] == Manager {
		t.Fatalf("other HPA: %v %v", o.Attributes, o.Managers)
	}
	if _, has := o.Attributes[AttrTargetCPU]; has {
		t.Fatalf("a memory metric read as a CPU target: %v", o.Attributes)
	}
	other, _ := env.Clientset(t).AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctxT(t), "other", metav1.GetOptions{})
	if len(other.Spec.Metrics) != 1 || other.Spec.Metrics[0].Resource.Name != corev1.ResourceMemory {
		t.Fatalf("metrics touched: %+v", other.Spec.Metrics)
	}
	// The API server's validation shows in the dry run: minReplicas above
	// maxReplicas is refused, and nothing is stored.
	dr := p.PlanChange(ctxT(t), providers.PlanChangeRequest{Changes: []providers.ObjectChange{withManager(providers.ObjectChange{Address: oh,
		Attributes: map[addrs.Path]values.Value{AttrMinReplicas: values.CountOf(20)}, Changed: []addrs.Path{AttrMinReplicas}})}}).Results[0]
	if !strings.Contains(dr.Err, "minReplicas") {
		t.Fatalf("dry run of minReplicas 20 > maxReplicas 10: %+v", dr)
	}
	if o = read(t, p, oh); o.Attributes[AttrMinReplicas] != values.CountOf(4) {
		t.Fatalf("a dry run stored %v", o.Attributes[AttrMinReplicas])
	}
}

func TestKnative(t *testing.T) {
	env := kubetest.Shared(t)
	ns := env.Namespace(t)
	env.Apply(t, fmt.Sprintf(`apiVersion: serving.knative.dev/v1
kind: Service
metadata: {name: fn, namespace: %s}
spec:
  template:
    metadata:
      annotations: {autoscaling.knative.dev/max-scale: "20"}
    spec:
      containers:
      - name: user-container
        image: registry.example/fn:1
        resources: {requests: {memory: 128Mi}, limits: {memory: 256Mi}}
`, ns))
	p := newProvider(t, env.Config())
	a := addr(KindKnative, ns, "fn")
	o := read(t, p, a)
	if o.Attributes[AttrMaxScale] != values.CountOf(20) || o.Attributes[AttrReadyReplicas] != values.CountOf(0) || o.Attributes[ContainerAttr("user-container", "requests")] != values.BytesOf(128<<20) {
		t.Fatalf("read: %v", o.Attributes)
	}
	// Its ready pods are the ones labelled with it: a ready one of fn, one
	// not ready, and a ready one of another service.
	for _, pod := range []struct {
		name, svc string
		ready     bool
	}{{"fn-1", "fn", true}, {"fn-2", "fn", false}, {"other-1", "other", true}} {
		env.Apply(t, fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: %s, namespace: %s, labels: {serving.knative.dev/service: %s}}\nspec: {containers: [{name: c, image: x}]}\n", pod.name, ns, pod.svc))
		if pod.ready {
			po, err := env.Clientset(t).CoreV1().Pods(ns).Get(ctxT(t), pod.name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			po.Status.Phase = corev1.PodRunning
			po.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
			if _, err := env.Clientset(t).CoreV1().Pods(ns).UpdateStatus(ctxT(t), po, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if o := read(t, p, a); o.Attributes[AttrReadyReplicas] != values.CountOf(1) {
		t.Fatalf("ready pods of fn: %v", o.Attributes[AttrReadyReplicas])
	}
	res := apply(t, p, providers.ObjectChange{Address: a, Attributes: map[addrs.Path]values.Value{AttrMinScale: values.CountOf(3)}, Changed: []addrs.Path{AttrMinScale}})
	if res.Err != "" {
		t.Fatal(res.Err)
	}
	u, err := env.Dynamic(t).Resource(kinds[KindKnative].gvr).Namespace(ns).Get(ctxT(t), "fn", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ann, _, _ := unstructured.NestedStringMap(u.Object, "spec", "template", "metadata", "annotations")
	if ann["autoscaling.knative.dev/min-scale"] != "3" || ann["autoscaling.knative.dev/max-scale"] != "20" {
		t.Fatalf("annotations: %v", ann)
	}
	cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	if len(cs) != 1 {
		t.Fatalf("containers: %v", cs)
	}
	if o = read(t, p, a); o.Managers[AttrMinScale] != Manager {
		t.Fatalf("manager of min-scale: %v", o.Managers)
	}
	// Memory on a Knative Service is refused before anything is sent.
	res = apply(t, p, providers.ObjectChange{Address: a, Attributes: map[addrs.Path]values.Value{ContainerAttr("user-container", "requests"): values.BytesOf(200 << 20)}})
	if !strings.Contains(res.Err, "atomic") {
		t.Fatalf("memory on Knative: %+v", res)
	}
}

// pod makes a pod labelled as the Deployment "mem"'s, owned by the
// ReplicaSet with uid owner (none when ""), with the given memory and CPU.
func pod(ns, name, owner, reqMem, limMem, cpu string) string {
	res, refs := "", ""
	if owner != "" {
		refs = fmt.Sprintf(", ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: mem-1, uid: %s, controller: true}]", owner)
	}
	if reqMem != "" {
		res = fmt.Sprintf(`
    resources: {requests: {memory: %s, cpu: %s}, limits: {memory: %s, cpu: %s}}`, reqMem, cpu, limMem, cpu)
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: %s, labels: {app: mem}%s}
spec:
  containers:
  - name: app
    image: registry.example/app:1%s
`, name, ns, refs, res)
}

func podMemory(t *testing.T, env *kubetest.Env, ns, name string) (string, string) {
	t.Helper()
	p, err := env.Clientset(t).CoreV1().Pods(ns).Get(ctxT(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, l := p.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory], p.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory]
	return r.String(), l.String()
}

func TestInPlaceResize(t *testing.T) {
	env := kubetest.Shared(t)
	ns := env.Namespace(t)
	create(t, env, deployment(ns, "mem", 2))
	d, err := env.Clientset(t).AppsV1().Deployments(ns).Get(ctxT(t), "mem", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// What the Deployment controller would make: a ReplicaSet it controls,
	// whose pods it controls.
	rs := env.Apply(t, fmt.Sprintf(`apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: mem-1
  namespace: %s
  labels: {app: mem}
  ownerReferences: [{apiVersion: apps/v1, kind: Deployment, name: mem, uid: %s, controller: true}]
spec:
  replicas: 2
  selector: {matchLabels: {app: mem}}
  template:
    metadata: {labels: {app: mem}}
    spec: {containers: [{name: app, image: registry.example/app:1}]}
`, ns, d.UID))[0]
	owner := string(rs.GetUID())
	env.Apply(t, pod(ns, "mem-burst", owner, "256Mi", "512Mi", "100m"))
	env.Apply(t, pod(ns, "mem-guar", owner, "256Mi", "256Mi", "100m"))
	// A canary's pod with the same labels is not the Deployment's.
	env.Apply(t, pod(ns, "canary", "", "256Mi", "512Mi", "100m"))
	p := newProvider(t, env.Config())
	a := addr(KindDeployment, ns, "mem")
	req, lim := ContainerAttr("app", "requests"), ContainerAttr("app", "limits")
	change := providers.ObjectChange{Address: a, Attributes: map[addrs.Path]values.Value{req: values.BytesOf(384 << 20), lim: values.BytesOf(576 << 20)},
		Changed: []addrs.Path{req, lim}, InPlace: providers.InPlaceFallbackHold, Force: true}
	// A limit apart from the request would make the Guaranteed pod
	// Burstable, unlike its template: refused, and no pod is resized.
	if res := apply(t, p, change); !strings.Contains(res.Err, "mem-guar") || !strings.Contains(res.Err, "QoS class") {
		t.Fatalf("a resize making a Guaranteed pod Burstable: %+v", res)
	}
	if r, l := podMemory(t, env, ns, "mem-burst"); r != "256Mi" || l != "512Mi" {
		t.Fatalf("a refused resize changed a pod to %s/%s", r, l)
	}
	if err := env.Clientset(t).CoreV1().Pods(ns).Delete(ctxT(t), "mem-guar", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	if res := apply(t, p, change); res.Err != "" {
		t.Fatal(res.Err)
	}
	if r, l := podMemory(t, env, ns, "mem-burst"); r != "384Mi" || l != "576Mi" {
		t.Fatalf("burstable pod resized to %s/%s", r, l)
	}
	if r, l := podMemory(t, env, ns, "canary"); r != "256Mi" || l != "512Mi" {
		t.Fatalf("a pod of another owner was resized to %s/%s", r, l)
	}
	if o := read(t, p, a); o.Attributes[req] != values.BytesOf(384<<20) {
		t.Fatalf("template: %v", o.Attributes[req])
	}
	// A BestEffort pod cannot be given memory in place (its QoS class
	// would change): with fallback hold the template stays too.
	env.Apply(t, pod(ns, "mem-none", owner, "", "", ""))
	change.Attributes = map[addrs.Path]values.Value{req: values.BytesOf(448 << 20), lim: values.BytesOf(672 << 20)}
	res := apply(t, p, change)
	if !strings.Contains(res.Err, "QoS class") || !strings.Contains(res.Err, "hold") {
		t.Fatalf("hold: %+v", res)
	}
	if o := read(t, p, a); o.Attributes[req] != values.BytesOf(384<<20) {
		t.Fatalf("hold changed the template to %v", o.Attributes[req])
	}
	// With fallback rollout the template changes anyway.
	change.InPlace = providers.InPlaceFallbackRollout
	if res := apply(t, p, change); res.Err != "" {
		t.Fatal(res.Err)
	}
	// Hold left every pod as it was, the resizable ones too.
	if r, _ := podMemory(t, env, ns, "mem-burst"); r != "384Mi" {
		t.Fatalf("a refused resize changed another pod to %s", r)
	}
	if o := read(t, p, a); o.Attributes[req] != values.BytesOf(448<<20) {
		t.Fatalf("rollout fallback left the template at %v", o.Attributes[req])
	}
}

// Objects of one kind in one namespace are read with one List.
func TestReadListsOnce(t *testing.T) {
	env := kubetest.Shared(t)
	ns := env.Namespace(t)
	var as []providers.Address
	for i := range 12 {
		name := fmt.Sprintf("d%02d", i)
		env.Apply(t, deployment(ns, name, 1))
		as = append(as, addr(KindDeployment, ns, name))
	}
	as = append(as, addr(KindDeployment, ns, "missing"))
	var gets, lists atomic.Int64
	rc := env.Config()
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			if strings.Contains(r.URL.Path, "/deployments") {
				if strings.HasSuffix(r.URL.Path, "/deployments") {
					lists.Add(1)
				} else {
					gets.Add(1)
				}
			}
			return rt.RoundTrip(r)
		})
	})
	p := newProvider(t, rc)
	resp := p.Read(ctxT(t), providers.ReadRequest{Addresses: as})
	if len(resp.Diagnostics) > 0 {
		t.Fatal(resp.Diagnostics)
	}
	if lists.Load() != 1 || gets.Load() != 0 {
		t.Fatalf("%d lists and %d gets for 13 deployments", lists.Load(), gets.Load())
	}
	for i, o := range resp.Objects[:12] {
		if !o.Exists || o.Address != as[i] || o.Attributes[AttrReplicas] != values.CountOf(1) {
			t.Fatalf("object %d: %+v", i, o)
		}
	}
	if resp.Objects[12].Exists {
		t.Fatal("a missing deployment exists")
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A user allowed to read but not patch Deployments: the read works, the
// apply fails naming the verb, the resource and the namespace, and the
// other object's change in the same request still goes through.
func TestForbidden(t *testing.T) {
	env := kubetest.Shared(t)
	ns := env.Namespace(t)
	env.Apply(t, deployment(ns, "locked", 2))
	env.Apply(t, fmt.Sprintf(`apiVersion: serving.knative.dev/v1
kind: Service
metadata: {name: open, namespace: %[1]s}
spec: {template: {spec: {containers: [{name: c, image: x}]}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: limited, namespace: %[1]s}
rules:
- {apiGroups: [apps], resources: [deployments], verbs: [get, list]}
- {apiGroups: [serving.knative.dev], resources: [services], verbs: [get, list, patch]}
- {apiGroups: [""], resources: [pods], verbs: [list]}
- {apiGroups: [""], resources: [events], verbs: [create]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: limited, namespace: %[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: limited}
subjects: [{kind: User, name: limited-user}]
`, ns))
	p := newProvider(t, env.ConfigAs("limited-user"))
	// The authorizer sees a new Role through its informer: wait for it.
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp := p.Read(ctxT(t), providers.ReadRequest{Addresses: []providers.Address{addr(KindDeployment, ns, "locked")}})
		if len(resp.Diagnostics) == 0 && resp.Objects[0].Exists {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("read as the limited user: %v", resp.Diagnostics)
		}
		time.Sleep(50 * time.Millisecond)
	}
	resp := p.Apply(ctxT(t), providers.ApplyRequest{Now: time.Now(), Changes: []providers.ObjectChange{
		withManager(providers.ObjectChange{Address: addr(KindDeployment, ns, "locked"), Attributes: map[addrs.Path]values.Value{AttrReplicas: values.CountOf(3)}, Changed: []addrs.Path{AttrReplicas}}),
		withManager(providers.ObjectChange{Address: addr(KindKnative, ns, "open"), Attributes: map[addrs.Path]values.Value{AttrMinScale: values.CountOf(2)}, Changed: []addrs.Path{AttrMinScale}}),
	}})
	denied := resp.Results[0].Err
	for _, want := range []string{"forbidden", `cannot patch resource "deployments"`, `"apps"`, ns} {
		if !strings.Contains(denied, want) {
			t.Errorf("the denial %q does not say %q", denied, want)
		}
	}
	if resp.Results[1].Err != "" {
		t.Fatalf("the allowed change failed: %s", resp.Results[1].Err)
	}
}

func TestConfigureErrors(t *testing.T) {
	dir := t.TempDir()
	p := New()
	cfg, _ := json.Marshal(Config{Kubeconfig: filepath.Join(dir, "nope")})
	d := p.Configure(context.Background(), providers.ConfigureRequest{Config: cfg})
	if len(d) != 1 || !strings.Contains(d[0].Message, "nope") || !strings.Contains(d[0].Message, "no such file") {
		t.Fatalf("missing kubeconfig: %v", d)
	}
	// A kubeconfig pointing at a port where nothing listens.
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _ = json.Marshal(Config{Kubeconfig: kc, Timeout: 5 * time.Second})
	d = New().Configure(context.Background(), providers.ConfigureRequest{Config: cfg})
	if len(d) != 1 || !strings.Contains(d[0].Message, "https://127.0.0.1:1 does not answer") {
		t.Fatalf("unreachable server: %v", d)
	}
	cfg, _ = json.Marshal(Config{Kubeconfig: kc, Context: "nosuch"})
	d = New().Configure(context.Background(), providers.ConfigureRequest{Config: cfg})
	if len(d) != 1 || !strings.Contains(d[0].Message, "nosuch") {
		t.Fatalf("unknown context: %v", d)
	}
	// The real server through its kubeconfig.
	env := kubetest.Shared(t)
	cfg, _ = json.Marshal(Config{Kubeconfig: env.Kubeconfig})
	if d = New().Configure(context.Background(), providers.ConfigureRequest{Config: cfg}); len(d) != 0 {
		t.Fatalf("the test server's kubeconfig: %v", d)
	}
}

// The API server goes away: reads and applies fail with the reason, per
// object, and nothing half-done is left; when it returns, the same apply
// goes through once.
func TestAPIServerRestart(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t)
	create(t, env, deployment(ns, "r", 1))
	cfg := env.Config()
	cfg.Timeout = 5 * time.Second
	p := newProvider(t, cfg)
	a := addr(KindDeployment, ns, "r")
	change := providers.ObjectChange{Address: a, Attributes: map[addrs.Path]values.Value{AttrReplicas: values.CountOf(4)}, Changed: []addrs.Path{AttrReplicas}, Force: true}
	if err := env.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	resp := p.Read(ctxT(t), providers.ReadRequest{Addresses: []providers.Address{a}})
	if len(resp.Diagnostics) != 1 || resp.Diagnostics[0].Address == nil || *resp.Diagnostics[0].Address != a || !strings.Contains(resp.Diagnostics[0].Message, "connection refused") {
		t.Fatalf("read with the server down: %+v", resp.Diagnostics)
	}
	if res := apply(t, p, change); !strings.Contains(res.Err, "connection refused") {
		t.Fatalf("apply with the server down: %+v", res)
	}
	if err := env.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	if res := apply(t, p, change); res.Err != "" {
		t.Fatalf("apply after the restart: %+v", res)
	}
	o := read(t, p, a)
	if o.Attributes[AttrReplicas] != values.CountOf(4) || o.Generation != 2 {
		t.Fatalf("after the restart: replicas %v, generation %d (one change: 2)", o.Attributes[AttrReplicas], o.Generation)
	}
}

// A field setpoint applied once and another manager took since (with
// force) is not taken back by a later change that only carries it from the
// state: Force is for the fields the change moves.
func TestCarriedFieldTakenByOthersStays(t *testing.T) {
	env := kubetest.Shared(t)
	ns := env.Namespace(t)
	create(t, env, deployment(ns, "c", 1))
	p := newProvider(t, env.Config())
	a := addr(KindDeployment, ns, "c")
	lim := ContainerAttr("app", "limits")
	if res := apply(t, p, providers.ObjectChange{Address: a, Attributes: map[addrs.Path]values.Value{AttrReplicas: values.CountOf(3), lim: values.BytesOf(480 << 20)},
		Changed: []addrs.Path{AttrReplicas, lim}, Force: true}); res.Err != "" {
		t.Fatal(res.Err)
	}
	gitops := map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "c", "namespace": ns}}
	if err := Encode(KindDeployment, gitops, map[addrs.Path]values.Value{lim: values.BytesOf(600 << 20)}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Dynamic(t).Resource(kinds[KindDeployment].gvr).Namespace(ns).Apply(ctxT(t), "c", &unstructured.Unstructured{Object: gitops}, metav1.ApplyOptions{FieldManager: "argocd-controller", Force: true}); err != nil {
		t.Fatal(err)
	}
	res := apply(t, p, providers.ObjectChange{Address: a, Attributes: map[addrs.Path]values.Value{AttrReplicas: values.CountOf(4), lim: values.BytesOf(480 << 20)},
		Changed: []addrs.Path{AttrReplicas}, Force: true})
	if res.Err != "" {
		t.Fatal(res.Err)
	}
	o := read(t, p, a)
	if o.Attributes[AttrReplicas] != values.CountOf(4) || o.Attributes[lim] != values.BytesOf(600<<20) || o.Managers[lim] != "argocd-controller" {
		t.Fatalf("replicas %v, limit %v (manager %s): the GitOps value must stay", o.Attributes[AttrReplicas], o.Attributes[lim], o.Managers[lim])
	}
}

// The node agents' round trip: setpoint writes a NodeAgentConfig's
// config; each node's agent reads it and reports its own status entry;
// setpoint reads every node's report. Two agents never overwrite each
// other, and a report names the generation it acted on.
func TestNodeAgentConfigRoundTrip(t *testing.T) {
	env := kubetest.Shared(t)
	ns := env.Namespace(t)
	p := newProvider(t, env.Config())
	a := addr(KindNodeAgent, ns, "pools")
	cfg1, _ := values.StructuredOf([]byte(`{"pools":[{"name":"latency","minCPUs":2,"maxCPUs":8}]}`))
	res := apply(t, p, providers.ObjectChange{Address: a, Action: action.Create,
		Attributes: map[addrs.Path]values.Value{AttrAgent: values.StringOf("nri"), AttrAgentConfig: cfg1}, Changed: []addrs.Path{AttrAgentConfig}})
	if res.Err != "" {
		t.Fatal(res.Err)
	}
	agents := map[string]*agentcr.Client{}
	for _, node := range []string{"node-a", "node-b"} {
		agents[node] = &agentcr.Client{Dyn: env.Dynamic(t), Namespace: ns, Name: "pools", Node: node}
		c, err := agents[node].Get(ctxT(t))
		if err != nil || c.Agent != "nri" || string(c.Config) != cfg1.Str() || c.Generation != 1 {
			t.Fatalf("%s reads %+v %v", node, c, err)
		}
		if err := agents[node].Report(ctxT(t), c.Generation, "ok", map[string]any{"pools": map[string]any{"latency": "2-3"}}); err != nil {
			t.Fatal(err)
		}
	}
	o := read(t, p, a)
	for _, node := range []string{"node-a", "node-b"} {
		if o.Attributes[NodeAttr(node, "observedGeneration")] != values.CountOf(1) || o.Attributes[NodeAttr(node, "message")] != values.StringOf("ok") ||
			o.Attributes[NodeAttr(node, "observed")].Str() != `{"pools":{"latency":"2-3"}}` {
			t.Fatalf("%s: %v", node, o.Attributes)
		}
	}
	if o.Attributes[AttrAgentConfig] != cfg1 || o.Managers[AttrAgentConfig] != Manager {
		t.Fatalf("config: %v %v", o.Attributes[AttrAgentConfig], o.Managers)
	}
	// A new config: node-a acts on it, node-b has not yet.
	cfg2, _ := values.StructuredOf([]byte(`{"pools":[{"name":"latency","minCPUs":4,"maxCPUs":8}]}`))
	res = apply(t, p, providers.ObjectChange{Address: a, Attributes: map[addrs.Path]values.Value{AttrAgent: values.StringOf("nri"), AttrAgentConfig: cfg2}, Changed: []addrs.Path{AttrAgentConfig}})
	if res.Err != "" {
		t.Fatal(res.Err)
	}
	c, err := agents["node-a"].Get(ctxT(t))
	if err != nil || c.Generation != 2 || string(c.Config) != cfg2.Str() {
		t.Fatalf("node-a reads %+v %v", c, err)
	}
	if err := agents["node-a"].Report(ctxT(t), c.Generation, "ok", nil); err != nil {
		t.Fatal(err)
	}
	o = read(t, p, a)
	if o.Attributes[NodeAttr("node-a", "observedGeneration")] != values.CountOf(2) || o.Attributes[NodeAttr("node-b", "observedGeneration")] != values.CountOf(1) {
		t.Fatalf("after node-a's second report: %v", o.Attributes)
	}
	// The status is the agents': setpoint cannot write it.
	res = apply(t, p, providers.ObjectChange{Address: a, Attributes: map[addrs.Path]values.Value{NodeAttr("node-a", "message"): values.StringOf("x")}})
	if !strings.Contains(res.Err, "read only") {
		t.Fatalf("writing an agent's report: %+v", res)
	}
}

// A restore writes the user's value and hands the field back in one
// change: a later apply of another field of the object neither drops the
// restored field (server-side apply removes a field its only manager stops
// naming) nor finds it still setpoint's.
func TestRestoreHandsBack(t *testing.T) {
	env := kubetest.Shared(t)
	ns := env.Namespace(t)
	create(t, env, deployment(ns, "r", 1))
	p := newProvider(t, env.Config())
	a := addr(KindDeployment, ns, "r")
	req, lim := ContainerAttr("app", "requests"), ContainerAttr("app", "limits")
	if res := apply(t, p, providers.ObjectChange{Address: a, Attributes: map[addrs.Path]values.Value{AttrReplicas: values.CountOf(3), req: values.BytesOf(192 << 20), lim: values.BytesOf(384 << 20)},
		Changed: []addrs.Path{AttrReplicas, req, lim}, Force: true}); res.Err != "" {
		t.Fatal(res.Err)
	}
	restore := providers.ObjectChange{Address: a, Attributes: map[addrs.Path]values.Value{AttrReplicas: values.CountOf(3)},
		Restored: map[addrs.Path]values.Value{req: values.BytesOf(256 << 20), lim: values.BytesOf(512 << 20)}}
	// The dry run accepts it and changes nothing.
	if dr := p.PlanChange(ctxT(t), providers.PlanChangeRequest{Changes: []providers.ObjectChange{withManager(restore)}}).Results[0]; dr.Err != "" {
		t.Fatalf("dry run of a restore: %s", dr.Err)
	}
	if o := read(t, p, a); o.Attributes[req] != values.BytesOf(192<<20) || o.Managers[req] != Manager {
		t.Fatalf("a dry run changed the object: %v %v", o.Attributes[req], o.Managers[req])
	}
	if res := apply(t, p, restore); res.Err != "" {
		t.Fatal(res.Err)
	}
	owned := func() *fieldpath.Set {
		d, err := env.Dynamic(t).Resource(kinds[KindDeployment].gvr).Namespace(ns).Get(ctxT(t), "r", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return ownedBy(managedSets(d.GetManagedFields()), Manager)
	}
	check := func(when string) {
		t.Helper()
		o := read(t, p, a)
		if o.Attributes[req] != values.BytesOf(256<<20) || o.Attributes[lim] != values.BytesOf(512<<20) {
			t.Fatalf("%s: memory %v / %v, want the user's 256Mi / 512Mi", when, o.Attributes[req], o.Attributes[lim])
		}
		set := owned()
		for _, path := range []addrs.Path{req, lim} {
			at, _ := kinds[KindDeployment].attrOf(path)
			fp, err := fieldPath(at.place())
			if err != nil {
				t.Fatal(err)
			}
			if set.Has(fp) {
				t.Fatalf("%s: %s is still in setpoint's managedFields", when, path)
			}
		}
	}
	check("after the restore")
	// Another field of the object moves; the restored ones are not named.
	if res := apply(t, p, providers.ObjectChange{Address: a, Attributes: map[addrs.Path]values.Value{AttrReplicas: values.CountOf(4)}, Changed: []addrs.Path{AttrReplicas}}); res.Err != "" {
		t.Fatal(res.Err)
	}
	check("after a later apply of spec.replicas")
	if o := read(t, p, a); o.Attributes[AttrReplicas] != values.CountOf(4) {
		t.Fatalf("replicas %v, want 4", o.Attributes[AttrReplicas])
	}
	// A field a GitOps controller took since: a restore of it is a
	// conflict naming the controller, and its value stays.
	setpoint := providers.ObjectChange{Address: a, Attributes: map[addrs.Path]values.Value{AttrReplicas: values.CountOf(4), req: values.BytesOf(192 << 20)}, Changed: []addrs.Path{req}, Force: true}
	if res := apply(t, p, setpoint); res.Err != "" {
		t.Fatal(res.Err)
	}
	gitops := map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "r", "namespace": ns}}
	if err := Encode(KindDeployment, gitops, map[addrs.Path]values.Value{req: values.BytesOf(300 << 20)}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Dynamic(t).Resource(kinds[KindDeployment].gvr).Namespace(ns).Apply(ctxT(t), "r", &unstructured.Unstructured{Object: gitops}, metav1.ApplyOptions{FieldManager: "argocd-controller", Force: true}); err != nil {
		t.Fatal(err)
	}
	late := providers.ObjectChange{Address: a, Attributes: map[addrs.Path]values.Value{AttrReplicas: values.CountOf(4)}, Restored: map[addrs.Path]values.Value{req: values.BytesOf(256 << 20)}}
	if res := apply(t, p, late); len(res.Conflicts) != 1 || res.Conflicts[0].Manager != "argocd-controller" {
		t.Fatalf("a restore over a field argocd-controller took: %+v", res)
	}
	if o := read(t, p, a); o.Attributes[req] != values.BytesOf(300<<20) {
		t.Fatalf("the GitOps value was overwritten: %v", o.Attributes[req])
	}
	// A restore of an attribute the kind has not is refused whole.
	bad := restore
	bad.Restored = map[addrs.Path]values.Value{addrs.MustPath("spec.paused"): values.CountOf(1)}
	if res := apply(t, p, bad); res.Err == "" {
		t.Fatal("a restore of an unknown attribute was accepted")
	}
}
