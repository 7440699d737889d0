// Command playground starts a control plane to try setpoint against, on
// this machine, with nothing but what make testenv builds: etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, kwok (a fake
// node whose pods become Running and Ready, and no container runs) and
// metrics-server, plus a real Prometheus scraping an exporter that makes
// up the example workloads' traffic. It writes a kubeconfig and a spec
// directory for them, prints how to run setpoint against them, and stops
// everything on Ctrl-C.
//
//	go run ./hack/playground -dir playground
//
// kwok runs no containers, so setpoint runs beside the plane (from this
// checkout), not in it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/setpoint-dev/setpoint/internal/installtest"
	"github.com/setpoint-dev/setpoint/internal/kubetest"
	"github.com/setpoint-dev/setpoint/internal/promtest"
)

func main() {
	dir := flag.String("dir", "playground", "where to write the kubeconfig and the spec directory")
	realNode := flag.Bool("real-node", false, "run a real node (containerd, runc, a kubelet) instead of kwok's: pods run, and setpoint can be installed in the cluster from deploy/")
	flag.Parse()
	if err := run(*dir, *realNode); err != nil {
		slog.Error("playground", "err", err)
		os.Exit(1)
	}
}

// workloads are the example's Deployments (and checkout's HPA), in
// namespace shop.
const workloads = `apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: checkout, namespace: shop}
spec:
  replicas: 2
  selector: {matchLabels: {app: checkout}}
  template:
    metadata: {labels: {app: checkout}}
    spec: {containers: [{name: app, image: registry.example/checkout:1, resources: {requests: {cpu: 500m, memory: 256Mi}, limits: {memory: 512Mi}}}]}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: checkout, namespace: shop}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: checkout}
  minReplicas: 2
  maxReplicas: 20
  metrics: [{type: Resource, resource: {name: cpu, target: {type: Utilization, averageUtilization: 70}}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: inventory, namespace: shop}
spec:
  replicas: 1
  selector: {matchLabels: {app: inventory}}
  template:
    metadata: {labels: {app: inventory}}
    spec: {containers: [{name: app, image: registry.example/inventory:1, resources: {requests: {cpu: 250m, memory: 512Mi}, limits: {memory: 1Gi}}}]}
`

// loads are the traffic the exporter makes up for each app.
var loads = map[string]kubetest.Load{
	"checkout":  {RPS: 600, Latency: 40 * time.Millisecond, CPUPerRequest: 0.001, WorkingSet: 100 << 20},
	"inventory": {RPS: 150, Latency: 60 * time.Millisecond, CPUPerRequest: 0.001, WorkingSet: 300 << 20},
}

func run(dir string, realNode bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	t0 := time.Now()
	node := "kwok"
	if realNode {
		node = "a real node: containerd, runc, kubelet"
	}
	slog.Info("starting the control plane (etcd, kube-apiserver, controller-manager, scheduler, metrics-server) and " + node)
	p, err := kubetest.NewPlane(kubetest.PlaneOptions{HPASync: 15 * time.Second, HPADownscale: 5 * time.Minute, RealNode: realNode})
	if err != nil {
		return fmt.Errorf("starting the control plane: %w (built by make testenv)", err)
	}
	defer func() {
		if err := p.Close(); err != nil {
			slog.Error("stopping the control plane", "err", err)
		}
	}()
	wl := workloads
	if realNode {
		// No image can be pulled: the example pods run the node's pause
		// program (the exporter makes their traffic up either way).
		for _, img := range []string{"registry.example/checkout:1", "registry.example/inventory:1"} {
			wl = strings.ReplaceAll(wl, "image: "+img, "image: "+kubetest.PauseImage+", imagePullPolicy: Never, command: [/pause]")
		}
	}
	if err := p.ApplyYAML(ctx, wl, "kubectl"); err != nil {
		return fmt.Errorf("creating the example workloads: %w", err)
	}
	cs, err := kubernetes.NewForConfig(p.Config())
	if err != nil {
		return err
	}
	exp := kubetest.NewExporter(cs)
	defer exp.Close()
	for app, l := range loads {
		exp.SetLoad("shop", app, l)
	}
	promDir := filepath.Join(abs, "prometheus")
	if err := os.RemoveAll(promDir); err != nil {
		return err
	}
	if err := os.MkdirAll(promDir, 0o755); err != nil {
		return err
	}
	prom, err := promtest.Run(promDir, strings.TrimPrefix(exp.URL, "http://"))
	if err != nil {
		return err
	}
	defer prom.Close()
	kubeconfig := filepath.Join(abs, "kubeconfig")
	b, err := os.ReadFile(p.Kubeconfig)
	if err != nil {
		return err
	}
	if err := os.WriteFile(kubeconfig, b, 0o600); err != nil {
		return err
	}
	specs := filepath.Join(abs, "specs")
	written, err := writeSpecs(specs, prom.URL)
	if err != nil {
		return err
	}
	inCluster := ""
	if realNode {
		if inCluster, err = installable(ctx, p, abs); err != nil {
			return err
		}
	}
	slog.Info("ready", "took", time.Since(t0).Round(100*time.Millisecond))
	nodeText := "one fake node (kwok: pods become Running and Ready, no container runs)"
	if realNode {
		nodeText = "one real node (containerd, runc, a kubelet)"
		fmt.Print(inCluster)
	}
	fmt.Printf(`
The playground is up: a control plane on loopback with %[5]s,
metrics-server, and a real Prometheus at %[1]s scraping made-up traffic for
shop/checkout (600 req/s, with an HPA) and shop/inventory (150 req/s).

  export KUBECONFIG=%s
  kubectl get deploy,hpa,pods -n shop        # if you have kubectl

setpoint runs beside it, from this checkout (the specs: %s; %s):

  make build
  ./bin/setpoint validate %[3]s
  ./bin/setpoint plan --kubeconfig %[2]s %[3]s
  ./bin/setpoint watch --kubeconfig %[2]s %[3]s

The NFRs read rates over [1m]: their numbers settle within a minute of the
start. Change the traffic by editing loads in hack/playground/main.go.
Ctrl-C stops everything.
`, prom.URL, kubeconfig, specs, written, nodeText)
	<-ctx.Done()
	slog.Info("stopping")
	return nil
}

