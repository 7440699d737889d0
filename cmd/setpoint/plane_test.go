package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	promsource "github.com/setpoint-dev/setpoint/engine/signals/prometheus"
	"github.com/setpoint-dev/setpoint/internal/kubetest"
	"github.com/setpoint-dev/setpoint/internal/promtest"
)

// TestPlaneNFRRaisesTheHPAsFloor runs setpoint apply, the real binary, on
// a full control plane: the NFR sees 600 req/s on 2 pods through a real
// Prometheus, raises the HPA's minReplicas by its bounded step, and the
// real HPA controller scales the Deployment, whose new pod the scheduler
// places and kwok makes Running and Ready. What is asserted is what the
// controllers did: the Deployment's replicas and its Ready pods.
func TestPlaneNFRRaisesTheHPAsFloor(t *testing.T) {
	p := kubetest.StartPlane(t, kubetest.PlaneOptions{})
	t.Logf("plane up: API server %s, controllers, scheduler, kwok and the node %s", p.StartupTime.Round(time.Millisecond), p.PlaneStartupTime.Round(time.Millisecond))
	ns := p.Namespace(t)
	p.Apply(t, fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: %[1]s}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: app, image: registry.example/web:1, resources: {requests: {cpu: 500m, memory: 256Mi}, limits: {memory: 512Mi}}}]}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web, namespace: %[1]s}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 2
  maxReplicas: 20
  metrics: [{type: Resource, resource: {name: cpu, target: {type: Utilization, averageUtilization: 70}}}]
`, ns))
	cs := p.Clientset(t)
	waitPods(t, p, ns, "app=web", 2)

	t0 := time.Now()
	exp := p.StartExporter(t)
	exp.SetLoad(ns, "web", kubetest.Load{RPS: 600, Latency: 40 * time.Millisecond, CPUPerRequest: 0.004, WorkingSet: 100 << 20})
	prom := promtest.Start(t, strings.TrimPrefix(exp.URL, "http://"))
	src, err := promsource.New(promsource.Config{URL: prom.URL})
	if err != nil {
		t.Fatal(err)
	}
	// A rate needs two scrapes of every pod.
	deadline := time.Now().Add(60 * time.Second)
	for {
		r, err := src.Query(context.Background(), `sum(rate(http_requests_total[1m])) > 500`, time.Now())
		if err == nil && len(r.Samples) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus never saw the load: %v %+v", err, r)
		}
		time.Sleep(200 * time.Millisecond)
	}

	t.Logf("prometheus sees the load after %s", time.Since(t0).Round(time.Millisecond))
	dir := t.TempDir()
	files := map[string]string{
		"env.yaml": fmt.Sprintf("apiVersion: setpoint.dev/v1alpha1\nkind: Environment\nmetadata: {name: plane}\nspec:\n  providers: [{name: kubernetes}]\n  signals: {default: prometheus, prometheus: {url: %q}}\n  state: {backend: file, path: state.json}\n", prom.URL),
		"web.yaml": fmt.Sprintf(`apiVersion: setpoint.dev/v1alpha1
kind: NFR
metadata: {name: web, namespace: %s}
spec:
  target: {kind: Deployment, name: web}
  throughput: {minRPS: 400}
  cpuPerPod: 500m
  latency: {p99: 250ms}
  enforcement: {replicas: enforce, memory: off}
`, ns),
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t1 := time.Now()
	out, errOut, code := runCLI(t, "apply", "--auto-approve", "--kubeconfig", p.Kubeconfig, dir)
	t.Logf("apply took %s", time.Since(t1).Round(time.Millisecond))
	if code != 0 || !strings.Contains(out, "spec.minReplicas: 2 → 3") {
		t.Fatalf("apply: exit %d\n%s\n%s", code, out, errOut)
	}
	// The HPA controller takes the floor to the Deployment; the pod it
	// adds is scheduled and becomes Ready.
	t2 := time.Now()
	waitPods(t, p, ns, "app=web", 3)
	t.Logf("3 pods Ready %s after the apply", time.Since(t2).Round(time.Millisecond))
	d, err := cs.AppsV1().Deployments(ns).Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil || *d.Spec.Replicas != 3 || d.Status.ReadyReplicas != 3 {
		t.Fatalf("the Deployment after the apply: %+v, %v", d.Status, err)
	}
}

// waitPods waits until exactly n pods of the selector are Running and
// Ready.
func waitPods(t *testing.T, p *kubetest.Plane, ns, selector string, n int) {
	t.Helper()
	cs := p.Clientset(t)
	deadline := time.Now().Add(60 * time.Second)
	last := ""
	for time.Now().Before(deadline) {
		pods, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
		if err == nil {
			ready := 0
			for _, pod := range pods.Items {
				for _, c := range pod.Status.Conditions {
					if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && pod.Status.Phase == corev1.PodRunning && pod.DeletionTimestamp == nil {
						ready++
					}
				}
			}
			if ready == n && len(pods.Items) == n {
				return
			}
			last = fmt.Sprintf("%d pods, %d Running and Ready", len(pods.Items), ready)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("want %d pods of %s Running and Ready: %s\n%s", n, selector, last, p.PlaneLogs())
}
