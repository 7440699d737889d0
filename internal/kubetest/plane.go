package kubetest

import (
	"context"
	"crypto/tls"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net"
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
)

// Versions of the rest of the full control plane, built by make testenv
// (hack/testenv) and cached by version.
const (
	KwokVersion          = "v0.8.0"
	EtcdVersion          = "v3.6.5"
	MetricsServerVersion = "v0.8.0"
)

// The kwok stages the plane runs: a node Ready at once, pods Running and
// Ready (after a delay a pod may ask for) with their containers' resources
// reported, in-place resizes applied, deleted pods gone; and the node's
// resource metrics endpoint, from the usage the exporter writes on pods.
//
//go:embed kwokstages/*.yaml
var kwokStages embed.FS

// FakeNode is the name of the plane's one node.
const FakeNode = "kwok-node-0"

// ReadyAfterAnnotation delays a pod's readiness by a duration ("3s"): a
// slow start, to stretch a rollout.
const ReadyAfterAnnotation = "setpoint.dev/ready-after"

// Plane is a full control plane on loopback: the Env's etcd and
// kube-apiserver (with its aggregation layer), kube-controller-manager
// (deployment, replicaset, HPA, node-lifecycle, garbage-collector,
// namespace and service-account controllers), kube-scheduler, kwok
// managing one fake node whose pods become Running and Ready, and
// metrics-server behind its APIService, reading the node's resource
// metrics from kwok, so the HPA scales on CPU. No container runs: kwok
// writes the statuses a kubelet would. With RealNode the node is real
// instead (node.go): containerd, runc and a kubelet, and pods run.
type Plane struct {
	*Env
	// PlaneStartupTime is how long the controllers, the scheduler, kwok
	// and the node's readiness took after the API server was ready.
	PlaneStartupTime time.Duration

	procs []*process
	node  *realNode // with RealNode
	net   *nodeNet  // with RealNode
	proxy net.Listener
}

// PlaneOptions tune the controllers for tests.
type PlaneOptions struct {
	// HPASync is the HPA controller's sync period (default 2s, upstream
	// 15s).
	HPASync time.Duration
	// HPADownscale is its scale-down stabilisation window (default 30s,
	// upstream 5m).
	HPADownscale time.Duration
	// RealNode runs the plane's node for real instead of kwok's: containerd
	// with NRI and Debian's runc, and a kubelet (RealNodeName). Pods run.
	RealNode bool
}

// StartPlane starts a private full control plane; it stops, every process
// it started, at the test's cleanup.
func StartPlane(t testing.TB, o PlaneOptions) *Plane {
	t.Helper()
	p, err := startPlane(o)
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	t.Cleanup(func() {
		if err := p.stop(); err != nil {
			t.Errorf("kubetest: stopping the control plane: %v", err)
		}
	})
	return p
}

// NewPlane starts a full control plane outside a test (hack/playground);
// Close stops every process it started.
func NewPlane(o PlaneOptions) (*Plane, error) { return startPlane(o) }

// Close stops the plane (a NewPlane's).
func (p *Plane) Close() error { return p.stop() }

// ApplyYAML creates or updates the objects of a YAML stream as Apply does
// in a test, as field manager manager.
func (e *Env) ApplyYAML(ctx context.Context, yaml, manager string) error {
	_, err := e.apply(ctx, []byte(yaml), manager)
	return err
}

