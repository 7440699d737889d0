package kubernetes

import (
	"fmt"
	"strings"
	"testing"

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
