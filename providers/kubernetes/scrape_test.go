package kubernetes

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/setpoint-dev/setpoint/engine/signals/embedded"
	"github.com/setpoint-dev/setpoint/engine/signals/scrape"
	"github.com/setpoint-dev/setpoint/internal/kubetest"
	"github.com/setpoint-dev/setpoint/internal/testutil"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/workload"
)

func annotated(ip string, ann map[string]string, ports ...int32) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-1", Annotations: ann},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip},
	}
	c := corev1.Container{Name: "app"}
	for _, n := range ports {
		c.Ports = append(c.Ports, corev1.ContainerPort{ContainerPort: n})
	}
	p.Spec.Containers = []corev1.Container{c}
	return p
}

// Only the pod's own IP is ever fetched: each annotation is checked, and
// one that could make the URL name another address (a query, a fragment,
// a user, a port out of range, a scheme other than http(s)) is refused.
func TestPodScrapeTarget(t *testing.T) {
	on := func(kv ...string) map[string]string {
		m := map[string]string{AnnotationScrape: "true"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, c := range []struct {
		name string
		pod  *corev1.Pod
		url  string // "" with ok false
		err  string
	}{
		{"annotated", annotated("10.1.2.3", on(AnnotationPort, "9090")), "http://10.1.2.3:9090/metrics", ""},
		{"path and scheme", annotated("10.1.2.3", on(AnnotationPort, "8443", AnnotationPath, "/admin/metrics;v=1", AnnotationScheme, "https")), "https://10.1.2.3:8443/admin/metrics;v=1", ""},
		{"IPv6", annotated("fd00::7", on(AnnotationPort, "9090")), "http://[fd00::7]:9090/metrics", ""},
		{"IPv4 in IPv6", annotated("::ffff:10.1.2.3", on(AnnotationPort, "9090")), "http://10.1.2.3:9090/metrics", ""},
		{"the one declared port", annotated("10.1.2.3", on(), 8080), "http://10.1.2.3:8080/metrics", ""},
		{"host network", func() *corev1.Pod {
			p := annotated("10.1.2.3", on(AnnotationPort, "10250"))
			p.Spec.HostNetwork = true
			return p
		}(), "", "host's network"},
		{"not annotated", annotated("10.1.2.3", map[string]string{AnnotationPort: "9090"}), "", ""},
		{"scrape not exactly true", annotated("10.1.2.3", map[string]string{AnnotationScrape: "True", AnnotationPort: "9090"}), "", ""},
		{"no IP yet", annotated("", on(AnnotationPort, "9090")), "", ""},
		{"not running", func() *corev1.Pod {
			p := annotated("10.1.2.3", on(AnnotationPort, "9090"))
			p.Status.Phase = corev1.PodSucceeded
			return p
		}(), "", ""},
		{"two declared ports", annotated("10.1.2.3", on(), 8080, 9090), "", "not exactly one declared TCP container port"},
		{"no port", annotated("10.1.2.3", on()), "", "not exactly one declared TCP container port"},
		{"port 0", annotated("10.1.2.3", on(AnnotationPort, "0")), "", "want a port from 1 to 65535"},
		{"port too big", annotated("10.1.2.3", on(AnnotationPort, "65536")), "", "want a port from 1 to 65535"},
		{"port with a sign", annotated("10.1.2.3", on(AnnotationPort, "+80")), "", "want a port"},
		{"port with a host", annotated("10.1.2.3", on(AnnotationPort, "80@evil.example")), "", "want a port"},
		{"relative path", annotated("10.1.2.3", on(AnnotationPort, "80", AnnotationPath, "metrics")), "", "want a path starting with /"},
		{"query in the path", annotated("10.1.2.3", on(AnnotationPort, "80", AnnotationPath, "/m?target=http://169.254.169.254/")), "", "without query"},
		{"fragment in the path", annotated("10.1.2.3", on(AnnotationPort, "80", AnnotationPath, "/m#x")), "", "without query, fragment"},
		{"space in the path", annotated("10.1.2.3", on(AnnotationPort, "80", AnnotationPath, "/m x")), "", "spaces"},
		{"backslash in the path", annotated("10.1.2.3", on(AnnotationPort, "80", AnnotationPath, `/\evil.example/`)), "", "want a path"},
		{"bad escape", annotated("10.1.2.3", on(AnnotationPort, "80", AnnotationPath, "/%zz")), "", "invalid URL escape"},
		{"long path", annotated("10.1.2.3", on(AnnotationPort, "80", AnnotationPath, "/"+strings.Repeat("a", maxPodPath))), "", "at most"},
		{"other scheme", annotated("10.1.2.3", on(AnnotationPort, "80", AnnotationScheme, "file")), "", "want http or https"},
		{"metadata address", annotated("169.254.169.254", on(AnnotationPort, "80")), "", "is not a pod's address"},
		{"unspecified", annotated("::", on(AnnotationPort, "80")), "", "is not a pod's address"},
		{"loopback", annotated("127.0.0.1", on(AnnotationPort, "80")), "", "loopback"},
		{"not an IP", annotated("evil.example", on(AnnotationPort, "80")), "", "not an IP address"},
	} {
		got, ok, err := PodScrapeTarget(c.pod, false)
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) || ok {
				t.Errorf("%s: got %+v, %v, %v; want an error saying %q", c.name, got, ok, err, c.err)
			}
		case c.url == "":
			if ok || err != nil {
				t.Errorf("%s: got %+v, %v, %v; want no target", c.name, got, ok, err)
			}
		default:
			if !ok || err != nil || got.URL != c.url || got.Namespace != "shop" || got.Pod != "web-1" {
				t.Errorf("%s: got %+v, %v, %v; want %s", c.name, got, ok, err, c.url)
			}
		}
	}
}