func startPlane(o PlaneOptions) (_ *Plane, err error) {
	if o.HPASync <= 0 {
		o.HPASync = 2 * time.Second
	}
	if o.HPADownscale <= 0 {
		o.HPADownscale = 30 * time.Second
	}
	kver := kubeVersion()
	cmBin, err := cachedBinary("kube-controller-manager", kver)
	if err != nil {
		return nil, err
	}
	schedBin, err := cachedBinary("kube-scheduler", kver)
	if err != nil {
		return nil, err
	}
	kwokBin, err := cachedBinary("kwok", KwokVersion)
	if err != nil {
		return nil, err
	}
	msBin, err := cachedBinary("metrics-server", MetricsServerVersion)
	if err != nil {
		return nil, err
	}
	var nn *nodeNet
	if o.RealNode {
		// The node's address first: the API server's certificate names
		// it, as where its pods reach it.
		if nn, err = pickNodeNet(); err != nil {
			return nil, err
		}
	}
	env, err := start([]Option{func(eo *options) {
		eo.aggregation = true
		if nn != nil {
			eo.servingIPs, eo.serviceAccounts = append(eo.servingIPs, nn.ip), true
		}
	}})
	if err != nil {
		return nil, err
	}
	p := &Plane{Env: env, net: nn}
	if nn != nil {
		if err = nn.create(env.Dir); err == nil {
			err = p.proxyAPI()
		}
	}
	defer func() {
		if err != nil {
			_ = p.stop()
		}
	}()
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	ports, err := freePorts(4)
	if err != nil {
		return nil, err
	}
	cmPort, schedPort, kwokPort, msPort := ports[0], ports[1], ports[2], ports[3]
	kc := env.Kubeconfig
	auth := []string{"--kubeconfig", kc, "--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc,
		"--bind-address", "127.0.0.1", "--leader-elect=false"}
	insecure := &tls.Config{InsecureSkipVerify: true} // their own self-signed serving certificates
	healthy := func(code int, body []byte) bool { return code == 200 && strings.TrimSpace(string(body)) == "ok" }

	cm, err := startProcess("kube-controller-manager", cmBin, append(auth,
		"--secure-port", strconv.Itoa(cmPort),
		"--controllers", "deployment-controller,replicaset-controller,horizontal-pod-autoscaler-controller,node-lifecycle-controller,garbage-collector-controller,namespace-controller,serviceaccount-controller,root-ca-certificate-publisher-controller,daemonset-controller",
		"--root-ca-file", env.CAFile,
		"--service-account-private-key-file", filepath.Join(env.Dir, "pki", "sa.key"),
		"--horizontal-pod-autoscaler-sync-period", o.HPASync.String(),
		"--horizontal-pod-autoscaler-downscale-stabilization", o.HPADownscale.String(),
		"--concurrent-deployment-syncs", "10", "--concurrent-replicaset-syncs", "10",
	), env.Dir, filepath.Join(env.Dir, "kube-controller-manager.log"), nil)
	if err != nil {
		return nil, err
	}
	p.procs = append(p.procs, cm)
	sched, err := startProcess("kube-scheduler", schedBin, append(auth, "--secure-port", strconv.Itoa(schedPort)),
		env.Dir, filepath.Join(env.Dir, "kube-scheduler.log"), nil)
	if err != nil {
		return nil, err
	}
	p.procs = append(p.procs, sched)
	if err := waitReady(cm, fmt.Sprintf("https://127.0.0.1:%d/healthz", cmPort), insecure, nil, healthy); err != nil {
		return nil, err
	}
	if err := waitReady(sched, fmt.Sprintf("https://127.0.0.1:%d/healthz", schedPort), insecure, nil, healthy); err != nil {
		return nil, err
	}

	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	if o.RealNode {
		if err := p.startRealNode(ctx); err != nil {
			return nil, err
		}
	} else if err := p.startKwok(ctx, kwokBin, kwokPort); err != nil {
		return nil, err
	}

	// metrics-server, scraping the node's resource metrics (kwok's or the
	// kubelet's, at the node's address and kubelet port, its serving
	// certificate unchecked), served through the aggregation layer.
	ms, err := startProcess("metrics-server", msBin, append(auth[:6:6],
		"--bind-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(msPort),
		"--cert-dir", filepath.Join(env.Dir, "metrics-server"),
		"--kubelet-use-node-status-port",
		"--kubelet-insecure-tls",
		"--kubelet-preferred-address-types", "InternalIP",
		"--kubelet-request-timeout", "5s",
		// Above the request timeout: metrics-server refuses them equal.
		"--metric-resolution", "10s",
	), env.Dir, filepath.Join(env.Dir, "metrics-server.log"), nil)
	if err != nil {
		return nil, err
	}
	p.procs = append(p.procs, ms)
	live := func(code int, _ []byte) bool { return code == 200 }
	if err := waitReady(ms, fmt.Sprintf("https://127.0.0.1:%d/livez", msPort), insecure, nil, live); err != nil {
		return nil, err
	}
	if err := p.registerMetricsAPI(ctx, msPort); err != nil {
		return nil, errors.Join(err, ms.failure("metrics.k8s.io never became available"))
	}
	p.PlaneStartupTime = time.Since(t0)
	return p, nil
}

// startKwok starts kwok with its stages and creates the fake node it
// manages.
func (p *Plane) startKwok(ctx context.Context, kwokBin string, kwokPort int) error {
	env, kc := p.Env, p.Kubeconfig
	// kwok: its stages, then the node it manages.
	stageDir := filepath.Join(env.Dir, "kwok")
	if err := os.MkdirAll(stageDir, 0o755); err != nil {
		return err
	}
	var config []string
	err := fs.WalkDir(kwokStages, "kwokstages", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := kwokStages.ReadFile(path)
		if err != nil {
			return err
		}
		dst := filepath.Join(stageDir, filepath.Base(path))
		config = append(config, "--config", dst)
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		return err
	}
	kwok, err := startProcess("kwok", kwokBin, append(config,
		"--kubeconfig", kc,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector", "kwok.x-k8s.io/node=fake",
		"--node-ip", "127.0.0.1",
		"--node-port", strconv.Itoa(kwokPort),
		"--server-address", "127.0.0.1:"+strconv.Itoa(kwokPort),
		"--tls-cert-file", filepath.Join(env.Dir, "pki", "apiserver.crt"),
		"--tls-private-key-file", filepath.Join(env.Dir, "pki", "apiserver.key"),
		"--node-lease-duration-seconds", "40",
	), env.Dir, filepath.Join(env.Dir, "kwok.log"), nil)
	if err != nil {
		return err
	}
	p.procs = append(p.procs, kwok)
	if err := p.createNode(ctx); err != nil {
		return errors.Join(err, kwok.failure("the node did not become Ready"))
	}
	return nil

}

