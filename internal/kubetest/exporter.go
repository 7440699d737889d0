package kubetest

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Load is the traffic the exporter makes up for one app: requests a second
// shared evenly by its Ready pods, each taking Latency and costing
// CPUPerRequest core-seconds.
type Load struct {
	RPS           float64
	Latency       time.Duration
	CPUPerRequest float64
	WorkingSet    float64 // bytes, every container
}

// Exporter serves, for the pods of the apps given a Load, the metrics a
// cluster's scrape would find for them — kwok's pods serve none: per-pod
// request counters and latency histograms labelled as an application
// library labels them (namespace, app, pod), CPU and working set as
// cAdvisor does (namespace, pod, container), and kube-state-metrics' pod
// labels and readiness. Counters grow from the time each pod is first seen
// Ready, so a rate over them is the Load.
type Exporter struct {
	URL string

	cs  kubernetes.Interface
	srv *httptest.Server

	mu     sync.Mutex
	loads  map[string]Load     // namespace/app
	pods   map[string]*podCtrs // namespace/pod
	gauges map[string]float64  // a series as exposed → its value
	now    func() time.Time
}

type podCtrs struct {
	last               time.Time
	requests, sum, cpu float64
	buckets            []float64
}

// exporterBuckets are the histogram's bounds (seconds).
var exporterBuckets = []float64{0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// StartExporter serves the exporter until the test ends.
func (e *Env) StartExporter(t testing.TB) *Exporter {
	t.Helper()
	x := NewExporter(e.Clientset(t))
	t.Cleanup(x.Close)
	return x
}

// NewExporter serves an exporter of the pods cs reads until Close.
func NewExporter(cs kubernetes.Interface) *Exporter {
	x := &Exporter{cs: cs, loads: map[string]Load{}, pods: map[string]*podCtrs{}, gauges: map[string]float64{}, now: time.Now}
	x.srv = httptest.NewServer(http.HandlerFunc(x.serve))
	x.URL = x.srv.URL
	return x
}

// Close stops serving.
func (x *Exporter) Close() { x.srv.Close() }

// SetLoad sets the traffic of namespace/app from now on.
func (x *Exporter) SetLoad(namespace, app string, l Load) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.advance()
	x.loads[namespace+"/"+app] = l
}

// SetGauge serves a series of its own (what no pod makes: a fleet's
// remaining capacity): name with the labels' pairs, at v from now on.
func (x *Exporter) SetGauge(name string, v float64, labelPairs ...string) {
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte('{')
	for i := 0; i+1 < len(labelPairs); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", labelPairs[i], labelPairs[i+1])
	}
	b.WriteByte('}')
	x.mu.Lock()
	defer x.mu.Unlock()
	x.gauges[b.String()] = v
}

// serve lists the pods of every app with a load and writes their series.
func (x *Exporter) serve(w http.ResponseWriter, r *http.Request) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.advance()
	var b strings.Builder
	keys := make([]string, 0, len(x.pods))
	for k := range x.pods {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		c := x.pods[k]
		ns, pod, _ := strings.Cut(k, "/")
		app, ready, ws, ok := x.podInfo(r.Context(), ns, pod)
		if !ok {
			continue
		}
		l := fmt.Sprintf("namespace=%q,app=%q,pod=%q", ns, app, pod)
		fmt.Fprintf(&b, "http_requests_total{%s,code=\"200\"} %g\n", l, c.requests)
		for i, le := range exporterBuckets {
			fmt.Fprintf(&b, "http_request_duration_seconds_bucket{%s,le=%q} %g\n", l, strconv.FormatFloat(le, 'g', -1, 64), c.buckets[i])
		}
		fmt.Fprintf(&b, "http_request_duration_seconds_bucket{%s,le=\"+Inf\"} %g\n", l, c.requests)
		fmt.Fprintf(&b, "http_request_duration_seconds_sum{%s} %g\n", l, c.sum)
		fmt.Fprintf(&b, "http_request_duration_seconds_count{%s} %g\n", l, c.requests)
		cl := fmt.Sprintf("namespace=%q,pod=%q,container=\"app\"", ns, pod)
		fmt.Fprintf(&b, "container_cpu_usage_seconds_total{%s} %g\n", cl, c.cpu)
		fmt.Fprintf(&b, "container_memory_working_set_bytes{%s} %g\n", cl, ws)
		fmt.Fprintf(&b, "kube_pod_labels{namespace=%q,pod=%q,label_app=%q} 1\n", ns, pod, app)
		r := 0
		if ready {
			r = 1
		}
		fmt.Fprintf(&b, "kube_pod_status_ready{namespace=%q,pod=%q,condition=\"true\"} %d\n", ns, pod, r)
	}
	for _, k := range slices.Sorted(maps.Keys(x.gauges)) {
		fmt.Fprintf(&b, "%s %g\n", k, x.gauges[k])
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	_, _ = w.Write([]byte(b.String()))
}

