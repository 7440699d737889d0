package kubernetes

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/values"
)

func mustJSON(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestFieldPathMatchesTheAPIServers(t *testing.T) {
	for _, tc := range []struct {
		path addrs.Path
		want string
	}{
		{AttrReplicas, ".spec.replicas"},
		{ContainerAttr("app", "requests"), `.spec.template.spec.containers[name="app"].resources.requests.memory`},
		{AttrMinScale, ".spec.template.metadata.annotations.autoscaling.knative.dev/min-scale"},
	} {
		fp, err := fieldPath(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		if fp.String() != tc.want {
			t.Errorf("%s: got %s, want %s", tc.path, fp, tc.want)
		}
	}
}

func TestSetGetRemove(t *testing.T) {
	obj := mustJSON(t, `{"spec":{"template":{"spec":{"containers":[{"name":"a","image":"x"},{"name":"b"}]}}}}`)
	p := ContainerAttr("b", "limits")
	if err := set(obj, p, "1Gi"); err != nil {
		t.Fatal(err)
	}
	if v, ok := get(obj, p); !ok || v != "1Gi" {
		t.Fatalf("get after set: %v %v", v, ok)
	}
	// A new keyed element is appended with its key.
	if err := set(obj, ContainerAttr("c", "requests"), "64Mi"); err != nil {
		t.Fatal(err)
	}
	cs := obj["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)
	if len(cs) != 3 || cs[2].(map[string]any)["name"] != "c" {
		t.Fatalf("containers: %v", cs)
	}
	// Removing the only field of c's element removes the element; b keeps
	// its name, a its image.
	remove(obj, ContainerAttr("c", "requests"))
	remove(obj, p)
	cs = obj["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)
	want := []any{map[string]any{"name": "a", "image": "x"}}
	if !reflect.DeepEqual(cs, want) {
		t.Fatalf("after remove: %v, want %v", cs, want)
	}
	// An annotation key holds dots and slashes.
	if err := set(obj, AttrMinScale, "3"); err != nil {
		t.Fatal(err)
	}
	if v, _ := get(obj, AttrMinScale); v != "3" {
		t.Fatalf("annotation: %v", v)
	}
}

// managedFields as kubectl's server-side apply writes them: the owned
// fields of one manager are copied out of the live object, and nothing
// else.
func TestExtractOwnedFields(t *testing.T) {
	live := mustJSON(t, `{"spec":{"replicas":3,"minReadySeconds":5,"template":{"spec":{"containers":[
		{"name":"app","image":"img","resources":{"requests":{"memory":"256Mi","cpu":"100m"},"limits":{"memory":"512Mi"}}},
		{"name":"side","image":"s","resources":{"requests":{"memory":"64Mi"}}}]}}}}`)
	fields := `{"f:spec":{"f:replicas":{},"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:name":{},"f:resources":{"f:requests":{"f:memory":{}}}}}}}}}`
	ms := managedSets([]metav1.ManagedFieldsEntry{
		{Manager: "setpoint", Operation: metav1.ManagedFieldsOperationApply, FieldsV1: metav1.NewFieldsV1(fields)},
		{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:replicas":{},"f:minReadySeconds":{}}}`)},
	})
	out := map[string]any{}
	if err := extract(out, live, ownedBy(ms, "setpoint")); err != nil {
		t.Fatal(err)
	}
	want := mustJSON(t, `{"spec":{"replicas":3,"template":{"spec":{"containers":[{"name":"app","resources":{"requests":{"memory":"256Mi"}}}]}}}}`)
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("extracted\n%v\nwant\n%v", out, want)
	}
	// Shared ownership names the other manager: the one an apply would
	// conflict with.
	fp, _ := fieldPath(AttrReplicas)
	if m := managerOf(ms, fp, "setpoint"); m != "kubectl" {
		t.Fatalf("manager of a shared field: %q", m)
	}
	fp, _ = fieldPath(ContainerAttr("app", "requests"))
	if m := managerOf(ms, fp, "setpoint"); m != "setpoint" {
		t.Fatalf("manager of setpoint's field: %q", m)
	}
	fp, _ = fieldPath(ContainerAttr("side", "requests"))
	if m := managerOf(ms, fp, "setpoint"); m != "" {
		t.Fatalf("manager of an unowned field: %q", m)
	}
}

func TestDecodeEncode(t *testing.T) {
	obj := map[string]any{}
	for _, tc := range []struct {
		at attr
		v  values.Value
	}{
		{kinds[KindDeployment].attrs[0], values.CountOf(7)},
		{attr{path: ContainerAttr("app", "limits"), typ: values.Bytes, enc: encQuantity}, values.BytesOf(768 << 20)},
		{kinds[KindKnative].attrs[0], values.CountOf(2)},
		{kinds[KindHPA].attrs[2], values.CountOf(70)},
	} {
		if err := tc.at.encode(obj, nil, tc.v); err != nil {
			t.Fatal(err)
		}
		got, ok, err := tc.at.decode(obj)
		if err != nil || !ok || got != tc.v {
			t.Errorf("%s: round trip of %s gave %s %v %v", tc.at.path, tc.v, got, ok, err)
		}
	}
	if q, _ := get(obj, ContainerAttr("app", "limits")); q != "768Mi" {
		t.Errorf("quantity written as %v, want 768Mi", q)
	}
	if s, _ := get(obj, AttrMinScale); s != "2" {
		t.Errorf("annotation written as %#v, want \"2\"", s)
	}
	// Two CPU utilisation metrics are not "a CPU target", nor is a list
	// that is not one.
	cpu := func(n int) any {
		return map[string]any{"type": "Resource", "resource": map[string]any{"name": "cpu", "target": map[string]any{"type": "Utilization", "averageUtilization": int64(n)}}}
	}
	obj["spec"].(map[string]any)["metrics"] = []any{cpu(60), cpu(70)}
	if _, ok, _ := kinds[KindHPA].attrs[2].decode(obj); ok {
		t.Error("two CPU metrics read as a CPU target")
	}
	obj["spec"].(map[string]any)["metrics"] = []any{1, 2}
	if _, ok, _ := kinds[KindHPA].attrs[2].decode(obj); ok {
		t.Error("two metrics read as a CPU target")
	}
	bad := map[string]any{"spec": map[string]any{"replicas": "three"}}
	if _, _, err := kinds[KindDeployment].attrs[0].decode(bad); err == nil {
		t.Error("a string replicas decoded")
	}
}

func TestQuoted(t *testing.T) {
	if got := quoted(`conflict with "kubectl-client-side-apply" using apps/v1`); got != "kubectl-client-side-apply" {
		t.Fatal(got)
	}
}

func container(name, reqMem, limMem, reqCPU, limCPU string) corev1.Container {
	c := corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}}
	put := func(l corev1.ResourceList, r corev1.ResourceName, q string) {
		if q != "" {
			l[r] = resource.MustParse(q)
		}
	}
	put(c.Resources.Requests, corev1.ResourceMemory, reqMem)
	put(c.Resources.Limits, corev1.ResourceMemory, limMem)
	put(c.Resources.Requests, corev1.ResourceCPU, reqCPU)
	put(c.Resources.Limits, corev1.ResourceCPU, limCPU)
	return c
}

func TestQoSAndResize(t *testing.T) {
	pod := func(cs ...corev1.Container) *corev1.Pod { return &corev1.Pod{Spec: corev1.PodSpec{Containers: cs}} }
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want corev1.PodQOSClass
	}{
		{"best effort", pod(container("a", "", "", "", "")), corev1.PodQOSBestEffort},
		{"guaranteed", pod(container("a", "1Gi", "1Gi", "1", "1")), corev1.PodQOSGuaranteed},
		{"limits only are requests too", pod(container("a", "", "1Gi", "", "1")), corev1.PodQOSGuaranteed},
		{"burstable", pod(container("a", "512Mi", "1Gi", "1", "1")), corev1.PodQOSBurstable},
	} {
		if got := QoSClass(tc.pod); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	mi := int64(1 << 20)
	// A Guaranteed pod resized as its template is (request = limit) stays
	// Guaranteed; given a limit apart from the request (a pinned limit),
	// it would not, and is refused rather than made unlike its template.
	g := pod(container("app", "1Gi", "1Gi", "1", "1"))
	next, changed, err := resized(g, map[string][2]int64{"app": {600 * mi, 600 * mi}})
	if err != nil || !changed {
		t.Fatal(changed, err)
	}
	r, l := next.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory], next.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory]
	if r.Value() != 600*mi || l.Value() != 600*mi || QoSClass(next) != corev1.PodQOSGuaranteed {
		t.Fatalf("guaranteed resized to %s/%s (%s)", r.String(), l.String(), QoSClass(next))
	}
	if _, _, err := resized(g, map[string][2]int64{"app": {600 * mi, 900 * mi}}); err == nil || !strings.Contains(err.Error(), "QoS") {
		t.Fatalf("a Guaranteed pod given request 600Mi, limit 900Mi: %v, want refused", err)
	}
	// A BestEffort pod given memory would become Burstable: refused.
	if _, _, err := resized(pod(container("app", "", "", "", "")), map[string][2]int64{"app": {600 * mi, 900 * mi}}); err == nil {
		t.Fatal("a resize changing the QoS class was not refused")
	}
	// Burstable gets both values; the same values again are no change.
	b := pod(container("app", "256Mi", "512Mi", "", ""))
	next, changed, err = resized(b, map[string][2]int64{"app": {300 * mi, 450 * mi}})
	if err != nil || !changed {
		t.Fatal(changed, err)
	}
	if _, changed, _ = resized(next, map[string][2]int64{"app": {300 * mi, 450 * mi}}); changed {
		t.Fatal("the same values were a change")
	}
}

// The server's text of a field path reads back into the attribute path it
// came from.
func TestAttrPathOfInvertsFieldPath(t *testing.T) {
	for _, p := range []addrs.Path{AttrReplicas, ContainerAttr("app", "requests"), AttrMinScale, AttrMaxScale, addrs.MustPath(`metadata.labels["app.kubernetes.io/name"]`)} {
		fp, err := fieldPath(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := attrPathOf(fp.String()); got != p {
			t.Errorf("%s → %s → %s", p, fp, got)
		}
	}
	for _, bad := range []string{".spec.containers[name", ".a[b]"} {
		if got := attrPathOf(bad); !got.IsZero() {
			t.Errorf("%q read as %s", bad, got)
		}
	}
}
