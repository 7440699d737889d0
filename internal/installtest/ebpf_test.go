package installtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/setpoint-dev/setpoint/bpf/dataplane"
	"github.com/setpoint-dev/setpoint/internal/kubetest"
	"github.com/setpoint-dev/setpoint/providers/kubernetes/agentcr"
)

// netcheckImage is internal/installtest/netcheck, the backends' and the
// client's program.
const netcheckImage = "setpoint.test/netcheck:1"

// The RouteGroup's VIP: on loopback, so nothing but the agent's program
// can make a connect to it reach a backend.
const vip = "127.100.0.1:8080"

// TestShippedEBPFAgent: the eBPF agent's DaemonSet as shipped (privileged,
// its volumes; set to the node's cgroup root in the unified hierarchy, a
// bpffs of the node's and a VIP range on loopback) takes the RouteGroup
// the controller turned into a NodeAgentConfig and steers a real pod's
// connects to the VIP to the selector's pods, counted where they arrive:
// every connect reaches a backend, each backend accepted exactly what the
// client saw it answer, and a pod outside the selector gets none. With
// the agent's pod gone, the pinned dataplane stays: its heartbeat ages
// past the failsafe and connects still reach both backends. A new pod
// resumes it.
func TestShippedEBPFAgent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var bpffs string
	p, manifests, _ := installed(ctx, t, []string{"no-nri-agent"}, func(p *kubetest.Plane, _ string) map[string]string {
		var err error
		if bpffs, err = p.BPFFS(); err != nil {
			t.Fatal(err)
		}
		cg := p.UnifiedCgroupRoot()
		if cg == "" {
			t.Fatal("no cgroup2 hierarchy on this machine")
		}
		return map[string]string{"ebpf-host.yaml": fmt.Sprintf(`apiVersion: apps/v1
kind: DaemonSet
metadata: {name: setpoint-agent-ebpf, namespace: setpoint-system}
spec:
  template:
    spec:
      containers:
      - name: agent
        args: [agent, ebpf, --cgroup=/host/cgroup, --pin-dir=/sys/fs/bpf/setpoint, "--allow=10.0.0.0/8,127.100.0.0/16"]
      volumes:
      - name: cgroup
        hostPath: {path: %q, type: Directory}
      - name: bpffs
        hostPath: {path: %q, type: Directory}
`, cg, bpffs)}
	})
	if err := p.ApplyYAML(ctx, manifests, "kubectl"); err != nil {
		t.Fatal(err)
	}
	cs := p.Clientset(t)
	waitReady(ctx, t, p, cs, 3)
	const agentSel = "app.kubernetes.io/name=setpoint-agent-ebpf"
	agent := waitPods(ctx, t, p, cs, ns, agentSel, 1)[0]

	if err := p.ImportProgram(ctx, "github.com/setpoint-dev/setpoint/internal/installtest/netcheck", netcheckImage); err != nil {
		t.Fatal(err)
	}
	netcheck := func(mode string) string {
		return fmt.Sprintf("{name: netcheck, image: %s, imagePullPolicy: Never, args: [%s], resources: {requests: {cpu: 10m, memory: 16Mi}}}", netcheckImage, mode)
	}
	if err := p.ApplyYAML(ctx, shopNamespace+shopDeployment("echo", 2, netcheck("serve"))+"---\n"+shopDeployment("decoy", 1, netcheck("serve"))+
		"---\n"+shopDeployment("client", 1, netcheck("dial")), "kubectl"); err != nil {
		t.Fatal(err)
	}
	echo := waitPods(ctx, t, p, cs, "shop", "app=echo", 2)
	decoy := waitPods(ctx, t, p, cs, "shop", "app=decoy", 1)[0]
	client := waitPods(ctx, t, p, cs, "shop", "app=client", 1)[0]

	// Before the RouteGroup, the VIP is only the client's own loopback.
	if got := dial(ctx, t, client, 5); got.Failed != 5 {
		t.Fatalf("connects to %s reached %v before any RouteGroup", vip, got.By)
	}

	edited := time.Now()
	editSpec(ctx, t, cs, "echo.routegroup.yaml", `apiVersion: setpoint.dev/v1alpha1
kind: RouteGroup
metadata: {name: echo, namespace: shop}
spec:
  target: {provider: kubernetes}
  vip: `+vip+`/tcp
  backends: {selector: {app: echo}, port: 8080}
  metrics: {port: 8081}
  failsafe: {after: 1s}
  enforcement: {table: enforce}
`)
	var created time.Duration
	waitFor(ctx, t, "the node's agent routing the RouteGroup", func() (bool, string) {
		st := nodeStatus(ctx, p, t, "shop", "echo")
		if _, failed := st["error"]; !failed && created == 0 {
			created = time.Since(edited)
		}
		obs, _ := st["observed"].(map[string]any)
		return st["message"] == "ok" && obs["backends"] == int64(2), fmt.Sprintf("%v", st)
	}, func() string { return podLogs(p, ns) })
	t.Logf("the RouteGroup edited: its NodeAgentConfig %s after, routed by the node's agent %s after", created.Round(time.Millisecond), time.Since(edited).Round(time.Millisecond))

	// Every connect reaches one of the selector's pods, each backend
	// accepted what the client saw it answer, the decoy nothing; and the
	// dataplane's failsafe routed failsafe of them (all or none).
	pinDir := filepath.Join(bpffs, "setpoint")
	pinned, err := dataplane.OpenPinned(pinDir)
	if err != nil {
		t.Fatal(err)
	}
	defer pinned.Close()
	group, ok, err := pinned.Group(netip.MustParseAddrPort(vip), dataplane.TCP)
	if err != nil || !ok {
		t.Fatalf("the pinned dataplane routes no group for %s: %v", vip, err)
	}
	stats := func() dataplane.Stats {
		t.Helper()
		s, err := pinned.Stats(group)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	check := func(when string, n int, failsafe uint64) {
		t.Helper()
		before, sBefore := counts(ctx, t, append(slices.Clone(echo), decoy)), stats()
		got := dial(ctx, t, client, n)
		after, sAfter := counts(ctx, t, append(slices.Clone(echo), decoy)), stats()
		if got.Failed != 0 {
			t.Errorf("%s: %d of %d connects failed (%s)", when, got.Failed, n, got.Error)
		}
		for _, b := range echo {
			d := after[b.Name] - before[b.Name]
			if d != got.By[b.Name] || d == 0 {
				t.Errorf("%s: backend %s accepted %d connects, the client saw %d from it (want the same, and some)", when, b.Name, d, got.By[b.Name])
			}
		}
		if d := after[decoy.Name] - before[decoy.Name]; d != 0 || got.By[decoy.Name] != 0 {
			t.Errorf("%s: the pod outside the selector accepted %d connects", when, d)
		}
		if d := sAfter.Failsafe - sBefore.Failsafe; d != failsafe {
			t.Errorf("%s: the failsafe routed %d of the %d connects, want %d", when, d, n, failsafe)
		}
		t.Logf("%s: %d connects to %s from pod %s: %v (%d by the failsafe)", when, n, vip, client.Name, got.By, sAfter.Failsafe-sBefore.Failsafe)
	}
	check("routed", 200, 0)

	// The agent's pod goes (the DaemonSet kept off the node, so no
	// successor races the check): the dataplane stays pinned, the VIP's
	// heartbeat ages past its failsafe threshold, and every connect is
	// the failsafe's, still to the two backends.
	patchDaemonSet(ctx, t, cs, `{"spec":{"template":{"spec":{"nodeSelector":{"setpoint.test/no-such-node":"true"}}}}}`)
	waitGone(ctx, t, p, cs, ns, agentSel)
	waitFor(ctx, t, "the VIP's pinned heartbeat older than its failsafe threshold", func() (bool, string) {
		at, failsafe, err := pinned.Heartbeat(group)
		age := time.Duration(dataplane.Monotonic() - at)
		return err == nil && failsafe == time.Second && age > failsafe, fmt.Sprintf("age %v, threshold %v, %v", age, failsafe, err)
	}, nil)
	check("failsafe, no agent", 200, 200)

	// A new agent pod resumes the pinned dataplane: its own log says so,
	// the heartbeat is fresh, and the table routes again.
	patchDaemonSet(ctx, t, cs, `{"spec":{"template":{"spec":{"nodeSelector":null}}}}`)
	next := waitPods(ctx, t, p, cs, ns, agentSel, 1)[0]
	if next.UID == agent.UID {
		t.Fatalf("the agent pod %s was not replaced", agent.Name)
	}
	logs := filepath.Join(p.PodLogsDir(), fmt.Sprintf("%s_%s_%s", ns, next.Name, next.UID), "agent", "*.log")
	waitFor(ctx, t, "the new agent resuming the pinned dataplane, the VIP's heartbeat fresh", func() (bool, string) {
		at, failsafe, err := pinned.Heartbeat(group)
		age := time.Duration(dataplane.Monotonic() - at)
		files, _ := filepath.Glob(logs)
		resumed := false
		for _, f := range files {
			b, _ := os.ReadFile(f)
			resumed = resumed || strings.Contains(string(b), `msg="resumed a pinned dataplane"`)
		}
		return err == nil && resumed && age < failsafe, fmt.Sprintf("resumed %v (%s), age %v, threshold %v, %v", resumed, files, age, failsafe, err)
	}, func() string { return podLogs(p, ns) })
	check("resumed", 200, 0)
}

