package kubetest

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func TestMain(m *testing.M) { Main(m) }

var ksvcGVR = schema.GroupVersionResource{Group: "serving.knative.dev", Version: "v1", Resource: "services"}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls f every 50 ms until it returns nil or the deadline passes.
func eventually(t *testing.T, within time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still failing after %s: %v", within, err)
		}
		<-time.After(50 * time.Millisecond) // the poll interval
	}
}

func TestServerSideApplyConflict(t *testing.T) {
	t.Parallel()
	env := Shared(t)
	ns := env.Namespace(t)
	cs := env.Clientset(t)
	ctx := ctxT(t)
	cms := cs.CoreV1().ConfigMaps(ns)

	_, err := cms.Apply(ctx, corev1ac.ConfigMap("c", ns).WithData(map[string]string{"k": "from-a"}), metav1.ApplyOptions{FieldManager: "a"})
	if err != nil {
		t.Fatalf("apply as a: %v", err)
	}
	_, err = cms.Apply(ctx, corev1ac.ConfigMap("c", ns).WithData(map[string]string{"k": "from-b"}), metav1.ApplyOptions{FieldManager: "b"})
	if !apierrors.IsConflict(err) {
		t.Fatalf("apply as b: want 409 Conflict, got %v", err)
	}
	var status apierrors.APIStatus
	if !errorsAs(err, &status) || status.Status().Details == nil || len(status.Status().Details.Causes) == 0 {
		t.Fatalf("conflict without causes: %#v", err)
	}
	c := status.Status().Details.Causes[0]
	if c.Type != metav1.CauseTypeFieldManagerConflict || !strings.Contains(c.Message, `"a"`) {
		t.Errorf("cause = %+v, want a FieldManagerConflict naming manager a", c)
	}

	// Forced, b takes the field over.
	got, err := cms.Apply(ctx, corev1ac.ConfigMap("c", ns).WithData(map[string]string{"k": "from-b"}), metav1.ApplyOptions{FieldManager: "b", Force: true})
	if err != nil || got.Data["k"] != "from-b" {
		t.Fatalf("forced apply as b: %v, data %v", err, got.Data)
	}
}

func errorsAs(err error, status *apierrors.APIStatus) bool {
	s, ok := err.(apierrors.APIStatus)
	if ok {
		*status = s
	}
	return ok
}

func TestKnativeService(t *testing.T) {
	t.Parallel()
	env := Shared(t)
	ns := env.Namespace(t)
	dyn := env.Dynamic(t)
	ctx := ctxT(t)

	ksvc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "serving.knative.dev/v1",
		"kind":       "Service",
		"metadata":   map[string]any{"name": "hello", "namespace": ns},
		"spec": map[string]any{"template": map[string]any{
			"metadata": map[string]any{"annotations": map[string]any{"autoscaling.knative.dev/min-scale": "1"}},
			"spec":     map[string]any{"containers": []any{map[string]any{"image": "example.com/hello"}}},
		}},
	}}
	created, err := dyn.Resource(ksvcGVR).Namespace(ns).Create(ctx, ksvc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create ksvc: %v", err)
	}
	cs, _, _ := unstructured.NestedSlice(created.Object, "spec", "template", "spec", "containers")
	if len(cs) != 1 || cs[0].(map[string]any)["image"] != "example.com/hello" {
		t.Errorf("unknown fields not preserved: %v", created.Object["spec"])
	}

	// The status subresource: a status write through /status sticks, one
	// through the main resource is ignored.
	if err := unstructured.SetNestedField(created.Object, "http://hello.example.com", "status", "url"); err != nil {
		t.Fatal(err)
	}
	st, err := dyn.Resource(ksvcGVR).Namespace(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update status: %v", err)
	}
	if u, _, _ := unstructured.NestedString(st.Object, "status", "url"); u != "http://hello.example.com" {
		t.Errorf("status.url = %q", u)
	}

	// Apply: several documents, a namespaced one without a namespace fails.
	objs := env.Apply(t, `
apiVersion: v1
kind: ConfigMap
metadata: {name: fixture, namespace: `+ns+`}
data: {a: "1"}
---
# only a comment
---
apiVersion: serving.knative.dev/v1
kind: Service
metadata: {name: second, namespace: `+ns+`}
spec: {template: {spec: {containers: [{image: x}]}}}
`)
	if len(objs) != 2 || objs[0].GetKind() != "ConfigMap" || objs[1].GetKind() != "Service" {
		t.Fatalf("Apply returned %d objects", len(objs))
	}
	if _, err := env.apply(ctx, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: nons}\n"), FieldManager); err == nil || !strings.Contains(err.Error(), "no metadata.namespace") {
		t.Errorf("namespaced object without namespace: err = %v", err)
	}
}

