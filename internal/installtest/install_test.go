package installtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/internal/kubetest"
	"github.com/setpoint-dev/setpoint/internal/promtest"
	"github.com/setpoint-dev/setpoint/internal/testutil"
	"github.com/setpoint-dev/setpoint/providers/kubernetes/kstate"
	"github.com/setpoint-dev/setpoint/providers/nodeagent"
)

const ns = "setpoint-system"

// TestShippedInstall: deploy/ as shipped, with only the image, the API
// server's address (no kube-proxy here) and the no-node-agents component
// set, runs on the real node: three replicas of `watch --in-cluster` from
// the image, on the ServiceAccount token the kubelet mounts, every one
// Ready, the shards' Leases held by them, no request of theirs refused by
// the shipped RBAC, their metrics scraped by a real Prometheus from the
// pods, an edit of the specs ConfigMap in every replica's volume and
// applied, and a verb the RBAC does not grant refused.
func TestShippedInstall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	p, manifests, _ := installed(ctx, t, []string{"no-node-agents"}, nil)
	if strings.Contains(manifests, "kind: DaemonSet") {
		t.Fatalf("the no-node-agents component left a DaemonSet:\n%s", manifests)
	}
	t0 := time.Now()
	if err := p.ApplyYAML(ctx, manifests, "kubectl"); err != nil {
		t.Fatal(err)
	}
	cs := p.Clientset(t)
	pods := waitReady(ctx, t, p, cs, 3)
	t.Logf("3 replicas Ready %s after the apply", time.Since(t0).Round(time.Millisecond))
	names := map[string]bool{}
	for _, pod := range pods {
		names[pod.Name] = true
		if img := pod.Spec.Containers[0].Image; img != ImageName+":test" {
			t.Errorf("pod %s runs %s", pod.Name, img)
		}
		if pod.Spec.ServiceAccountName != "setpoint" {
			t.Errorf("pod %s runs as %s", pod.Name, pod.Spec.ServiceAccountName)
		}
	}

	// The replicas' metrics, on the port deploy/monitoring's PodMonitor
	// names (health, /metrics), scraped by a real Prometheus from the
	// pods' addresses.
	var targets []string
	for _, pod := range pods {
		targets = append(targets, net.JoinHostPort(pod.Status.PodIP, "8081"))
	}
	prom := promtest.Start(t, targets...)
	waitFor(ctx, t, fmt.Sprintf("Prometheus scraping the replicas at %v", targets), func() (bool, string) {
		up := promQuery(ctx, prom.URL, `sum(up)`)
		series := promQuery(ctx, prom.URL, `count(setpoint_reconcile_duration_seconds_count)`)
		return up == "3" && series == "3", fmt.Sprintf("sum(up) %q, reconcile series %q", up, series)
	}, nil)

	// Every shard's Lease is held by one of the replicas (the holder is
	// HOST/PID/START, the host the pod's name).
	waitFor(ctx, t, "every shard Lease held by the replicas", func() (bool, string) {
		leases, err := cs.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{LabelSelector: "setpoint.dev/lock=shard"})
		held := 0
		if err == nil {
			for _, l := range leases.Items {
				if l.Spec.HolderIdentity != nil && names[strings.Split(*l.Spec.HolderIdentity, "/")[0]] {
					held++
				}
			}
		}
		return held == 16, fmt.Sprintf("%d of 16 held (%v)", held, err)
	}, nil)

	// Nothing the replicas asked for was refused: their logs, as the
	// kubelet wrote them, say no "forbidden".
	forbidden := regexp.MustCompile(`(?i)forbidden|cannot (get|list|watch|create|update|patch|delete)`)
	logs, _ := filepath.Glob(filepath.Join(p.PodLogsDir(), ns+"_setpoint-*", "setpoint", "*.log"))
	if len(logs) < 3 {
		t.Fatalf("want the logs of 3 replicas, found %v", logs)
	}
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			t.Fatal(err)
		}
		if m := forbidden.Find(b); m != nil {
			t.Errorf("%s: a request was refused (%q):\n%s", l, m, b)
		}
	}

	// An edit of the specs ConfigMap: the kubelet swaps every replica's
	// volume (its ..data link) to the new data, and the replica holding
	// the new spec's shard applies it: a NodePolicy for the node's NRI
	// agents becomes a NodeAgentConfig.
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "setpoint-specs", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["pinned.nodepolicy.yaml"] = `apiVersion: setpoint.dev/v1alpha1
kind: NodePolicy
metadata: {name: pinned}
spec:
  target: {provider: kubernetes}
  nodeSelector: {kubernetes.io/hostname: ` + kubetest.RealNodeName + `}
  reserved: {cpus: "0"}
  pools:
    - {name: pinned, namespaces: [shop], minCPUs: 1, maxCPUs: 1}
  enforcement: {cpus: enforce}
`
	nac := schema.GroupVersionResource{Group: "setpoint.dev", Version: "v1alpha1", Resource: "nodeagentconfigs"}
	dyn := p.Dynamic(t)
	if l, err := dyn.Resource(nac).List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 0 {
		t.Fatalf("NodeAgentConfigs before the edit: %v, %v", l, err)
	}
	edited := time.Now()
	if _, err := cs.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	seen := map[string]time.Duration{}
	var applied time.Duration
	waitFor(ctx, t, "the edit in every replica's volume, and applied", func() (bool, string) {
		for _, pod := range pods {
			f := filepath.Join(p.KubeletRootDir(), "pods", string(pod.UID), "volumes", "kubernetes.io~configmap", "specs", "pinned.nodepolicy.yaml")
			if _, ok := seen[pod.Name]; !ok {
				if _, err := os.Stat(f); err == nil {
					seen[pod.Name] = time.Since(edited)
				}
			}
		}
		if applied == 0 {
			if l, err := dyn.Resource(nac).List(ctx, metav1.ListOptions{}); err == nil && len(l.Items) > 0 {
				applied = time.Since(edited)
			}
		}
		return len(seen) == len(pods) && applied > 0, fmt.Sprintf("in %d of %d replicas' volumes (%v), applied: %v", len(seen), len(pods), seen, applied > 0)
	}, nil)
	t.Logf("the specs ConfigMap edited: in each replica's volume after %v; applied (a NodeAgentConfig) %s after the edit", seen, applied.Round(time.Millisecond))

	// A verb the shipped RBAC does not grant is refused.
	sa, err := kubernetes.NewForConfig(p.ConfigAs("system:serviceaccount:"+ns+":setpoint", "system:serviceaccounts", "system:serviceaccounts:"+ns))
	if err != nil {
		t.Fatal(err)
	}
	_, err = sa.CoreV1().Secrets("kube-system").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "not-setpoints"}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("creating a Secret in kube-system as setpoint: %v, want forbidden", err)
	}
}