// examples are the spec files written once (a user's edits are kept);
// setpoint.yaml is written every time (it names this run's Prometheus).
// installable builds setpoint's image, imports it into the real node's
// containerd and writes an overlay of deploy/ for this cluster (the image,
// and the API server's address: there is no kube-proxy), as docs/install.md
// shows; it returns what to tell the user.
func installable(ctx context.Context, p *kubetest.Plane, dir string) (string, error) {
	repo, err := installtest.RepoRoot()
	if err != nil {
		return "", err
	}
	slog.Info("building setpoint's image and importing it into the node")
	tar, err := installtest.BuildImage(ctx, repo, dir, "playground")
	if err != nil {
		return "", err
	}
	if err := p.ImportImage(ctx, tar); err != nil {
		return "", err
	}
	overlay := filepath.Join(dir, "overlay")
	if err := os.MkdirAll(overlay, 0o755); err != nil {
		return "", err
	}
	host, port := p.InClusterHost()
	if err := (installtest.Overlay{Tag: "playground", APIHost: host, APIPort: port, Components: []string{"no-node-agents"}}).Write(overlay, repo); err != nil {
		return "", err
	}
	return fmt.Sprintf(`
The node is real: containerd (with NRI), runc and a kubelet; pods run. setpoint's
image is imported as %s:playground, and %s is an overlay of deploy/ for
this cluster (the image, the API server's address, no node agents). Install
setpoint in the cluster as a user would:

  kubectl apply -k %[2]s
  kubectl -n setpoint-system get pods,leases
  kubectl -n setpoint-system logs deploy/setpoint
`, installtest.ImageName, overlay), nil
}

var examples = map[string]string{
	"checkout.nfr.yaml": `# checkout must carry 1200 req/s: at its measured CPU per request and
# 500m a pod, the NFR raises its HPA's minReplicas (the HPA keeps sizing
# it above that on CPU).
apiVersion: setpoint.dev/v1alpha1
kind: NFR
metadata: {name: checkout, namespace: shop}
spec:
  target: {kind: Deployment, name: checkout}
  policy: reference
  throughput: {minRPS: 1200}
  cpuPerPod: 500m
  latency: {p99: 250ms}
  enforcement: {replicas: enforce, memory: observe}
`,
	"inventory.nfr.yaml": `# inventory's memory follows its working set (300Mi): request and limit
# come down from 512Mi/1Gi, in bounded steps, through a rolling update.
apiVersion: setpoint.dev/v1alpha1
kind: NFR
metadata: {name: inventory, namespace: shop}
spec:
  target: {kind: Deployment, name: inventory}
  memory: {headroom: 1.2, limitFactor: 1.5, window: 5m}
  enforcement: {replicas: off, memory: enforce}
`,
}

// writeSpecs writes the spec directory: the Environment (the kubernetes
// provider, this Prometheus, the state in a file beside the specs, which
// a new plane starts without) and the examples not there yet. It says
// what it did.
func writeSpecs(dir, promURL string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// The state of the last playground's objects would not match this
	// one's.
	if err := os.RemoveAll(filepath.Join(dir, ".setpoint")); err != nil {
		return "", err
	}
	env := fmt.Sprintf(`apiVersion: setpoint.dev/v1alpha1
kind: Environment
metadata: {name: playground}
spec:
  providers: [{name: kubernetes}]
  signals: {default: prometheus, prometheus: {url: %q}}
  state: {backend: file, path: .setpoint/state.json}
`, promURL)
	if err := os.WriteFile(filepath.Join(dir, "setpoint.yaml"), []byte(env), 0o644); err != nil {
		return "", err
	}
	var kept []string
	for _, name := range slices.Sorted(maps.Keys(examples)) {
		body := examples[name]
		path := filepath.Join(dir, name)
		if _, err := os.Stat(path); err == nil {
			kept = append(kept, name)
			continue
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			return "", err
		}
	}
	if len(kept) > 0 {
		return "kept as you left them: " + strings.Join(kept, ", "), nil
	}
	return "edit them and plan again", nil
}