// waitPods waits for n Running pods of the selector, each with its
// containers started, and returns them.
func waitPods(ctx context.Context, t *testing.T, p *kubetest.Plane, cs kubernetes.Interface, namespace, selector string, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	waitFor(ctx, t, fmt.Sprintf("%d running pods %s in %s", n, selector, namespace), func() (bool, string) {
		list, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err.Error()
		}
		pods = pods[:0]
		for _, pod := range list.Items {
			if pod.DeletionTimestamp == nil && pod.Status.Phase == corev1.PodRunning && pod.Status.PodIP != "" &&
				len(pod.Status.ContainerStatuses) == 1 && pod.Status.ContainerStatuses[0].Ready {
				pods = append(pods, pod)
			}
		}
		return len(pods) == n, fmt.Sprintf("%d of %d pods running", len(pods), len(list.Items))
	}, func() string { return p.PlaneLogs() + "\n" + podLogs(p, namespace) })
	return pods
}

// waitGone waits until no pod of the selector is left.
func waitGone(ctx context.Context, t *testing.T, p *kubetest.Plane, cs kubernetes.Interface, namespace, selector string) {
	t.Helper()
	waitFor(ctx, t, "no pod "+selector, func() (bool, string) {
		list, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		return err == nil && len(list.Items) == 0, fmt.Sprint(err)
	}, p.PlaneLogs)
}