// waitReady waits for n Ready pods of the setpoint Deployment.
func waitReady(ctx context.Context, t *testing.T, p *kubetest.Plane, cs kubernetes.Interface, n int) []corev1.Pod {
	t.Helper()
	var ready []corev1.Pod
	waitFor(ctx, t, fmt.Sprintf("%d replicas Ready", n), func() (bool, string) {
		list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=setpoint"})
		ready = nil
		if err == nil {
			for _, pod := range list.Items {
				for _, c := range pod.Status.Conditions {
					if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && pod.DeletionTimestamp == nil {
						ready = append(ready, pod)
					}
				}
			}
		}
		var st []string
		if list != nil {
			for _, pod := range list.Items {
				st = append(st, pod.Name+": "+string(pod.Status.Phase))
				for _, c := range pod.Status.ContainerStatuses {
					st = append(st, c.String())
				}
			}
		}
		return len(ready) == n, fmt.Sprintf("%d Ready: %v", len(ready), st)
	}, p.PlaneLogs)
	return ready
}

// TestShippedNRIAgent: the NRI agent's DaemonSet as shipped (its host paths
// set to the node's: the NRI socket's directory and a state directory)
// takes a NodePolicy the controller turned into a NodeAgentConfig and, over
// containerd's own NRI, pins a running container of the policy's pool to a
// CPU of the node's own topology: its cpuset cgroup changes in place (same
// container, no restart), and goes back when the policy is deleted.
func TestShippedNRIAgent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The agent's host paths: the node's NRI socket's directory and a
	// state directory of the test's.
	p, manifests, _ := installed(ctx, t, []string{"no-ebpf-agent"}, func(p *kubetest.Plane, work string) map[string]string {
		return map[string]string{"nri-paths.yaml": fmt.Sprintf(`apiVersion: apps/v1
kind: DaemonSet
metadata: {name: setpoint-agent-nri, namespace: setpoint-system}
spec:
  template:
    spec:
      volumes:
      - name: nri
        hostPath: {path: %q, type: Directory}
      - name: cache
        hostPath: {path: %q, type: DirectoryOrCreate}
`, filepath.Dir(p.NRISocket()), filepath.Join(work, "agent-state"))}
	})
	if err := p.ApplyYAML(ctx, manifests, "kubectl"); err != nil {
		t.Fatal(err)
	}
	cs := p.Clientset(t)
	waitReady(ctx, t, p, cs, 3)

	// A workload of the pool's namespace.
	pause := fmt.Sprintf("{name: app, image: %s, imagePullPolicy: Never, command: [/pause], resources: {requests: {cpu: 500m, memory: 32Mi}, limits: {memory: 64Mi}}}", kubetest.PauseImage)
	if err := p.ApplyYAML(ctx, shopNamespace+shopDeployment("web", 1, pause), "kubectl"); err != nil {
		t.Fatal(err)
	}
	web := waitPod(ctx, t, p, cs, "shop", "app=web")
	id := strings.TrimPrefix(web.Status.ContainerStatuses[0].ContainerID, "containerd://")
	cpus := cgroupFile(t, p.CgroupRoot(), "cpuset", id, "cpuset.cpus")
	before := readTrim(t, cpus)
	t.Logf("web's container %s: cpuset %s", id[:12], before)

	edited := time.Now()
	editSpec(ctx, t, cs, "pinned.nodepolicy.yaml", pinnedPolicy)
	pinned := waitFile(ctx, t, p, cpus, func(v string) bool { return v != before })
	t.Logf("pinned to %s %s after the edit", pinned, time.Since(edited).Round(time.Millisecond))
	if strings.ContainsAny(pinned, ",-") {
		t.Errorf("web's container pinned to %q: want one CPU", pinned)
	}
	if l := podLogs(p, ns); strings.Contains(l, "does not fit") {
		t.Errorf("the pool did not fit:\n%s", l)
	}
	after, err := cs.CoreV1().Pods("shop").Get(ctx, web.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st := after.Status.ContainerStatuses[0]; st.ContainerID != web.Status.ContainerStatuses[0].ContainerID || st.RestartCount != 0 {
		t.Errorf("the container was restarted: %s (%d restarts), was %s", st.ContainerID, st.RestartCount, web.Status.ContainerStatuses[0].ContainerID)
	}

	// The policy deleted: the container gets its CPUs back, in place.
	// Another policy (of no node) stays, so the deletion is one spec of
	// two, not the empty checkout the vanished-specs guard holds.
	editSpec(ctx, t, cs, "spare.nodepolicy.yaml", sparePolicy)
	spare := addrs.Attr{Object: addrs.Object{Provider: "kubernetes", Kind: nodeagent.Kind, Namespace: "default", Name: "spare"}, Path: nodeagent.Config}
	waitFor(ctx, t, "the spare policy applied", func() (bool, string) {
		st, err := kstate.New(cs, ns, "prod").Load(ctx)
		if err != nil {
			return false, err.Error()
		}
		e, ok := st.Lookup(spare)
		return ok && e.Applied != nil, fmt.Sprintf("%+v", e)
	}, func() string { return podLogs(p, ns) })
	deleted := time.Now()
	editSpec(ctx, t, cs, "pinned.nodepolicy.yaml", "")
	released := waitFile(ctx, t, p, cpus, func(v string) bool { return v == before })
	t.Logf("released to %s %s after the deletion", released, time.Since(deleted).Round(time.Millisecond))
	if now, err := cs.CoreV1().Pods("shop").Get(ctx, web.Name, metav1.GetOptions{}); err != nil || len(now.Status.ContainerStatuses) != 1 || now.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("after the release, want the container unrestarted: %v, %+v", err, now)
	}
}

