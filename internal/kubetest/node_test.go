package kubetest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/setpoint-dev/setpoint/internal/testutil"
)

// TestRealNodeRunsAPod: on the plane with a real node a pod's container
// runs — a process of runc's under the node's cgroup root, with the
// memory limit the pod asked for in its cgroup — and deleting the pod
// takes it away. At the plane's end nothing of the node is left: no
// cgroup, mount, bridge, shim, CNI cache or log link, and the kernel
// tunables the kubelet set are as they were.
func TestRealNodeRunsAPod(t *testing.T) {
	// Read with no real node running (another package's may be): the
	// machine's lock held.
	var tunables string
	withHostLock(t, func() { tunables = readSysctls(t) })
	p, err := startPlane(PlaneOptions{RealNode: true})
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = p.stop()
		}
	}()
	t.Logf("plane: API server %s, the rest with the real node %s", p.StartupTime.Round(time.Millisecond), p.PlaneStartupTime.Round(time.Millisecond))
	root, dir, sock, bridge := p.CgroupRoot(), p.Dir, p.node.sock, p.net.bridge
	ns := p.Namespace(t)
	cs := p.Clientset(t)
	ctx := context.Background()
	p.Apply(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: sleeper, namespace: %s}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: %s
    imagePullPolicy: Never
    command: [/pause]
    resources: {requests: {cpu: 100m, memory: 32Mi}, limits: {memory: 64Mi}}