func patchDaemonSet(ctx context.Context, t *testing.T, cs kubernetes.Interface, patch string) {
	t.Helper()
	if _, err := cs.AppsV1().DaemonSets(ns).Patch(ctx, "setpoint-agent-ebpf", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// nodeStatus is the real node's entry in the NodeAgentConfig's status.
func nodeStatus(ctx context.Context, p *kubetest.Plane, t *testing.T, namespace, name string) map[string]any {
	u, err := p.Dynamic(t).Resource(agentcr.GVR).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return map[string]any{"error": err.Error()}
	}
	nodes, _, _ := unstructured.NestedSlice(u.Object, "status", "nodes")
	for _, e := range nodes {
		if m, ok := e.(map[string]any); ok && m["name"] == kubetest.RealNodeName {
			return m
		}
	}
	return nil
}

// tally is netcheck dial's answer.
type tally struct {
	By     map[string]int `json:"by"`
	Failed int            `json:"failed"`
	Error  string         `json:"error"`
}

// dial has the client pod make n connects to the VIP.
func dial(ctx context.Context, t *testing.T, client corev1.Pod, n int) tally {
	t.Helper()
	var got tally
	u := fmt.Sprintf("http://%s/dial?to=%s&n=%d", net.JoinHostPort(client.Status.PodIP, "8081"), url.QueryEscape(vip), n)
	if err := getJSON(ctx, u, &got); err != nil {
		t.Fatal(err)
	}
	return got
}

// counts is each backend pod's count of accepted connections.
func counts(ctx context.Context, t *testing.T, pods []corev1.Pod) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, pod := range pods {
		var n int
		if err := getJSON(ctx, "http://"+net.JoinHostPort(pod.Status.PodIP, "8081")+"/count", &n); err != nil {
			t.Fatal(err)
		}
		out[pod.Name] = n
	}
	return out
}

func getJSON(ctx context.Context, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s %s %v", u, resp.Status, b, err)
	}
	return json.Unmarshal(b, v)
}
