package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	promsource "github.com/setpoint-dev/setpoint/engine/signals/prometheus"
	"github.com/setpoint-dev/setpoint/internal/kubetest"
	"github.com/setpoint-dev/setpoint/internal/promtest"
	"github.com/setpoint-dev/setpoint/internal/testutil"
	"github.com/setpoint-dev/setpoint/providers/kubernetes"
	"github.com/setpoint-dev/setpoint/providers/kubernetes/kstate"
)

// planeWait bounds every wait for what the controllers do: a bound, not a
// verdict (a scale-down waits out the HPA's 30 s window after two
// metrics-server scrapes 10 s apart, slower on a busy machine).
const planeWait = 3 * time.Minute

// planeScenario is one end-to-end case on the full control plane: its
// objects and its app's load are set up first (every scenario's load
// needs a minute of history before a rate over [1m] says it, so they warm
// up together), then it runs setpoint, the real binary, and asserts what
// the controllers did.
type planeScenario struct {
	name string
	load kubetest.Load
	// pods is how many pods of app=web the objects make (default 2).
	pods int
	// objects are applied in the scenario's namespace (%[1]s).
	objects string
	run     func(t *testing.T, c *planeCase)
}

// planeCase is a scenario's running context.
type planeCase struct {
	p    *kubetest.Plane
	exp  *kubetest.Exporter
	ns   string
	prom string
	// dir, when set, is kept from one command to the next (its state
	// with it); otherwise each command gets a fresh one.
	dir string
}

// apply runs setpoint apply on a directory holding the Environment (the
// kubernetes provider, the real Prometheus) and the given specs.
func (c *planeCase) apply(t *testing.T, specs string) (string, string, int) {
	t.Helper()
	return c.run(t, specs, "apply", "--auto-approve")
}

// run runs a setpoint command on a fresh directory with the specs.
func (c *planeCase) run(t *testing.T, specs string, args ...string) (string, string, int) {
	t.Helper()
	dir := c.dir
	if dir == "" {
		dir = t.TempDir()
	}
	env := fmt.Sprintf("apiVersion: setpoint.dev/v1alpha1\nkind: Environment\nmetadata: {name: plane}\nspec:\n  providers: [{name: kubernetes}]\n  signals: {default: prometheus, prometheus: {url: %q}}\n  state: {backend: file, path: state.json}\n", c.prom)
	if err := os.WriteFile(filepath.Join(dir, "env.yaml"), []byte(env), 0o644); err != nil {
		t.Fatal(err)
	}
	specFile := filepath.Join(dir, "specs.yaml")
	if specs == "" {
		// No spec: the directory's is removed (a spec deleted from git).
		if err := os.Remove(specFile); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	} else if err := os.WriteFile(specFile, []byte(fmt.Sprintf(specs, c.ns)), 0o644); err != nil {
		t.Fatal(err)
	}
	return runCLI(t, append(args, "--kubeconfig", c.p.Kubeconfig, dir)...)
}

// plan runs setpoint plan --read-only the same way.
func (c *planeCase) plan(t *testing.T, specs string) (string, string, int) {
	t.Helper()
	return c.run(t, specs, "plan", "--read-only")
}

const webDeployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: %[1]s}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: app, image: registry.example/web:1, resources: {requests: {cpu: 500m, memory: 256Mi}, limits: {memory: 512Mi}}}]}
`

const webHPA = `---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web, namespace: %[1]s}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 2
  maxReplicas: 20
  metrics: [{type: Resource, resource: {name: cpu, target: {type: Utilization, averageUtilization: 70}}}]
`

// webNFR is the NFR on web, sized by the reference policy (the formula
// alone, no latency model): 1200 req/s at 1m of CPU each (what the
// busy load costs per request) needs 2.4 cores, ceil(2.4/0.5) = 3 pods of
// 500m; the bounded step (30%, at least 1) takes one more per apply. The
// HPA beside it, at 600 req/s, sees 300m of 500m a pod (60%, under its
// 70%) and keeps its own count.
const webNFR = `apiVersion: setpoint.dev/v1alpha1
kind: NFR
metadata: {name: web, namespace: %s}
spec:
  target: {kind: Deployment, name: web}
  policy: reference
  throughput: {minRPS: 1200}
  cpuPerPod: 500m
  latency: {p99: 250ms}
  enforcement: {replicas: enforce, memory: off}
