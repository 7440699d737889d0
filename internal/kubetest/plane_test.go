package kubetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// TestPlaneRunsPods: on the full plane a Deployment's pods are scheduled
// on the fake node and become Running and Ready (the deployment,
// replicaset and scheduler controllers, and kwok, each did its part), and
// an HPA's minReplicas raised above the Deployment's replicas makes the
// real HPA controller scale it.
func TestPlaneRunsPods(t *testing.T) {
	p := StartPlane(t, PlaneOptions{})
	t.Logf("plane: API server %s, the rest %s", p.StartupTime.Round(time.Millisecond), p.PlaneStartupTime.Round(time.Millisecond))
	ns := p.Namespace(t)
	p.Apply(t, fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: %[1]s}
spec:
  replicas: 3
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
  minReplicas: 3
  maxReplicas: 20
  metrics: [{type: Resource, resource: {name: cpu, target: {type: Utilization, averageUtilization: 70}}}]
`, ns))
	cs := p.Clientset(t)
	waitRunning(t, p, cs, ns, "app=web", 3)
	ctx := context.Background()
	hpa, err := cs.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	five := int32(5)
	hpa.Spec.MinReplicas = &five
	if _, err := cs.AutoscalingV2().HorizontalPodAutoscalers(ns).Update(ctx, hpa, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, p, cs, ns, "app=web", 5)
	d, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil || *d.Spec.Replicas != 5 {
		t.Fatalf("the Deployment asks for %v after the HPA's minReplicas went to 5: %v", d.Spec.Replicas, err)
	}

	// CPU: each of the five pods uses 450m of its 500m (90%, the HPA's
	// target is 70%): kwok serves it, metrics-server reads it, and the HPA
	// scales to ceil(5 × 90/70) = 7. The two new pods use a trickle (1m),
	// and (5 × 450 + 2 × 1)/7 = 322m is 64%: it stays at 7.
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range pods.Items {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"450m"}}}`, UsageCPUAnnotation)
		if _, err := cs.CoreV1().Pods(ns).Patch(ctx, pod.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitRunning(t, p, cs, ns, "app=web", 7)
	hpa, err = cs.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil || len(hpa.Status.CurrentMetrics) == 0 || hpa.Status.CurrentMetrics[0].Resource == nil ||
		hpa.Status.CurrentMetrics[0].Resource.Current.AverageUtilization == nil {
		t.Fatalf("the HPA reports no CPU utilisation: %+v, %v", hpa.Status, err)
	}
	t.Logf("the HPA scaled 5 → 7 on CPU; it reads %d%% now", *hpa.Status.CurrentMetrics[0].Resource.Current.AverageUtilization)
}

// waitRunning waits until exactly n pods of the selector are Running and
// Ready.
func waitRunning(t *testing.T, p *Plane, cs kubernetes.Interface, ns, selector string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	last := ""
	for {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err == nil {
			ready := 0
			for _, pod := range pods.Items {
				if pod.Status.Phase == corev1.PodRunning && podIsReady(&pod) && pod.DeletionTimestamp == nil {
					ready++
				}
			}
			if ready == n && len(pods.Items) == n {
				return
			}
			last = fmt.Sprintf("%d pods, %d Running and Ready", len(pods.Items), ready)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("want %d pods of %s Running and Ready: %s\n%s", n, selector, last, p.PlaneLogs())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