// createNode creates the fake node kwok manages and waits until it is
// Ready and untainted (the node-lifecycle controller lifts the not-ready
// taint admission puts on new nodes).
func (p *Plane) createNode(ctx context.Context) error {
	_, cs, _, err := p.clients()
	if err != nil {
		return err
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: FakeNode,
		Annotations: map[string]string{"kwok.x-k8s.io/node": "fake",
			// Where kwok serves the node's resource metrics (see
			// kwokstages/metrics-resource.yaml).
			"metrics.k8s.io/resource-metrics-path": "/metrics/nodes/" + FakeNode + "/metrics/resource"},
		Labels: map[string]string{"kubernetes.io/hostname": FakeNode, "type": "kwok"}}}
	if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating node %s: %w", FakeNode, err)
	}
	return p.waitNode(ctx, FakeNode)
}

// registerMetricsAPI serves metrics.k8s.io from metrics-server on port:
// an APIService backed by an ExternalName Service on loopback (the
// aggregator dials the name; metrics-server's certificate is self-signed,
// hence insecureSkipTLSVerify), and waits until the aggregator reports it
// Available.
func (p *Plane) registerMetricsAPI(ctx context.Context, port int) error {
	dyn, cs, _, err := p.clients()
	if err != nil {
		return err
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "metrics-server", Namespace: "kube-system"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "127.0.0.1",
			Ports: []corev1.ServicePort{{Name: "https", Port: int32(port)}}}}
	if _, err := cs.CoreV1().Services("kube-system").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the metrics-server Service: %w", err)
	}
	gvr := schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
	api := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": "v1beta1.metrics.k8s.io"},
		"spec": map[string]any{
			"group": "metrics.k8s.io", "version": "v1beta1",
			"service":               map[string]any{"namespace": "kube-system", "name": "metrics-server", "port": int64(port)},
			"insecureSkipTLSVerify": true, "groupPriorityMinimum": int64(100), "versionPriority": int64(100),
		},
	}}
	if _, err := dyn.Resource(gvr).Create(ctx, api, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the metrics.k8s.io APIService: %w", err)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last := ""
	for {
		u, err := dyn.Resource(gvr).Get(ctx, "v1beta1.metrics.k8s.io", metav1.GetOptions{})
		if err == nil {
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, c := range conds {
				m, _ := c.(map[string]any)
				if m["type"] == "Available" {
					if m["status"] == "True" {
						return nil
					}
					last = fmt.Sprintf("%v: %v", m["reason"], m["message"])
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("APIService v1beta1.metrics.k8s.io not Available (%s): %w", last, ctx.Err())
		case <-tick.C:
		}
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// PlaneLogs returns the last lines of every process of the plane.
func (p *Plane) PlaneLogs() string {
	var b strings.Builder
	b.WriteString(p.Logs())
	for _, pr := range p.procs {
		fmt.Fprintf(&b, "\n%s:\n%s", pr.name, tailFile(pr.log, tailLines))
	}
	return b.String()
}

// stop kills the plane's processes, then the Env. Idempotent.
func (p *Plane) stop() error {
	var errs []error
	if p.node != nil {
		// The controllers first, so nothing replaces the pods; then the
		// pods, deleted so that the kubelet tears each down (its network
		// included) while the API server is there to say so; then the
		// node, which removes whatever the kubelet did not.
		for i := len(p.procs) - 1; i >= 0; i-- {
			if n := p.procs[i].name; n == "kube-controller-manager" || n == "kube-scheduler" {
				errs = append(errs, p.procs[i].stop(0))
			}
		}
		p.drainNode()
		errs = append(errs, p.node.stop())
		p.node = nil
	}
	if p.proxy != nil {
		_ = p.proxy.Close()
		p.proxy = nil
	}
	if p.net != nil {
		errs = append(errs, p.net.remove())
		p.net = nil
	}
	for i := len(p.procs) - 1; i >= 0; i-- {
		errs = append(errs, p.procs[i].stop(0))
	}
	p.procs = nil
	errs = append(errs, p.Env.stop())
	return errors.Join(errs...)
}

func kubeVersion() string {
	if v := os.Getenv("SETPOINT_KUBE_VERSION"); v != "" {
		return v
	}
	return DefaultKubeVersion
}

// cachedBinary finds a binary make testenv built: NAME under the testenv
// cache at version ver.
func cachedBinary(name, ver string) (string, error) {
	root, err := testenvRoot()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", name, ver, err)
	}
	p := filepath.Join(root, name, ver, name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s %s not built (no %s): run make testenv", name, ver, p)
	}
	return p, nil
}

// testenvRoot is where make testenv caches what it builds.
func testenvRoot() (string, error) {
	if root := os.Getenv("SETPOINT_TESTENV"); root != "" {
		return root, nil
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("finding the cache: %w (set SETPOINT_TESTENV)", err)
		}
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "setpoint-testenv"), nil
}