// A CRD and its first object in one Apply: the object waits for the CRD.
func TestApplyCRDThenObject(t *testing.T) {
	t.Parallel()
	env := Shared(t)
	ns := env.Namespace(t)
	env.Apply(t, `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.kubetest.example.com}
spec:
  group: kubetest.example.com
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
---
apiVersion: kubetest.example.com/v1
kind: Widget
metadata: {name: w, namespace: `+ns+`}
spec: {size: 3}
`)
	w, err := env.Dynamic(t).Resource(schema.GroupVersionResource{Group: "kubetest.example.com", Version: "v1", Resource: "widgets"}).
		Namespace(ns).Get(ctxT(t), "w", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n, _, _ := unstructured.NestedInt64(w.Object, "spec", "size"); n != 3 {
		t.Errorf("spec.size = %d", n)
	}
}

func TestImpersonationForbidden(t *testing.T) {
	t.Parallel()
	env := Shared(t)
	ns := env.Namespace(t)
	ctx := ctxT(t)
	nobody, err := kubernetes.NewForConfig(env.ConfigAs("nobody"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = nobody.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("list pods as nobody: want 403 Forbidden, got %v", err)
	}
	if !strings.Contains(err.Error(), `"nobody"`) {
		t.Errorf("forbidden error does not name the user: %v", err)
	}
	if _, err := env.Clientset(t).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("list pods as admin: %v", err)
	}
}

func TestKubeconfig(t *testing.T) {
	t.Parallel()
	env := Shared(t)
	cfg, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := clientcmd.LoadFromFile(env.Kubeconfig)
	if err != nil || raw.CurrentContext != "kubetest" || raw.Contexts["kubetest"] == nil {
		t.Fatalf("kubeconfig: %v, current context %q", err, raw.CurrentContext)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("server %s, started in %s; kube-apiserver RSS %s, etcd RSS %s",
		v.GitVersion, env.StartupTime.Round(time.Millisecond), rss(env.APIServerPID()), rss(env.EtcdPID()))
}

// A private environment: the API server restarts on the same port and
// address, and what etcd holds survives.
func TestRestartKeepsData(t *testing.T) {
	t.Parallel()
	crds := t.TempDir()
	err := os.WriteFile(filepath.Join(crds, "gadgets.yaml"), []byte(`
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.kubetest.example.com}
spec:
  group: kubetest.example.com
  names: {kind: Gadget, plural: gadgets, singular: gadget, listKind: GadgetList}
  scope: Cluster
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	env := Start(t, WithCRDs(crds))
	t.Logf("private environment started in %s", env.StartupTime.Round(time.Millisecond))
	gadgets := schema.GroupVersionResource{Group: "kubetest.example.com", Version: "v1", Resource: "gadgets"}
	ns := env.Namespace(t)
	cs := env.Clientset(t)
	ctx := ctxT(t)
	_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "keep"},
		Data:       map[string]string{"k": "v"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pid := env.APIServerPID()

	t0 := time.Now()
	if err := env.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	t.Logf("StopAPIServer took %s", time.Since(t0).Round(time.Millisecond))
	if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "keep", metav1.GetOptions{}); err == nil {
		t.Fatal("the API server still answers after StopAPIServer")
	}
	if err := env.StopAPIServer(); err == nil {
		t.Error("a second StopAPIServer succeeded")
	}

	if err := env.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	t.Logf("StartAPIServer took %s; RSS %s", env.RestartTime.Round(time.Millisecond), rss(env.APIServerPID()))
	if env.APIServerPID() == pid {
		t.Error("same pid after restart")
	}
	// The old client's pooled connection died with the old server; a retry
	// reconnects.
	var cm *corev1.ConfigMap
	eventually(t, 10*time.Second, func() (err error) {
		cm, err = cs.CoreV1().ConfigMaps(ns).Get(ctx, "keep", metav1.GetOptions{})
		return err
	})
	if cm.Data["k"] != "v" {
		t.Errorf("data after restart = %v", cm.Data)
	}
	// The CRDs are still served.
	if _, err := env.Dynamic(t).Resource(ksvcGVR).Namespace(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("list ksvc after restart: %v", err)
	}
	if _, err := env.Dynamic(t).Resource(gadgets).List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("list gadgets (WithCRDs) after restart: %v", err)
	}
}

func TestSharedRefusesRestart(t *testing.T) {
	t.Parallel()
	env := Shared(t)
	if err := env.StopAPIServer(); err == nil {
		t.Fatal("StopAPIServer on the shared environment succeeded")
	}
}

func TestMissingBinary(t *testing.T) {
	t.Setenv("SETPOINT_KUBE_APISERVER", "")
	t.Setenv("SETPOINT_KUBE_VERSION", "v0.0.0-missing")
	_, err := start(nil)
	if err == nil || !strings.Contains(err.Error(), "make testenv") {
		t.Fatalf("err = %v, want one naming make testenv", err)
	}
	t.Setenv("SETPOINT_KUBE_APISERVER", filepath.Join(t.TempDir(), "nope"))
	if _, err = start(nil); err == nil || !strings.Contains(err.Error(), "SETPOINT_KUBE_APISERVER") {
		t.Fatalf("err = %v, want one naming SETPOINT_KUBE_APISERVER", err)
	}
}

func TestMissingCRDDir(t *testing.T) {
	if _, err := start([]Option{WithCRDs(filepath.Join(t.TempDir(), "nope"))}); err == nil || !strings.Contains(err.Error(), "CRD directory") {
		t.Fatalf("err = %v", err)
	}
}

func TestNamespacePrefix(t *testing.T) {
	for in, want := range map[string]string{
		"TestFoo":                        "testfoo-",
		"TestFoo/sub_case#01":            "testfoo-sub-case-01-",
		"///":                            "test-",
		strings.Repeat("Ab/", 40):        strings.Repeat("ab-", 19),
		"Test" + strings.Repeat("x", 80): "test" + strings.Repeat("x", 53) + "-",
	} {
		got := namespacePrefix(in)
		if got != want {
			t.Errorf("namespacePrefix(%q) = %q, want %q", in, got, want)
		}
		if len(got) > 58 {
			t.Errorf("namespacePrefix(%q) is %d long", in, len(got))
		}
	}
}

// rss is a process's resident set size, from /proc.
func rss(pid int) string {
	if pid == 0 {
		return "?"
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return "?"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

// A kube-apiserver that dies at start: the error carries its last output and
// nothing is left behind.
func TestStartFailureShowsOutput(t *testing.T) {
	fake := filepath.Join(t.TempDir(), "kube-apiserver")
	script := "#!/bin/sh\nfor i in $(seq 1 300); do echo \"line $i\" >&2; done\necho 'E1123 boom: cannot start' >&2\nexit 3\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SETPOINT_KUBE_APISERVER", fake)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	_, err := start(nil)
	if err == nil {
		t.Fatal("start succeeded")
	}
	msg := err.Error()
	for _, want := range []string{"exited before it was ready", "boom: cannot start", "line 300", "line 102"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "line 101\n") {
		t.Errorf("error carries more than the last %d lines", tailLines)
	}
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Errorf("left behind in TMPDIR: %v", left)
	}
}
