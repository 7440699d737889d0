package kubernetes

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/internal/kubetest"
	"github.com/setpoint-dev/setpoint/providers"
)

// The hold around an in-place resize, step by step on a real API server
// (no controllers: what the controller would do is judged from the
// objects): the current ReplicaSet's template follows the pods, its update
// retried on a conflict; a Deployment apply that fails gives the
// ReplicaSet its memory back before resuming; a pause its process did not
// live to lift is reported for repair once past the grace, and the next
// apply lifts it.
func TestInPlaceResizeHold(t *testing.T) {
	env := kubetest.Shared(t)
	ns := env.Namespace(t)
	create(t, env, deployment(ns, "hold", 1))
	cs := env.Clientset(t)
	d, err := cs.AppsV1().Deployments(ns).Get(ctxT(t), "hold", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rs := env.Apply(t, fmt.Sprintf(`apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: hold-1
  namespace: %s
  labels: {app: hold}
  annotations: {deployment.kubernetes.io/revision: "1"}
  ownerReferences: [{apiVersion: apps/v1, kind: Deployment, name: hold, uid: %s, controller: true}]
spec:
  replicas: 1
  selector: {matchLabels: {app: hold}}
  template:
    metadata: {labels: {app: hold}}
    spec:
      containers:
      - {name: app, image: registry.example/app:1, resources: {requests: {memory: 256Mi, cpu: 100m}, limits: {memory: 512Mi}}}
      - {name: side, image: registry.example/side:1}
`, ns, d.UID))[0]
	env.Apply(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: hold-a
  namespace: %s
  labels: {app: hold}
  ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: hold-1, uid: %s, controller: true}]
spec:
  containers:
  - {name: app, image: registry.example/app:1, resources: {requests: {memory: 256Mi, cpu: 100m}, limits: {memory: 512Mi}}}
  - {name: side, image: registry.example/side:1}
`, ns, rs.GetUID()))

	// The first update of the ReplicaSet meets a conflict, as when its
	// controller has just written its status; a Deployment apply fails
	// when failApply is set.
	var rsPuts atomic.Int64
	var failApply atomic.Bool
	// What the controller would act on, checked at the moment each write
	// reaches the server: the Deployment's own apply comes while it is
	// paused and its ReplicaSet already has the new memory; a resume comes
	// when the two templates agree (resumed apart, every pod rolls out).
	memoryOf := func(rs bool) string {
		if rs {
			got, err := cs.AppsV1().ReplicaSets(ns).Get(context.Background(), "hold-1", metav1.GetOptions{})
			if err != nil {
				return err.Error()
			}
			r := got.Spec.Template.Spec.Containers[0].Resources
			return r.Requests.Memory().String() + "/" + r.Limits.Memory().String()
		}
		got, err := cs.AppsV1().Deployments(ns).Get(context.Background(), "hold", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		r := got.Spec.Template.Spec.Containers[0].Resources
		return r.Requests.Memory().String() + "/" + r.Limits.Memory().String()
	}
	var mu sync.Mutex
	var broken []string
	var applies, resumes int
	var inPlace atomic.Bool // the change being applied is in place
	rc := env.Config()
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			status := func(code int, reason string) *http.Response {
				body := fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":%q,"code":%d,"message":"injected by the test"}`, reason, code)
				return &http.Response{StatusCode: code, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(bytes.NewBufferString(body)), Request: r}
			}
			if r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/replicasets/hold-1") && rsPuts.Add(1) == 1 {
				return status(http.StatusConflict, "Conflict"), nil
			}
			if r.Method == http.MethodPatch && strings.HasSuffix(r.URL.Path, "/deployments/hold") && r.URL.Query().Get("dryRun") == "" {
				mu.Lock()
				switch body := readBody(r); {
				case r.Header.Get("Content-Type") == string(types.ApplyPatchType):
					applies++
					d, err := cs.AppsV1().Deployments(ns).Get(context.Background(), "hold", metav1.GetOptions{})
					if inPlace.Load() && (err != nil || !d.Spec.Paused) {
						broken = append(broken, fmt.Sprintf("the Deployment's apply came unpaused (%v)", err))
					}
				case strings.Contains(body, `"paused":false`):
					resumes++
					if d, rs := memoryOf(false), memoryOf(true); d != rs {
						broken = append(broken, fmt.Sprintf("resumed with the Deployment at %s and its ReplicaSet at %s", d, rs))
					}
				}
				mu.Unlock()
				if failApply.Load() && r.Header.Get("Content-Type") == string(types.ApplyPatchType) {
					return status(http.StatusInternalServerError, "InternalError"), nil
				}
			}
			return rt.RoundTrip(r)
		})
	})
	p := newProvider(t, rc)
	apply := func(t *testing.T, p *Provider, c providers.ObjectChange) providers.ObjectResult {
		t.Helper()
		inPlace.Store(c.InPlace != "")
		return apply(t, p, c)
	}
	a := addr(KindDeployment, ns, "hold")
	req, lim := ContainerAttr("app", "requests"), ContainerAttr("app", "limits")
	change := func(r, l int64) providers.ObjectChange {
		return providers.ObjectChange{Address: a, Attributes: map[addrs.Path]values.Value{req: values.BytesOf(r << 20), lim: values.BytesOf(l << 20)},
			Changed: []addrs.Path{req, lim}, InPlace: providers.InPlaceFallbackHold, Force: true}
	}
	rsMemory := func() string {
		t.Helper()
		got, err := cs.AppsV1().ReplicaSets(ns).Get(ctxT(t), "hold-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r := got.Spec.Template.Spec.Containers[0].Resources
		return r.Requests.Memory().String() + "/" + r.Limits.Memory().String()
	}
	notPaused := func(when string) {
		t.Helper()
		got, err := cs.AppsV1().Deployments(ns).Get(ctxT(t), "hold", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Spec.Paused || got.Annotations[ResizePausedAnnotation] != "" {
			t.Fatalf("%s: the Deployment is left paused (%v, %q)", when, got.Spec.Paused, got.Annotations[ResizePausedAnnotation])
		}
	}

	if res := apply(t, p, change(384, 576)); res.Err != "" {
		t.Fatal(res.Err)
	}
	if got := rsMemory(); got != "384Mi/576Mi" || rsPuts.Load() < 2 {
		t.Fatalf("the ReplicaSet's template after the resize: %s after %d updates, want 384Mi/576Mi after a retried conflict", got, rsPuts.Load())
	}
	notPaused("after the resize")
	if r, l := podMemory(t, env, ns, "hold-a"); r != "384Mi" || l != "576Mi" {
		t.Fatalf("pod resized to %s/%s", r, l)
	}

	// The Deployment's own apply fails: the ReplicaSet's template gets its
	// memory back (resumed with the two apart, the controller would roll
	// every pod out), and the Deployment is resumed.
	failApply.Store(true)
	res := apply(t, p, change(448, 672))
	failApply.Store(false)
	if res.Err == "" {
		t.Fatal("the apply the test failed succeeded")
	}
	if got := rsMemory(); got != "384Mi/576Mi" {
		t.Fatalf("the ReplicaSet's template after a failed apply: %s, want 384Mi/576Mi back", got)
	}
	notPaused("after a failed apply")
	if o := read(t, p, a); o.Attributes[req] != values.BytesOf(384<<20) {
		t.Fatalf("the template after a failed apply: %v", o.Attributes[req])
	}

	// A pause left by a process killed mid-resize.
	pause := func(at time.Time) {
		t.Helper()
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}},"spec":{"paused":true}}`, ResizePausedAnnotation, at.UTC().Format(time.RFC3339))
		if _, err := cs.AppsV1().Deployments(ns).Patch(ctxT(t), "hold", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	repair := func(now time.Time) string {
		t.Helper()
		resp := p.Read(ctxT(t), providers.ReadRequest{Now: now, Addresses: []providers.Address{a}})
		if len(resp.Diagnostics) > 0 {
			t.Fatal(resp.Diagnostics)
		}
		return resp.Objects[0].Repair
	}
	now := time.Now()
	pause(now)
	grace := resizeGrace * p.timeout
	if why := repair(now.Add(grace - time.Second)); why != "" {
		t.Fatalf("a pause within the grace (its resize may be running) reported for repair: %s", why)
	}
	if why := repair(now.Add(grace)); !strings.Contains(why, "never resumed") {
		t.Fatalf("a pause past the grace: repair %q", why)
	}
	if why := repair(now.Add(-grace - time.Second)); !strings.Contains(why, "never resumed") {
		t.Fatalf("a pause dated further ahead than the grace: repair %q", why)
	}
	// Within the grace another process's resize may be running: an apply
	// changes nothing meanwhile.
	if res := apply(t, p, change(448, 672)); !strings.Contains(res.Err, "in progress") {
		t.Fatalf("an apply during another resize's hold: %+v", res)
	}

	cutAfterReplicaSet := func() {
		t.Helper()
		err := setReplicaSetMemory(func() context.Context { return ctxT(t) }, cs, ns, "hold-1", Manager, func(string) ([2]*resource.Quantity, bool) {
			r, l := resource.MustParse("448Mi"), resource.MustParse("672Mi")
			return [2]*resource.Quantity{&r, &l}, true
		}, false)
		if err != nil {
			t.Fatal(err)
		}
		pause(now.Add(-time.Hour))
	}
	// Killed after the ReplicaSet took the new memory and before the
	// Deployment's apply: paused, the templates apart. The repair (the
	// owned values again, nothing moved) makes them agree before it
	// resumes (the check on every resume above).
	cutAfterReplicaSet()
	fix := change(384, 576)
	fix.InPlace, fix.Changed = "", nil
	if res := apply(t, p, fix); res.Err != "" {
		t.Fatal(res.Err)
	}
	notPaused("after the repair")
	if got := rsMemory(); got != "384Mi/576Mi" {
		t.Fatalf("the ReplicaSet after the repair: %s, want the Deployment's 384Mi/576Mi", got)
	}
	if why := repair(now.Add(time.Hour)); why != "" {
		t.Fatalf("repaired, still reported: %s", why)
	}
	// The same, with the change planned again instead of a repair: the
	// hold finished first, then the change made in place.
	cutAfterReplicaSet()
	if res := apply(t, p, change(448, 672)); res.Err != "" {
		t.Fatal(res.Err)
	}
	notPaused("after the change planned again")
	if got := rsMemory(); got != "448Mi/672Mi" {
		t.Fatalf("the ReplicaSet after the change: %s", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(broken) > 0 || applies == 0 || resumes < 4 {
		t.Fatalf("%d applies, %d resumes; broken: %v", applies, resumes, broken)
	}
}

func readBody(r *http.Request) string {
	if r.Body == nil {
		return ""
	}
	b, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(b))
	return string(b)
}

// A Deployment's rollout is done once every replica is updated and no old
// one is left; pods still starting after a scale-up (the HPA's) are no
// rollout.
func TestRolledOut(t *testing.T) {
	for _, tc := range []struct {
		name                               string
		spec, replicas, updated, available int64
		deadline                           bool
		want                               bool
	}{
		{"settled", 3, 3, 3, 3, false, true},
		{"scale-up, new pod starting", 3, 3, 3, 2, false, true},
		{"rolling: old pods left", 3, 4, 1, 3, false, false},
		{"rolling: not every replica updated", 3, 3, 2, 3, false, false},
		{"rolling: every replica updated, an old one left", 3, 4, 3, 3, false, false},
		{"rolling, past its deadline", 3, 4, 1, 3, true, true},
	} {
		u := &unstructured.Unstructured{Object: map[string]any{
			"spec":   map[string]any{"replicas": tc.spec},
			"status": map[string]any{"replicas": tc.replicas, "updatedReplicas": tc.updated, "availableReplicas": tc.available},
		}}
		if tc.deadline {
			u.Object["status"].(map[string]any)["conditions"] = []any{map[string]any{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}}
		}
		if got := rolledOut(u); got != tc.want {
			t.Errorf("%s: rolled out %v, want %v", tc.name, got, tc.want)
		}
	}
}