// shopNamespace is the namespace the tests' workloads run in.
const shopNamespace = "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n---\n"

// shopDeployment is a Deployment in namespace shop of the replicas given,
// its pods labelled app=NAME, running the one container (a flow mapping).
func shopDeployment(name string, replicas int, container string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %[1]s, namespace: shop}
spec:
  replicas: %[2]d
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      terminationGracePeriodSeconds: 1
      containers: [%[3]s]
`, name, replicas, container)
}

// waitPod waits for one Running pod of the selector with its container
// started.
func waitPod(ctx context.Context, t *testing.T, p *kubetest.Plane, cs kubernetes.Interface, namespace, selector string) corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	waitFor(ctx, t, fmt.Sprintf("a running pod %s in %s", selector, namespace), func() (bool, string) {
		list, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err == nil && len(list.Items) == 1 && list.Items[0].Status.Phase == corev1.PodRunning &&
			len(list.Items[0].Status.ContainerStatuses) == 1 && list.Items[0].Status.ContainerStatuses[0].ContainerID != "" {
			pod = list.Items[0]
			return true, ""
		}
		return false, fmt.Sprint(err)
	}, p.PlaneLogs)
	return pod
}

// cgroupFile is file in the container's cgroup of the hierarchy, under the
// node's cgroup root.
func cgroupFile(t *testing.T, root, hierarchy, id, file string) string {
	t.Helper()
	var found string
	_ = filepath.WalkDir(filepath.Join("/sys/fs/cgroup", hierarchy, root), func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && filepath.Base(path) == id {
			found = filepath.Join(path, file)
		}
		return nil
	})
	if found == "" {
		t.Fatalf("no %s cgroup for container %s under %s", hierarchy, id, root)
	}
	return found
}

func readTrim(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// waitFile waits until the file's trimmed content satisfies ok.
func waitFile(ctx context.Context, t *testing.T, p *kubetest.Plane, path string, ok func(string) bool) string {
	t.Helper()
	var v string
	waitFor(ctx, t, path, func() (bool, string) {
		b, err := os.ReadFile(path)
		v = strings.TrimSpace(string(b))
		return err == nil && ok(v), fmt.Sprintf("%q, %v", v, err)
	}, func() string { return p.PlaneLogs() + "\n" + podLogs(p, ns) })
	return v
}

// podLogs is every container log the real node's kubelet wrote for the
// namespace's pods (for failures).
func podLogs(p *kubetest.Plane, namespace string) string {
	var b strings.Builder
	files, _ := filepath.Glob(filepath.Join(p.PodLogsDir(), namespace+"_*", "*", "*.log"))
	for _, f := range files {
		data, _ := os.ReadFile(f)
		if len(data) > 16<<10 {
			data = data[len(data)-16<<10:]
		}
		fmt.Fprintf(&b, "--- %s\n%s\n", f, data)
	}
	return b.String()
}

// installed starts a plane with a real node, imports setpoint's image and
// builds deploy/ through an overlay of the given components and patches
// (made with the plane and the work directory). It returns the plane,
// the manifests, not yet applied, and the work directory.
func installed(ctx context.Context, t *testing.T, components []string, patches func(p *kubetest.Plane, work string) map[string]string) (*kubetest.Plane, string, string) {
	t.Helper()
	p := kubetest.StartPlane(t, kubetest.PlaneOptions{RealNode: true})
	repo, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	t0 := time.Now()
	tarPath, err := BuildImage(ctx, repo, work, "test")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.ImportImage(ctx, tarPath); err != nil {
		t.Fatal(err)
	}
	t.Logf("image built and imported in %s", time.Since(t0).Round(time.Millisecond))
	overlay := filepath.Join(work, "overlay")
	if err := os.MkdirAll(overlay, 0o755); err != nil {
		t.Fatal(err)
	}
	host, port := p.InClusterHost()
	o := Overlay{Tag: "test", APIHost: host, APIPort: port, Components: components}
	if patches != nil {
		o.Patches = patches(p, work)
	}
	if err := o.Write(overlay, repo); err != nil {
		t.Fatal(err)
	}
	manifests, err := Build(overlay)
	if err != nil {
		t.Fatal(err)
	}
	return p, manifests, work
}

// promQuery is an instant query's one value ("" when there is none).
func promQuery(ctx context.Context, base, q string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/query?query="+url.QueryEscape(q), nil)
	if err != nil {
		return ""
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var body struct {
		Data struct {
			Result []struct {
				Value []any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&body) != nil || len(body.Data.Result) != 1 || len(body.Data.Result[0].Value) != 2 {
		return ""
	}
	v, _ := body.Data.Result[0].Value[1].(string)
	return v
}

// TestShippedInstallReplicaKilledMidApply: with the crash hook turned on
// through an overlay (the process exits between a provider's apply and the
// state's record of it), the replica holding a new spec's shard applies
// it and dies; its container restarts, then its pod is deleted. The
// replica that records the apply after it does not make it again: the
// NodeAgentConfig is at generation 1 with one SetpointApplied Event.
func TestShippedInstallReplicaKilledMidApply(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p, manifests, _ := installed(ctx, t, []string{"no-node-agents"}, func(*kubetest.Plane, string) map[string]string {
		return map[string]string{"crash.yaml": `apiVersion: apps/v1