`, ns, PauseImage))
	var pod *corev1.Pod
	testutil.Poll(t, 2*time.Minute, 200*time.Millisecond, "the host-network pod running", func() (bool, string) {
		pod, err = cs.CoreV1().Pods(ns).Get(ctx, "sleeper", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return pod.Status.Phase == corev1.PodRunning && len(pod.Status.ContainerStatuses) == 1 && pod.Status.ContainerStatuses[0].Ready, fmt.Sprintf("%+v", pod.Status)
	}, p.PlaneLogs)
	id := strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://")
	if pod.Spec.NodeName != RealNodeName || id == "" {
		t.Fatalf("pod on %q with container %q", pod.Spec.NodeName, id)
	}
	// The container's memory cgroup, under the node's root: its limit is
	// the pod's.
	var limitFile string
	_ = filepath.WalkDir(filepath.Join("/sys/fs/cgroup/memory", root), func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && strings.HasSuffix(path, id) {
			limitFile = filepath.Join(path, "memory.limit_in_bytes")
		}
		return nil
	})
	b, err := os.ReadFile(limitFile)
	if err != nil {
		t.Fatalf("no memory cgroup for container %s under %s: %v", id, root, err)
	}
	if got := strings.TrimSpace(string(b)); got != fmt.Sprint(64<<20) {
		t.Errorf("the container's memory limit is %s, want %d", got, 64<<20)
	}
	procs, err := os.ReadFile(filepath.Join(filepath.Dir(limitFile), "cgroup.procs"))
	if err != nil || len(strings.Fields(string(procs))) == 0 {
		t.Errorf("no process in the container's cgroup: %q, %v", procs, err)
	}

	// A pod on the pods' network: an address of the node's subnet, its
	// service account's token mounted (admission and the kubelet's token
	// request), and the node's metrics served by metrics-server from the
	// kubelet.
	p.Apply(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: netpod, namespace: %s}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: app, image: %s, imagePullPolicy: Never, command: [/pause]}
`, ns, PauseImage))
	var np *corev1.Pod
	testutil.Poll(t, 2*time.Minute, 200*time.Millisecond, "the pod on the pods' network running", func() (bool, string) {
		np, err = cs.CoreV1().Pods(ns).Get(ctx, "netpod", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return np.Status.Phase == corev1.PodRunning && np.Status.PodIP != "", fmt.Sprintf("%+v", np.Status)
	}, p.PlaneLogs)
	node := p.NodeIP()
	if !strings.HasPrefix(np.Status.PodIP, node[:strings.LastIndex(node, ".")+1]) || np.Status.PodIP == node {
		t.Errorf("the pod's address %s is not on the node's network (node %s)", np.Status.PodIP, node)
	}
	token := false
	for _, v := range np.Spec.Volumes {
		token = token || (v.Projected != nil && strings.HasPrefix(v.Name, "kube-api-access-"))
	}
	if !token {
		t.Errorf("no service account token volume on the pod: %+v", np.Spec.Volumes)
	}
	testutil.Poll(t, 2*time.Minute, 500*time.Millisecond, "node metrics from the kubelet", func() (bool, string) {
		raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/apis/metrics.k8s.io/v1beta1/nodes/" + RealNodeName).DoRaw(ctx)
		return err == nil && strings.Contains(string(raw), `"cpu"`), fmt.Sprintf("%v %s", err, raw)
	}, nil)

	if err := cs.CoreV1().Pods(ns).Delete(ctx, "sleeper", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Poll(t, 2*time.Minute, 200*time.Millisecond, "the deleted pod and its cgroup gone", func() (bool, string) {
		_, err := cs.CoreV1().Pods(ns).Get(ctx, "sleeper", metav1.GetOptions{})
		_, statErr := os.Stat(limitFile)
		return apierrors.IsNotFound(err) && os.IsNotExist(statErr), fmt.Sprintf("%v, %v", err, statErr)
	}, nil)

	stopped = true
	t0 := time.Now()
	if err := p.stop(); err != nil {
		t.Errorf("stopping the plane: %v", err)
	}
	t.Logf("the plane stopped in %s", time.Since(t0).Round(time.Millisecond))
	assertNodeGone(t, root, dir, sock, bridge)
	withHostLock(t, func() {
		if _, err := os.Stat(sysctlsPath); !os.IsNotExist(err) {
			t.Errorf("the kernel tunables the kubelet set were not put back (%s: %v)", sysctlsPath, err)
		}
		if got := readSysctls(t); got != tunables {
			t.Errorf("kernel tunables after the node: %s, before: %s", got, tunables)
		}
	})
}

// readSysctls is the kernel tunables the kubelet sets, as they are.
func readSysctls(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, k := range kubeletSysctls {
		v, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err == nil {
			fmt.Fprintf(&b, "%s=%s ", k, strings.TrimSpace(string(v)))
		}
	}
	return b.String()
}

// assertNodeGone fails the test if anything of a stopped real node is
// left: a cgroup under its root, a mount under its directory, its bridge,
// a shim.
func assertNodeGone(t *testing.T, root, dir, sock, bridge string) {
	t.Helper()
	hs, err := cgroupHierarchies()
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		if _, err := os.Stat(filepath.Join(h, root)); !os.IsNotExist(err) {
			t.Errorf("the cgroup %s is left (%v)", filepath.Join(h, root), err)
		}
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mi), dir) {
		t.Errorf("mounts under %s are left", dir)
	}
	if _, err := net.InterfaceByName(bridge); err == nil {
		t.Errorf("the bridge %s is left", bridge)
	}
	if left, _ := filepath.Glob(filepath.Join("/var/lib/cni/results", cniNetwork(bridge)+"-*")); len(left) > 0 {
		t.Errorf("CNI's cached results of the node's network are left: %v", left)
	}
	links, _ := filepath.Glob("/var/log/containers/*.log")
	for _, l := range links {
		if target, err := os.Readlink(l); err == nil && strings.HasPrefix(target, dir+"/") {
			t.Errorf("the kubelet's link %s to %s is left", l, target)
		}
	}
	cmds, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, c := range cmds {
		if b, err := os.ReadFile(c); err == nil && strings.Contains(string(b), sock) {
			t.Errorf("a process naming %s is left: %q", sock, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
}

// withHostLock runs fn holding the machine's real-node lock: no node of
// another test changes the kernel's tunables meanwhile.
func withHostLock(t *testing.T, fn func()) {
	t.Helper()
	f, err := os.OpenFile(hostLockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	testutil.Poll(t, 10*time.Minute, 100*time.Millisecond, "the real-node lock", func() (bool, string) {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		return err == nil, fmt.Sprint(err)
	}, nil)
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	fn()
}