`

var busy = kubetest.Load{RPS: 600, Latency: 40 * time.Millisecond, CPUPerRequest: 0.001, WorkingSet: 100 << 20}

var planeScenarios = []planeScenario{
	// NFR raises the HPA's minReplicas; the real HPA controller takes the
	// floor to the Deployment, whose new pod the scheduler places and kwok
	// makes Ready. Then more load: the HPA, on the CPU metrics-server reads
	// from the pods, goes above setpoint's floor, and setpoint's next plan
	// neither fights it nor lowers it. Lowered later, the floor leaves the
	// count to the HPA, which comes down by its own stabilisation window:
	// setpoint never writes the replicas an HPA sizes.
	{name: "hpa-floor", load: busy, objects: webDeployment + webHPA, run: func(t *testing.T, c *planeCase) {
		c.dir = t.TempDir()
		out, errOut, code := c.apply(t, webNFR)
		if code != 0 || !strings.Contains(out, "spec.minReplicas: 2 → 3") {
			t.Fatalf("apply: exit %d\n%s\n%s", code, out, errOut)
		}
		waitPods(t, c.p, c.ns, "app=web", 3)
		waitDeployment(t, c.p, c.ns, "web", 3)

		// 1500 req/s over 3 pods is 500m each, 100% of the request: the
		// HPA wants ceil(3 × 100/70) = 5, where 300m a pod (60%) holds.
		heavy := busy
		heavy.RPS = 1500
		c.exp.SetLoad(c.ns, "web", heavy)
		waitDeployment(t, c.p, c.ns, "web", 5)
		out, errOut, code = c.apply(t, webNFR)
		if code != 0 || strings.Contains(out, "→") {
			t.Fatalf("apply with the HPA above the floor: want nothing changed; exit %d\n%s\n%s", code, out, errOut)
		}
		cs := c.p.Clientset(t)
		ctx := context.Background()
		h, err := cs.AutoscalingV2().HorizontalPodAutoscalers(c.ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil || *h.Spec.MinReplicas != 3 || h.Status.DesiredReplicas != 5 {
			t.Fatalf("the HPA after setpoint's apply: min %v, desired %d, want 3 and 5 (%v)", h.Spec.MinReplicas, h.Status.DesiredReplicas, err)
		}

		// The floor lowered (minRPS 400: ceil(0.8) = 1, one step down from
		// 3), the load back to 600 req/s (24% of 5 pods): the HPA, not
		// setpoint, takes the Deployment down, once its window passes.
		c.exp.SetLoad(c.ns, "web", busy)
		lower := strings.Replace(webNFR, "minRPS: 1200", "minRPS: 400", 1) + "  safety: {stability: 0s, cooldown: 0s}\n"
		out, errOut, code = c.apply(t, lower)
		if code != 0 || !strings.Contains(out, "spec.minReplicas: 3 → 2") || strings.Contains(out, "spec.replicas") {
			pj, _, _ := c.run(t, lower, "plan", "--read-only", "--json")
			t.Fatalf("apply lowering the floor: want minReplicas 3 → 2 and nothing else; exit %d\n%s\n%s\nthe plan now:\n%s", code, out, errOut, pj)
		}
		waitDeployment(t, c.p, c.ns, "web", 2)
		d, err := cs.AppsV1().Deployments(c.ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range d.ManagedFields {
			if m.Manager == "setpoint" && m.FieldsV1 != nil && strings.Contains(m.FieldsV1.GetRawString(), `"f:replicas"`) {
				t.Fatalf("setpoint owns the replicas of a Deployment an HPA sizes: %s", m.FieldsV1.GetRawString())
			}
		}
	}},
	// Without an HPA, NFR writes the Deployment's replicas; its ReplicaSet
	// follows and the pod comes up.
	{name: "no-hpa", load: busy, objects: webDeployment, run: func(t *testing.T, c *planeCase) {
		out, errOut, code := c.apply(t, webNFR)
		if code != 0 || !strings.Contains(out, "spec.replicas: 2 → 3") {
			t.Fatalf("apply: exit %d\n%s\n%s", code, out, errOut)
		}
		waitPods(t, c.p, c.ns, "app=web", 3)
		// The ReplicaSet's controller writes its status a moment after
		// the pods it counts.
		waitDeployment(t, c.p, c.ns, "web", 3)
		rss, err := c.p.Clientset(t).AppsV1().ReplicaSets(c.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil || len(rss.Items) != 1 || *rss.Items[0].Spec.Replicas != 3 || rss.Items[0].Status.ReadyReplicas != 3 {
			t.Fatalf("want the one ReplicaSet at 3 ready: %+v, %v", rss, err)
		}
	}},
	// In-place memory: the NFR resizes the Deployment's running pods
	// through the resize subresource (kwok reports the resize as a kubelet
	// does): the same pods, never restarted, with the new memory and the
	// same QoS class.
	{name: "in-place", load: busy, objects: webDeployment, run: func(t *testing.T, c *planeCase) {
		c.dir = t.TempDir() // the state says what setpoint owns, for the repair below
		cs := c.p.Clientset(t)
		before, err := cs.CoreV1().Pods(c.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			t.Fatal(err)
		}
		out, errOut, code := c.apply(t, inPlaceNFR)
		if code != 0 || !strings.Contains(out, "requests.memory") {
			t.Fatalf("apply: exit %d\n%s\n%s", code, out, errOut)
		}
		// The controller has seen the Deployment as it is now (unpaused,
		// the new template): one ReplicaSet, the same pods, resized.
		waitDeployment(t, c.p, c.ns, "web", 2)
		d, err := cs.AppsV1().Deployments(c.ns).Get(context.Background(), "web", metav1.GetOptions{})
		if err != nil || d.Spec.Paused || d.Annotations["setpoint.dev/paused-for-resize"] != "" {
			t.Fatalf("the Deployment after the resize: paused %v, annotations %v, %v", d.Spec.Paused, d.Annotations, err)
		}
		if m := d.Spec.Template.Spec.Containers[0].Resources.Requests.Memory(); m.String() != "192Mi" {
			t.Fatalf("the template's request is %s, want 192Mi", m)
		}
		rss, err := cs.AppsV1().ReplicaSets(c.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil || len(rss.Items) != 1 {
			t.Fatalf("want the one ReplicaSet, no rollout: %d, %v", len(rss.Items), err)
		}
		after, err := cs.CoreV1().Pods(c.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil || len(after.Items) != len(before.Items) {
			t.Fatalf("pods after: %v, %v", after, err)
		}
		uids := map[string]bool{}
		for _, pod := range before.Items {
			uids[string(pod.UID)] = true
		}
		for _, pod := range after.Items {
			st := pod.Status.ContainerStatuses
			if !uids[string(pod.UID)] || restarts(&pod) != 0 || pod.Status.QOSClass != corev1.PodQOSBurstable ||
				pod.Spec.Containers[0].Resources.Requests.Memory().String() != "192Mi" || len(st) == 0 || st[0].Resources == nil ||
				st[0].Resources.Requests.Memory().String() != "192Mi" {
				t.Errorf("pod %s (%s): want one of the pods before, not restarted, Burstable, resized to 192Mi in spec and status: %+v", pod.Name, pod.UID, pod.Status)
			}
		}

		// A process killed between the pause and the resume leaves the
		// Deployment paused: the user's next release would never roll
		// out. The next plan says so and its apply resumes it; the
		// controller then rolls the release out.
		ctx := context.Background()
		stale := time.Now().Add(-10 * time.Minute).UTC().Format(time.RFC3339)
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}},"spec":{"paused":true}}`, kubernetes.ResizePausedAnnotation, stale)
		if _, err := cs.AppsV1().Deployments(c.ns).Patch(ctx, "web", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		release := `{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"registry.example/web:2"}]}}}}`
		if _, err := cs.AppsV1().Deployments(c.ns).Patch(ctx, "web", types.StrategicMergePatchType, []byte(release), metav1.PatchOptions{FieldManager: "kubectl"}); err != nil {
			t.Fatal(err)
		}
		waitPausedSeen(t, c.p, c.ns, "web")
		if rss, err := cs.AppsV1().ReplicaSets(c.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"}); err != nil || len(rss.Items) != 1 {
			t.Fatalf("paused, the release must not roll out: %d ReplicaSets, %v", len(rss.Items), err)
		}
		out, errOut, code = c.plan(t, inPlaceNFR)
		if code != 0 || !strings.Contains(out, "applied again, unchanged") || !strings.Contains(out, "never resumed it") {
			t.Fatalf("plan with the pause left over: want a repair; exit %d\n%s\n%s", code, out, errOut)
		}
		out, errOut, code = c.apply(t, inPlaceNFR)
		if code != 0 || !strings.Contains(out, "never resumed it") {
			t.Fatalf("apply with the pause left over: exit %d\n%s\n%s", code, out, errOut)
		}
		waitDeployment(t, c.p, c.ns, "web", 2)
		d, err = cs.AppsV1().Deployments(c.ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil || d.Spec.Paused || d.Annotations[kubernetes.ResizePausedAnnotation] != "" {
			t.Fatalf("after the repair: paused %v, annotations %v, %v", d.Spec.Paused, d.Annotations, err)
		}
		pods, err := cs.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			t.Fatal(err)
		}
		for _, pod := range pods.Items {
			if pod.DeletionTimestamp != nil {
				continue // an old one on its way out
			}
			if img := pod.Spec.Containers[0].Image; img != "registry.example/web:2" || uids[string(pod.UID)] {
				t.Errorf("pod %s: image %s; want the release rolled out on new pods", pod.Name, img)
			}
		}
	}},
	// In-place memory on Guaranteed pods with a pinned limit apart from
	// the request: a resize would make them Burstable, unlike their
	// template, so it is refused. With inPlaceFallback hold nothing moves
	// (the same pods, the template as it was, no new ReplicaSet); with
	// rollout the template changes and the controller rolls the pods out.
	// A canary's pods, which share the app label, are never touched.
	{name: "in-place-fallback", load: busy, pods: 3, objects: guaranteedDeployment + canaryDeployment, run: func(t *testing.T, c *planeCase) {
		cs := c.p.Clientset(t)
		ctx := context.Background()
		canary := func() []string {
			t.Helper()
			pods, err := cs.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{LabelSelector: "track=canary"})
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, p := range pods.Items {
				out = append(out, fmt.Sprintf("%s %s/%s", p.UID, p.Spec.Containers[0].Resources.Requests.Memory(), p.Spec.Containers[0].Resources.Limits.Memory()))
			}
			return out
		}
		canaryBefore := canary()
		before, err := cs.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web,track!=canary"})
		if err != nil {
			t.Fatal(err)
		}
		spec := func(fallback string) string {
			return `apiVersion: setpoint.dev/v1alpha1
kind: NFR
metadata: {name: web, namespace: %s}
spec:
  target: {kind: Deployment, name: web}
  memory: {apply: inPlace, inPlaceFallback: ` + fallback + `, headroom: 1.2, limitFactor: 1.5, limit: 400Mi, window: 5m}
  enforcement: {replicas: off, memory: enforce}
  safety: {stability: 0s, cooldown: 0s}
`
		}
		out, errOut, code := c.apply(t, spec("hold"))
		if code == 0 || !strings.Contains(out+errOut, "QoS class") || !strings.Contains(out+errOut, "inPlaceFallback: hold") {
			t.Fatalf("apply with fallback hold: want the resize refused; exit %d\n%s\n%s", code, out, errOut)
		}
		waitDeployment(t, c.p, c.ns, "web", 2)
		rss, err := cs.AppsV1().ReplicaSets(c.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web,track!=canary"})
		if err != nil || len(rss.Items) != 1 {
			t.Fatalf("fallback hold: want the one ReplicaSet: %d, %v", len(rss.Items), err)
		}
		after, err := cs.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web,track!=canary"})
		if err != nil || len(after.Items) != len(before.Items) {
			t.Fatalf("fallback hold: pods %v, %v", after, err)
		}
		for i := range after.Items {
			p := &after.Items[i]
			if m := p.Spec.Containers[0].Resources.Requests.Memory().String(); m != "256Mi" || p.Status.QOSClass != corev1.PodQOSGuaranteed {
				t.Errorf("fallback hold: pod %s has %s (%s); want it as it was", p.Name, m, p.Status.QOSClass)
			}
		}
		out, errOut, code = c.apply(t, spec("rollout"))
		if code != 0 || !strings.Contains(out, "requests.memory") {
			t.Fatalf("apply with fallback rollout: exit %d\n%s\n%s", code, out, errOut)
		}
		waitReplicaSets(t, c.p, c.ns, "app=web,track!=canary", 2)
		waitDeployment(t, c.p, c.ns, "web", 2)
		if got := canary(); fmt.Sprint(got) != fmt.Sprint(canaryBefore) {
			t.Fatalf("the canary's pods moved: %v, were %v", got, canaryBefore)
		}
	}},
	// A memory change through the template is a real rolling update
	// (each new pod Ready 4 s after it is placed); while it rolls, setpoint
	// holds further changes to that Deployment as rollout, and lets them
	// through once it is done.
	{name: "rollout", load: busy, objects: slowDeployment, run: func(t *testing.T, c *planeCase) {
		memory := `apiVersion: setpoint.dev/v1alpha1
kind: NFR
metadata: {name: web, namespace: %s}
spec:
  target: {kind: Deployment, name: web}
  memory: {headroom: 1.2, limitFactor: 1.5, window: 5m}
  enforcement: {replicas: off, memory: enforce}
  safety: {stability: 0s, cooldown: 0s}
`
		out, errOut, code := c.apply(t, memory)
		if code != 0 || !strings.Contains(out, "requests.memory: 256Mi → 192Mi") {
			t.Fatalf("apply: exit %d\n%s\n%s", code, out, errOut)
		}
		// 100,000 req/s asks 2 → 6 (one step: the count may double, and
		// move at least 4 pods) whatever the rate reads
		// while new pods' series start: the peak (a rate over 30 s, its
		// short new series extrapolated) has read several times the load
		// just after a rollout, which made a smaller target's lower bound
		// fall under the count there is (no change at all).
		both := strings.Replace(memory, "replicas: off", "replicas: enforce", 1) + "  policy: reference\n  throughput: {minRPS: 100000}\n  cpuPerPod: 500m\n"
		out, errOut, code = c.plan(t, both)
		if code != 0 || !strings.Contains(out, "spec.replicas") || !strings.Contains(out, "mid-rollout") {
			t.Fatalf("plan during the rollout: want spec.replicas held mid-rollout; exit %d\n%s\n%s", code, out, errOut)
		}
		waitReplicaSets(t, c.p, c.ns, "app=web", 2)
		waitDeployment(t, c.p, c.ns, "web", 2)
		out, errOut, code = c.plan(t, both)
		if code != 0 || !strings.Contains(out, "spec.replicas: 2 → 6") || strings.Contains(out, "mid-rollout") {
			t.Fatalf("plan after the rollout: want spec.replicas 2 → 6 not held; exit %d\n%s\n%s", code, out, errOut)
		}
	}},
	// A Schedule beside an HPA puts the Deployment to 0: the pods go, and
	// the real HPA controller, finding the count at 0, stops scaling it
	// (ScalingActive False, as upstream does) instead of raising it to its
	// minReplicas; woken, the pods come back and the HPA scales again.
	// Triggers beside the HPA are refused: two autoscalers on one workload.
	{name: "schedule-hpa", load: busy, objects: webDeployment + webHPA, run: func(t *testing.T, c *planeCase) {
		c.dir = t.TempDir()
		sched := func(activity, extra string) string {
			return `apiVersion: setpoint.dev/v1alpha1
kind: Schedule
metadata: {name: web, namespace: %[1]s}
spec:
  target: {kind: Deployment, name: web}
  replicas: {min: 0, atStart: 2, max: 10}
  idle: {after: 1m, grace: 0s, activity: "` + activity + `"}
  enforcement: {replicas: enforce}
` + extra
		}
		out, errOut, code := c.apply(t, sched("vector(0)", ""))
		if code != 0 || !strings.Contains(out, "spec.replicas: 2 → 0") {
			t.Fatalf("apply, idle: want 2 → 0; exit %d\n%s\n%s", code, out, errOut)
		}
		waitPods(t, c.p, c.ns, "app=web", 0)
		waitHPAActive(t, c.p, c.ns, "web", corev1.ConditionFalse)
		if d, err := c.p.Clientset(t).AppsV1().Deployments(c.ns).Get(context.Background(), "web", metav1.GetOptions{}); err != nil || *d.Spec.Replicas != 0 {
			t.Fatalf("the HPA, disabled, must leave the Deployment at 0: %v, %v", d.Spec.Replicas, err)
		}
		out, errOut, code = c.apply(t, sched("vector(1)", ""))
		if code != 0 || !strings.Contains(out, "spec.replicas: 0 → 2") {
			t.Fatalf("apply, active: want 0 → 2; exit %d\n%s\n%s", code, out, errOut)
		}
		waitPods(t, c.p, c.ns, "app=web", 2)
		waitHPAActive(t, c.p, c.ns, "web", corev1.ConditionTrue)
		out, errOut, code = c.plan(t, sched("vector(1)", "  triggers: [{name: rps, query: 'vector(100)', type: AverageValue, target: 50}]\n"))
		if code == 0 || !strings.Contains(out+errOut, "two autoscalers on one workload") {
			t.Fatalf("plan with triggers beside the HPA: want refused; exit %d\n%s\n%s", code, out, errOut)
		}
	}},
	// Fleet on Cluster API objects (no Cluster API controller runs here:
	// asserted on the objects). A plan saved with --out steps the short
	// cluster's MachineDeployment 3 → 6; someone else sets it to 4 before
	// the plan is applied: the apply refuses the stale plan and the 4
	// stays. (The provider's own test of the count it saw, for a change
	// made within the apply, is providers/kubernetes's TestCAPI….)
	{name: "fleet-stale-plan", run: func(t *testing.T, c *planeCase) {
		c.dir = t.TempDir()
		ctx := context.Background()
		dyn := c.p.Dynamic(t)
		for _, cl := range []struct {
			name string
			left float64
		}{{"c0", 1000}, {"c1", 9000}} {
			createCluster(t, dyn, c.ns, cl.name)
			c.exp.SetGauge("fleet_remaining", cl.left, "namespace", c.ns, "cluster", cl.name, "dimension", "connections")
			c.exp.SetGauge("fleet_instances", 1, "namespace", c.ns, "cluster", cl.name)
		}
		waitQuery(t, c.prom, fmt.Sprintf(`count(fleet_instances{namespace=%q}) == 2`, c.ns))
		fleet := `apiVersion: setpoint.dev/v1alpha1
kind: Fleet
metadata: {name: streaming, namespace: %[1]s}
spec:
  cloud: aws
  regions: [us-east-1]
  clusterTemplate: streaming-standard
  capacity: [{name: connections, perInstance: 3000, perNode: 3000}]
  nodes: {step: 3, floor: 3, ceiling: 30, workloadMinimum: 3}
  remaining: {connections: 'sum by (cluster) (fleet_remaining{namespace="%[1]s",dimension="connections"})'}
  instances: 'sum by (cluster) (fleet_instances{namespace="%[1]s"})'
  enforcement: {nodes: enforce, clusters: enforce}
`
		saved := filepath.Join(c.dir, "plan.json")
		out, errOut, code := c.run(t, fleet, "plan", "--out", saved)
		if code != 0 || !strings.Contains(out, "3 → 6") {
			t.Fatalf("plan --out: want c0's nodes 3 → 6; exit %d\n%s\n%s", code, out, errOut)
		}
		md := schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta1", Resource: "machinedeployments"}
		if _, err := dyn.Resource(md).Namespace(c.ns).Patch(ctx, "c0-md-0", types.MergePatchType, []byte(`{"spec":{"replicas":4}}`), metav1.PatchOptions{FieldManager: "ops"}); err != nil {
			t.Fatal(err)
		}
		out, errOut, code = runCLI(t, "apply", "--kubeconfig", c.p.Kubeconfig, saved)
		// Refused twice over: the saved plan is stale (what it observed
		// moved), and were it not, the provider's patch tests the count
		// the plan saw.
		if code == 0 || !strings.Contains(out+errOut, "stale") && !strings.Contains(out+errOut, "not overwritten") {
			t.Fatalf("apply of the saved plan after someone else's change: want it refused as stale; exit %d\n%s\n%s", code, out, errOut)
		}
		got, err := dyn.Resource(md).Namespace(c.ns).Get(ctx, "c0-md-0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas"); n != 4 {
			t.Fatalf("c0-md-0 has %d replicas; want the 4 someone else set", n)
		}
	}},
	// Three `setpoint watch` replicas share the state's shards over real
	// Leases while the controllers run. The first, alone, holds every
	// shard and is killed right after its first provider apply, before it
	// records it; then three replicas (the first again among them) split
	// the shards, settle that apply from the world and do the rest. Every
	// Deployment gets its one step 1 → 3, applied once (one
	// SetpointApplied Event each, one new generation), and its pods run.
	{name: "watchers", run: func(t *testing.T, c *planeCase) {
		const n = 12
		dir, stateNS := t.TempDir(), c.p.Namespace(t)
		var objs, specs strings.Builder
		for i := range n {
			fmt.Fprintf(&objs, `---
apiVersion: apps/v1
kind: Deployment
metadata: {name: w%02[2]d, namespace: %[1]s}
spec:
  replicas: 1
  selector: {matchLabels: {app: w%02[2]d}}
  template:
    metadata: {labels: {app: w%02[2]d}}
    spec: {containers: [{name: app, image: registry.example/w:1, resources: {requests: {cpu: 10m, memory: 64Mi}}}]}
`, c.ns, i)
			fmt.Fprintf(&specs, `---
apiVersion: setpoint.dev/v1alpha1
kind: Schedule
metadata: {name: w%02[2]d, namespace: %[1]s}
spec:
  target: {kind: Deployment, name: w%02[2]d}
  replicas: {min: 3, atStart: 3, max: 10}
  idle: {after: 10m, activity: "vector(1)"}
  enforcement: {replicas: enforce}
`, c.ns, i)
		}
		c.p.Apply(t, objs.String())
		env := fmt.Sprintf("apiVersion: setpoint.dev/v1alpha1\nkind: Environment\nmetadata: {name: plane}\nspec:\n  providers: [{name: kubernetes}]\n  signals: {default: prometheus, prometheus: {url: %q}}\n  state: {backend: kubernetes}\n  tick: 1s\n", c.prom)
		for name, body := range map[string]string{"env.yaml": env, "schedules.yaml": specs.String()} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		watch := func(crash bool) (*exec.Cmd, *testutil.Buffer) {
			log := &testutil.Buffer{}
			cmd := exec.Command(binary, "watch", "--kubeconfig", c.p.Kubeconfig, "--state-namespace", stateNS, "--lease-duration", "3s", dir)
			cmd.Stdout, cmd.Stderr = log, log
			if crash {
				cmd.Env = append(os.Environ(), crashAfterApplyEnv+"=1")
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			return cmd, log
		}
		first, log := watch(true)
		if err := first.Wait(); first.ProcessState.ExitCode() != crashExitCode {
			t.Fatalf("the first replica: %v, exit %d; want killed after its first apply\n%s", err, first.ProcessState.ExitCode(), log)
		}
		ctx := context.Background()
		cs := c.p.Clientset(t)
		early := 0
		for i := range n {
			d, err := cs.AppsV1().Deployments(c.ns).Get(ctx, fmt.Sprintf("w%02d", i), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if *d.Spec.Replicas == 3 {
				early++
			}
		}
		if early == 0 {
			t.Fatalf("the killed replica applied nothing before it died\n%s", log)
		}
		var logs []*testutil.Buffer
		for range 3 {
			_, l := watch(false)
			logs = append(logs, l)
		}
		dump := func() string {
			var all strings.Builder
			for j, l := range logs {
				fmt.Fprintf(&all, "--- replica %d\n%s\n", j, l)
			}
			return all.String()
		}
		// The three split the shards (each holds some, none more than its
		// share), settling what the dead one applied without applying it
		// again; then the specs change and each step is made once, by the
		// one replica that holds its shard.
		waitSplit(t, cs, stateNS, "plane", 3, dump)
		step := func(to int32, applies int, gen int64) {
			t.Helper()
			for i := range n {
				name := fmt.Sprintf("w%02d", i)
				waitPods(t, c.p, c.ns, "app="+name, int(to))
				waitDeployment(t, c.p, c.ns, name, to)
			}
			evs, err := cs.CoreV1().Events(c.ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			applied := map[string]int{}
			for _, e := range evs.Items {
				if e.Reason == "SetpointApplied" {
					applied[e.InvolvedObject.Name]++
				}
			}
			for i := range n {
				name := fmt.Sprintf("w%02d", i)
				d, err := cs.AppsV1().Deployments(c.ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if applied[name] != applies || d.Generation != gen {
					t.Errorf("%s at %d: %d applies recorded, generation %d; want %d and %d\n%s", name, to, applied[name], d.Generation, applies, gen, dump())
				}
			}
		}
		step(3, 1, 2)
		if err := os.WriteFile(filepath.Join(dir, "schedules.yaml"), []byte(strings.ReplaceAll(specs.String(), "min: 3, atStart: 3", "min: 4, atStart: 4")), 0o644); err != nil {
			t.Fatal(err)
		}
		step(4, 2, 3)
		// Nothing lost: the state has what the dead one applied settled
		// from the world, the user's 1 kept (not the 3 it found, as
		// adoption would take it), and the step after.
		st, err := kstate.New(cs, stateNS, "plane").Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			a := addrs.Attr{Object: addrs.Object{Provider: "kubernetes", Kind: "Deployment", Namespace: c.ns, Name: fmt.Sprintf("w%02d", i)}, Path: addrs.MustPath("spec.replicas")}
			if e, ok := st.Lookup(a); !ok || e.User == nil || e.User.Int() != 1 || e.Applied == nil || e.Applied.Value.Int() != 4 || e.Pending != nil {
				t.Errorf("%s in the state: %+v; want the user's 1, applied 4, nothing pending", a, e)
			}
		}
		t.Logf("the killed replica applied %d of %d Deployments before it died; its successors settled and did the rest", early, n)
	}},
	// Deleting the namespace with the spec in flight: the namespace
	// controller and the garbage collector take the Deployment, its
	// ReplicaSet, pods and HPA; setpoint's next plan says the target is
	// gone and changes nothing, and with the spec removed it releases
	// nothing it cannot: no error, nothing left to hand back.
	{name: "namespace-deleted", load: busy, objects: webDeployment + webHPA, run: func(t *testing.T, c *planeCase) {
		c.dir = t.TempDir()
		out, errOut, code := c.apply(t, webNFR)
		if code != 0 || !strings.Contains(out, "spec.minReplicas: 2 → 3") {
			t.Fatalf("apply: exit %d\n%s\n%s", code, out, errOut)
		}
		cs := c.p.Clientset(t)
		ctx := context.Background()
		if err := cs.CoreV1().Namespaces().Delete(ctx, c.ns, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		testutil.Poll(t, planeWait, 200*time.Millisecond, "namespace "+c.ns+" gone, and everything in it", func() (bool, string) {
			_, err := cs.CoreV1().Namespaces().Get(ctx, c.ns, metav1.GetOptions{})
			return err != nil, ""
		}, c.p.PlaneLogs)
		out, errOut, code = c.apply(t, webNFR)
		if code != 0 || !strings.Contains(out+errOut, "does not exist") || strings.Contains(out, "→") {
			t.Fatalf("apply with the namespace gone: want the target said gone, nothing changed; exit %d\n%s\n%s", code, out, errOut)
		}
		t.Logf("with the namespace gone:\n%s%s", out, errOut)
		out, errOut, code = c.run(t, "", "apply", "--auto-approve")
		if code != 0 || !strings.Contains(out, "the object is gone, so there is nothing to release") || strings.Contains(out, "held:") {
			t.Fatalf("apply with the spec removed: want the HPA said gone and no release held; exit %d\n%s\n%s", code, out, errOut)
		}
		// And forgotten: the next apply has nothing to say about it.
		out, errOut, code = c.run(t, "", "apply", "--auto-approve")
		if code != 0 || strings.Contains(out, "HorizontalPodAutoscaler") {
			t.Fatalf("apply once more: want the HPA forgotten; exit %d\n%s\n%s", code, out, errOut)
		}
	}},
}

const inPlaceNFR = `apiVersion: setpoint.dev/v1alpha1
kind: NFR
metadata: {name: web, namespace: %s}
spec:
  target: {kind: Deployment, name: web}
  memory: {apply: inPlace, headroom: 1.2, limitFactor: 1.5, window: 5m}
  enforcement: {replicas: off, memory: enforce}
  safety: {stability: 0s, cooldown: 0s}
`

// createCluster makes a Cluster API cluster of fleet "streaming" as its
// controllers would leave it: Provisioned, one MachineDeployment of 3
// ready nodes.
func createCluster(t *testing.T, dyn dynamic.Interface, ns, name string) {
	t.Helper()
	ctx := context.Background()
	for _, o := range []struct {
		resource string
		obj      map[string]any
		status   map[string]any
	}{
		{"clusters", map[string]any{"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
			"metadata": map[string]any{"name": name, "namespace": ns, "labels": map[string]any{"setpoint.dev/fleet": "streaming", "setpoint.dev/region": "us-east-1", "setpoint.dev/cloud": "aws"}}},
			map[string]any{"phase": "Provisioned"}},
		{"machinedeployments", map[string]any{"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment",
			"metadata": map[string]any{"name": name + "-md-0", "namespace": ns, "labels": map[string]any{"cluster.x-k8s.io/cluster-name": name}},
			"spec":     map[string]any{"clusterName": name, "replicas": int64(3)}},
			map[string]any{"replicas": int64(3), "readyReplicas": int64(3)}},
	} {
		gvr := schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta1", Resource: o.resource}
		created, err := dyn.Resource(gvr).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: o.obj}, metav1.CreateOptions{FieldManager: "capi-controller"})
		if err != nil {
			t.Fatal(err)
		}
		created.Object["status"] = o.status
		if _, err := dyn.Resource(gvr).Namespace(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// waitQuery waits until Prometheus answers q with a sample.
func waitQuery(t *testing.T, url, q string) {
	t.Helper()
	src, err := promsource.New(promsource.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Poll(t, planeWait, 200*time.Millisecond, "prometheus answering "+q, func() (bool, string) {
		r, err := src.Query(context.Background(), q, time.Now())
		return err == nil && len(r.Samples) > 0, fmt.Sprint(err)
	}, nil)
}

// waitHPAActive waits until the HPA's controller says whether it scales
// (its ScalingActive condition) as want.
func waitHPAActive(t *testing.T, p *kubetest.Plane, ns, name string, want corev1.ConditionStatus) {
	t.Helper()
	cs := p.Clientset(t)
	testutil.Poll(t, planeWait, 100*time.Millisecond, fmt.Sprintf("HPA %s/%s ScalingActive %s", ns, name, want), func() (bool, string) {
		h, err := cs.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range h.Status.Conditions {
			if c.Type == autoscalingv2.ScalingActive {
				return c.Status == want, fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
			}
		}
		return false, "no ScalingActive condition"
	}, p.PlaneLogs)
}

// waitPausedSeen waits until the deployment controller has seen the
// Deployment's latest generation while it is paused.
func waitPausedSeen(t *testing.T, p *kubetest.Plane, ns, name string) {
	t.Helper()
	cs := p.Clientset(t)
	testutil.Poll(t, planeWait, 100*time.Millisecond, fmt.Sprintf("Deployment %s/%s seen paused", ns, name), func() (bool, string) {
		d, err := cs.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil || d.Status.ObservedGeneration < d.Generation {
			return false, fmt.Sprint(err)
		}
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentProgressing && c.Reason == "DeploymentPaused" {
				return true, ""
			}
		}
		return false, "not DeploymentPaused"
	}, p.PlaneLogs)
}

// guaranteedDeployment is webDeployment with request = limit for CPU and
// memory (Guaranteed pods); canaryDeployment a canary of it whose one pod
// shares its app label.
var guaranteedDeployment = strings.Replace(webDeployment, "resources: {requests: {cpu: 500m, memory: 256Mi}, limits: {memory: 512Mi}}",
	"resources: {requests: {cpu: 500m, memory: 256Mi}, limits: {cpu: 500m, memory: 256Mi}}", 1)

const canaryDeployment = `---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web-canary, namespace: %[1]s}
spec:
  replicas: 1
  selector: {matchLabels: {app: web, track: canary}}
  template:
    metadata: {labels: {app: web, track: canary}}
    spec: {containers: [{name: app, image: registry.example/web:2, resources: {requests: {cpu: 500m, memory: 256Mi}, limits: {memory: 512Mi}}}]}
`

// slowDeployment is webDeployment whose pods are Ready 4 s after they are
// placed (kwok's stage reads the annotation).
var slowDeployment = strings.Replace(webDeployment, "    metadata: {labels: {app: web}}", "    metadata: {labels: {app: web}, annotations: {"+kubetest.ReadyAfterAnnotation+": 4s}}", 1)

func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, s := range p.Status.ContainerStatuses {
		n += s.RestartCount
	}
	return n
}

// TestPlane runs every scenario on one full control plane, each in a
// namespace of its own, through setpoint, the real binary.
func TestPlane(t *testing.T) {
	p := kubetest.StartPlane(t, kubetest.PlaneOptions{})
	t.Logf("plane up: API server %s, controllers, scheduler, kwok and the node %s", p.StartupTime.Round(time.Millisecond), p.PlaneStartupTime.Round(time.Millisecond))
	exp := p.StartExporter(t)
	prom := promtest.Start(t, strings.TrimPrefix(exp.URL, "http://"))
	cases := make([]*planeCase, len(planeScenarios))
	for i, s := range planeScenarios {
		c := &planeCase{p: p, exp: exp, ns: p.Namespace(t), prom: prom.URL}
		if s.objects != "" {
			p.Apply(t, fmt.Sprintf(s.objects, c.ns))
		}
		cases[i] = c
	}
	for i, s := range planeScenarios {
		if s.load.RPS == 0 {
			continue
		}
		waitPods(t, p, cases[i].ns, "app=web", cmp.Or(s.pods, 2))
		exp.SetLoad(cases[i].ns, "web", s.load)
	}
	// A rate over [1m] says the load once it has most of a minute of
	// samples.
	t0 := time.Now()
	src, err := promsource.New(promsource.Config{URL: prom.URL})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range planeScenarios {
		if s.load.RPS == 0 {
			continue
		}
		q := fmt.Sprintf(`sum(rate(http_requests_total{namespace=%q}[1m])) > %g`, cases[i].ns, 0.9*s.load.RPS)
		testutil.Poll(t, 2*time.Minute, 500*time.Millisecond, "prometheus seeing "+s.name+"'s load", func() (bool, string) {
			r, err := src.Query(context.Background(), q, time.Now())
			return err == nil && len(r.Samples) == 1, fmt.Sprintf("%v %+v", err, r)
		}, nil)
	}
	t.Logf("the load is in Prometheus's rates after %s", time.Since(t0).Round(time.Millisecond))
	for i, s := range planeScenarios {
		t.Run(s.name, func(t *testing.T) {
			t0 := time.Now()
			s.run(t, cases[i])
			t.Logf("%s: %s", s.name, time.Since(t0).Round(time.Millisecond))
		})
	}
}

// waitDeployment waits until the Deployment asks for n replicas and its
// controller says so, as kubectl rollout status judges it: the generation
// observed, and n updated, ready and available.
func waitDeployment(t *testing.T, p *kubetest.Plane, ns, name string, n int32) {
	t.Helper()
	cs := p.Clientset(t)
	testutil.Poll(t, planeWait, 100*time.Millisecond, fmt.Sprintf("Deployment %s/%s at %d", ns, name, n), func() (bool, string) {
		d, err := cs.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		st := d.Status
		return d.Spec.Replicas != nil && *d.Spec.Replicas == n && st.ObservedGeneration >= d.Generation &&
				st.UpdatedReplicas == n && st.ReadyReplicas == n && st.AvailableReplicas == n && st.Replicas == n,
			fmt.Sprintf("spec %v, status %+v", d.Spec.Replicas, st)
	}, p.PlaneLogs)
}

// waitReplicaSets waits until the selector has exactly n ReplicaSets.
func waitReplicaSets(t *testing.T, p *kubetest.Plane, ns, selector string, n int) {
	t.Helper()
	cs := p.Clientset(t)
	testutil.Poll(t, planeWait, 100*time.Millisecond, fmt.Sprintf("%d ReplicaSets of %s", n, selector), func() (bool, string) {
		rss, err := cs.AppsV1().ReplicaSets(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err.Error()
		}
		return len(rss.Items) == n, fmt.Sprintf("%d ReplicaSets", len(rss.Items))
	}, p.PlaneLogs)
}

// waitPods waits until exactly n pods of the selector are Running and
// Ready.
func waitPods(t *testing.T, p *kubetest.Plane, ns, selector string, n int) {
	t.Helper()
	cs := p.Clientset(t)
	testutil.Poll(t, planeWait, 100*time.Millisecond, fmt.Sprintf("%d pods of %s Running and Ready", n, selector), func() (bool, string) {
		pods, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err.Error()
		}
		ready := 0
		for _, pod := range pods.Items {
			for _, c := range pod.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && pod.Status.Phase == corev1.PodRunning && pod.DeletionTimestamp == nil {
					ready++
				}
			}
		}
		return ready == n && len(pods.Items) == n, fmt.Sprintf("%d pods, %d Running and Ready", len(pods.Items), ready)
	}, p.PlaneLogs)
}