kind: Deployment
metadata: {name: setpoint, namespace: setpoint-system}
spec:
  template:
    spec:
      containers:
      - name: setpoint
        env:
        - {name: SETPOINT_TEST_CRASH_AFTER_APPLY, value: "1"}
`}
	})
	if err := p.ApplyYAML(ctx, manifests, "kubectl"); err != nil {
		t.Fatal(err)
	}
	cs := p.Clientset(t)
	waitReady(ctx, t, p, cs, 3)
	editSpec(ctx, t, cs, "pinned.nodepolicy.yaml", pinnedPolicy)
	// The crash: a replica's container exits (86) after the apply.
	var crashed string
	waitFor(ctx, t, "a replica crashed (exit 86) after the apply", func() (bool, string) {
		list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=setpoint"})
		if err == nil {
			for _, pod := range list.Items {
				for _, c := range pod.Status.ContainerStatuses {
					if c.LastTerminationState.Terminated != nil && c.LastTerminationState.Terminated.ExitCode == 86 {
						crashed = pod.Name
					}
				}
			}
		}
		return crashed != "", fmt.Sprint(err)
	}, func() string { return podLogs(p, ns) })
	zero := int64(0)
	if err := cs.CoreV1().Pods(ns).Delete(ctx, crashed, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	t.Logf("replica %s crashed after the apply; its pod deleted", crashed)

	// A successor records the apply the dead one made.
	attr := addrs.Attr{Object: addrs.Object{Provider: "kubernetes", Kind: "NodeAgentConfig", Namespace: "default", Name: "pinned"}, Path: addrs.MustPath("spec.config")}
	b := kstate.New(cs, ns, "prod")
	waitFor(ctx, t, "a replica recording the apply", func() (bool, string) {
		st, err := b.Load(ctx)
		if err != nil {
			return false, err.Error()
		}
		e, ok := st.Lookup(attr)
		return ok && e.Applied != nil && e.Pending == nil, fmt.Sprintf("%+v", e)
	}, func() string { return podLogs(p, ns) })
	nac := schema.GroupVersionResource{Group: "setpoint.dev", Version: "v1alpha1", Resource: "nodeagentconfigs"}
	obj, err := p.Dynamic(t).Resource(nac).Namespace("default").Get(ctx, "pinned", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if g := obj.GetGeneration(); g != 1 {
		t.Errorf("the NodeAgentConfig is at generation %d, want 1 (one write)", g)
	}
	events, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "reason=SetpointApplied,involvedObject.name=pinned"})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range events.Items {
		n += int(max(e.Count, 1))
	}
	if n != 1 {
		t.Errorf("%d SetpointApplied Events for the NodeAgentConfig, want 1: %+v", n, events.Items)
	}
}

// pinnedPolicy is a NodePolicy for the real node's NRI agents: a pool of
// one of its two CPUs for namespace shop (the other is the default
// pool's).
var pinnedPolicy = `apiVersion: setpoint.dev/v1alpha1
kind: NodePolicy
metadata: {name: pinned}
spec:
  target: {provider: kubernetes}
  nodeSelector: {kubernetes.io/hostname: ` + kubetest.RealNodeName + `}
  pools:
    - {name: pinned, namespaces: [shop], minCPUs: 1, maxCPUs: 1}
  enforcement: {cpus: enforce}
`

// sparePolicy is a NodePolicy of no node of the plane's.
var sparePolicy = strings.NewReplacer("name: pinned}", "name: spare}", "kubernetes.io/hostname: "+kubetest.RealNodeName, "kubernetes.io/hostname: no-such-node").Replace(pinnedPolicy)

// editSpec writes one spec file into the specs ConfigMap, as a user's
// kubectl edit does; an empty body deletes the file.
func editSpec(ctx context.Context, t *testing.T, cs kubernetes.Interface, name, body string) {
	t.Helper()
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "setpoint-specs", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if body == "" {
		delete(cm.Data, name)
	} else {
		cm.Data[name] = body
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond every 200 ms (testutil.Poll) until it holds or the
// test's context is done, and then fails with its last word and more's.
func waitFor(ctx context.Context, t *testing.T, what string, cond func() (bool, string), more func() string) {
	t.Helper()
	within := time.Minute
	if d, ok := ctx.Deadline(); ok {
		within = time.Until(d)
	}
	testutil.Poll(t, within, 200*time.Millisecond, what, cond, more)
}