// setRunning gives a pod the status a kubelet would: running at ip.
func setRunning(t *testing.T, env *kubetest.Env, ns, name, ip string) {
	t.Helper()
	cs := env.Clientset(t)
	p, err := cs.CoreV1().Pods(ns).Get(ctxT(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.PodIP = ip
	p.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctxT(t), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Pods annotated on a real API server are found in the namespaces asked
// for, scraped at their IP and annotated port and path, and their samples
// carry their namespace and name; a pod whose annotation is refused is
// left out and said once, however many cycles find it.
func TestPodDiscoveryScrapes(t *testing.T) {
	env := kubetest.Shared(t)
	ns, other := env.Namespace(t), env.Namespace(t)
	mux := http.NewServeMux()
	mux.HandleFunc("/custom/metrics", func(w http.ResponseWriter, _ *http.Request) {
		// A pod that claims another namespace's samples keeps its own.
		fmt.Fprint(w, "# TYPE http_requests_total counter\nhttp_requests_total{code=\"200\",namespace=\"victim\"} 42\n# TYPE go_goroutines gauge\ngo_goroutines 9\n")
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	pod := func(ns, name, ann string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: %s, namespace: %s, annotations: {%s}}\nspec: {containers: [{name: app, image: x}]}\n", name, ns, ann)
	}
	want := fmt.Sprintf(`prometheus.io/scrape: "true", prometheus.io/port: %q, prometheus.io/path: /custom/metrics`, port)
	env.Apply(t, pod(ns, "web-1", want))
	env.Apply(t, pod(ns, "quiet", fmt.Sprintf(`prometheus.io/port: %q`, port)))
	env.Apply(t, pod(ns, "sneaky", fmt.Sprintf(`prometheus.io/scrape: "true", prometheus.io/port: %q, prometheus.io/path: "/m?x=http://169.254.169.254/"`, port)))
	env.Apply(t, pod(ns, "starting", want))
	env.Apply(t, pod(other, "elsewhere", want))
	for _, p := range []struct{ ns, name string }{{ns, "web-1"}, {ns, "quiet"}, {ns, "sneaky"}, {other, "elsewhere"}} {
		setRunning(t, env, p.ns, p.name, "127.0.0.1")
	}

	var logs testutil.Buffer
	d, err := NewPodDiscovery(env.Config())
	if err != nil {
		t.Fatal(err)
	}
	d.AllowLoopback = true
	d.Log = slog.New(slog.NewTextHandler(&logs, nil))
	var found []PodTarget
	// The list is served from the API server's watch cache, which may lag
	// the status update by a moment.
	testutil.Eventually(t, 30*time.Second, "the annotated pod discovered", func() bool {
		found = d.Targets(ctxT(t), []string{ns})
		return len(found) == 1
	})
	wantURL := "http://127.0.0.1:" + port + "/custom/metrics"
	if len(found) != 1 || found[0].URL != wantURL || found[0].Namespace != ns || found[0].Pod != "web-1" || found[0].Instance != "127.0.0.1:"+port {
		t.Fatalf("targets: %+v; want web-1 at %s only", found, wantURL)
	}
	for range 3 {
		d.Targets(ctxT(t), []string{ns})
	}
	if n := strings.Count(logs.String(), "sneaky"); n != 1 {
		t.Fatalf("the refused pod was reported %d times over several discoveries:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "without query") {
		t.Fatalf("the refusal does not say why:\n%s", logs.String())
	}

	// Scraped as the engine process does, only the requested name kept.
	store := embedded.NewStore(0)
	store.Request("http_requests_total")
	targets := make([]scrape.Target, len(found))
	for i, p := range found {
		targets[i] = scrape.Target{URL: p.URL, Job: PodJob, Instance: p.Instance, Labels: map[string]string{"namespace": p.Namespace, "pod": p.Pod}}
	}
	now := time.Now()
	res := (&scrape.Scraper{Store: store, Timeout: 5 * time.Second}).Once(context.Background(), targets, now)
	if !res[0].Up || res[0].Kept != 1 || res[0].Dropped != 1 {
		t.Fatalf("scrape: %+v", res)
	}
	r, err := embedded.NewSource(store).Query(context.Background(), `http_requests_total`, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Samples) != 1 || r.Samples[0].Value != 42 {
		t.Fatalf("samples: %+v", r.Samples)
	}
	l := r.Samples[0].Labels
	if l["namespace"] != ns || l["exported_namespace"] != "victim" || l["pod"] != "web-1" || l["job"] != PodJob || l["instance"] != "127.0.0.1:"+port || l["code"] != "200" {
		t.Fatalf("labels: %v", l)
	}

	// Without the tests' allowance, a loopback pod IP is refused.
	d2, _ := NewPodDiscovery(env.Config())
	d2.Log = slog.New(slog.NewTextHandler(&logs, nil))
	if got := d2.Targets(ctxT(t), []string{ns}); len(got) != 0 {
		t.Fatalf("loopback pod IPs were accepted: %+v", got)
	}
	if !strings.Contains(logs.String(), "loopback") {
		t.Fatalf("the loopback refusal is not said:\n%s", logs.String())
	}
}

// A RouteGroup's selector lists pods: each with its IP and its Ready
// condition, as the kubelet reports them.
func TestListedPodsCarryIPAndReadiness(t *testing.T) {
	env := kubetest.Shared(t)
	ns := env.Namespace(t)
	for _, name := range []string{"ready", "unready", "starting"} {
		env.Apply(t, fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: %s, namespace: %s, labels: {app: checkout}}\nspec: {containers: [{name: app, image: app}]}\n", name, ns))
	}
	cs := env.Clientset(t)
	for name, ready := range map[string]corev1.ConditionStatus{"ready": corev1.ConditionTrue, "unready": corev1.ConditionFalse} {
		setRunning(t, env, ns, name, map[string]string{"ready": "10.1.0.1", "unready": "10.1.0.2"}[name])
		p, err := cs.CoreV1().Pods(ns).Get(ctxT(t), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: ready}}
		if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctxT(t), p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	p := newProvider(t, env.Config())
	r := p.List(ctxT(t), providers.ListRequest{Provider: "kubernetes", Kind: KindPod, Namespace: ns, Selector: map[string]string{"app": "checkout"}})
	if len(r.Diagnostics) > 0 || len(r.Objects) != 3 {
		t.Fatalf("list: %d objects, %v", len(r.Objects), r.Diagnostics)
	}
	got := map[string]string{}
	for _, o := range r.Objects {
		got[o.Address.Name] = o.Attributes[AttrPodIP].Str() + " " + o.Attributes[workload.PodReady].Str()
	}
	want := map[string]string{"ready": "10.1.0.1 True", "unready": "10.1.0.2 False", "starting": " "}
	if !maps.Equal(got, want) {
		t.Errorf("pods %q, want %q", got, want)
	}
}