// podInfo is a pod's app label, readiness and the working set its app's
// load gives (ok false: gone).
func (x *Exporter) podInfo(ctx context.Context, ns, name string) (app string, ready bool, ws float64, ok bool) {
	p, err := x.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil || p.DeletionTimestamp != nil {
		return "", false, 0, false
	}
	app = p.Labels["app"]
	return app, podIsReady(p), x.loads[ns+"/"+app].WorkingSet, true
}

// advance adds, to each Ready pod of a loaded app, its share of the
// requests since the last call, and starts counters for pods new to it.
func (x *Exporter) advance() {
	now := x.now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for key, l := range x.loads {
		ns, app, _ := strings.Cut(key, "/")
		pods, err := x.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			continue
		}
		var ready []*corev1.Pod
		for i := range pods.Items {
			if p := &pods.Items[i]; p.DeletionTimestamp == nil && podIsReady(p) {
				ready = append(ready, p)
			}
		}
		if len(ready) > 0 {
			x.writeUsage(ctx, ready, l.RPS/float64(len(ready))*l.CPUPerRequest, l.WorkingSet)
		}
		for _, p := range ready {
			k := ns + "/" + p.Name
			c, ok := x.pods[k]
			if !ok {
				x.pods[k] = &podCtrs{last: now, buckets: make([]float64, len(exporterBuckets))}
				continue
			}
			dt := now.Sub(c.last).Seconds()
			c.last = now
			n := l.RPS / float64(len(ready)) * dt
			lat := l.Latency.Seconds()
			c.requests += n
			c.sum += n * lat
			c.cpu += n * l.CPUPerRequest
			for i, le := range exporterBuckets {
				if lat <= le+1e-12 {
					c.buckets[i] += n
				}
			}
		}
	}
}

// Annotations the plane's kwok reads each pod's usage from (see
// kwokstages/metrics-resource.yaml), for metrics-server and so the HPA.
const (
	UsageCPUAnnotation    = "setpoint.dev/usage-cpu"
	UsageMemoryAnnotation = "setpoint.dev/usage-memory"
)

// writeUsage writes on each pod the CPU (cores) and memory (bytes) it uses
// now, its share of its app's load, where they moved: what a kubelet
// would measure, and metrics-server read from it.
func (x *Exporter) writeUsage(ctx context.Context, pods []*corev1.Pod, cpu, memory float64) {
	c := fmt.Sprintf("%dm", int64(math.Round(cpu*1000)))
	m := strconv.FormatInt(int64(memory), 10)
	for _, p := range pods {
		if p.Annotations[UsageCPUAnnotation] == c && p.Annotations[UsageMemoryAnnotation] == m {
			continue
		}
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q,%q:%q}}}`, UsageCPUAnnotation, c, UsageMemoryAnnotation, m)
		// A pod gone since the list is no matter: the next call lists again.
		_, _ = x.cs.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	}
}

func podIsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
