package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os/exec"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	promsource "github.com/setpoint-dev/setpoint/engine/signals/prometheus"
	"github.com/setpoint-dev/setpoint/internal/promtest"

	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/internal/kubetest"
	"github.com/setpoint-dev/setpoint/internal/testutil"
	"github.com/setpoint-dev/setpoint/providers/kubernetes/kstate"
)

// A one-shot apply against a cluster whose state an in-cluster setpoint
// holds is refused, naming the holder, as Terraform's remote state lock
// does; once released, the same command runs against the cluster.
func TestApplyAgainstClusterTakesTheClusterLock(t *testing.T) {
	env := kubetest.Shared(t)
	app := env.Namespace(t)
	stateNS := env.Namespace(t)
	env.Apply(t, fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: %[1]s}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: app, image: registry.example/web:1, resources: {requests: {memory: 256Mi}, limits: {memory: 512Mi}}}]}
`, app))
	dir := t.TempDir()
	files := map[string]string{
		"env.yaml": "apiVersion: setpoint.dev/v1alpha1\nkind: Environment\nmetadata: {name: prod}\nspec:\n  providers: [{name: kubernetes}]\n  state: {backend: kubernetes}\n",
		"web.yaml": fmt.Sprintf("apiVersion: setpoint.dev/v1alpha1\nkind: NFR\nmetadata: {name: web, namespace: %s}\nspec:\n  target: {kind: Deployment, name: web}\n  throughput: {minRPS: 100}\n", app),
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	holder := kstate.New(env.Clientset(t), stateNS, "prod")
	unlock, err := holder.Lock(ctx, "setpoint watch --in-cluster", false)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"apply", "--auto-approve", "--kubeconfig", env.Kubeconfig, "--state-namespace", stateNS, dir}
	_, errOut, code := runCLI(t, args...)
	if code != 1 || !strings.Contains(errOut, "lease "+stateNS+"/"+holder.ShardLease(0)) || !strings.Contains(errOut, "setpoint watch --in-cluster") {
		t.Fatalf("apply while an in-cluster holder has the lock: exit %d\n%s", code, errOut)
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runCLI(t, args...)
	// No signals yet (the Prometheus source comes later): the decision
	// says what is missing, read from the real Deployment's containers.
	if code != 0 || !strings.Contains(out, "NFR/"+app+"/web") || !strings.Contains(out, "container app: no memory recommendation") || !strings.Contains(out, "Apply complete") {
		t.Fatalf("apply after the release: exit %d\n%s\n%s", code, out, errOut)
	}
}

// Three replicas of `setpoint watch` with the state in the cluster split
// its 16 shards; one is killed (SIGKILL: nothing released) and the two
// others hold all 16 once its Leases expire.
func TestThreeReplicasShardAndOneDies(t *testing.T) {
	env := kubetest.Shared(t)
	app := env.Namespace(t)
	stateNS := env.Namespace(t)
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("env.yaml", "apiVersion: setpoint.dev/v1alpha1\nkind: Environment\nmetadata: {name: prod}\nspec:\n  providers: [{name: kubernetes}]\n  state: {backend: kubernetes}\n  tick: 1s\n")
	var specs strings.Builder
	for i := range 300 {
		fmt.Fprintf(&specs, "---\napiVersion: setpoint.dev/v1alpha1\nkind: NFR\nmetadata: {name: w%03d, namespace: %s}\nspec:\n  target: {kind: Deployment, name: w%03d}\n  throughput: {minRPS: 100}\n", i, app, i)
	}
	write("nfrs.yaml", specs.String())

	type replica struct {
		cmd *exec.Cmd
		log *bytes.Buffer
	}
	var rs []replica
	for range 3 {
		var log bytes.Buffer
		cmd := exec.Command(binary, "watch", "--kubeconfig", env.Kubeconfig, "--state-namespace", stateNS, "--lease-duration", "3s", dir)
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		rs = append(rs, replica{cmd, &log})
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	}
	dump := func() string {
		var logs strings.Builder
		for i, r := range rs {
			fmt.Fprintf(&logs, "--- replica %d\n%s\n", i, r.log.String())
		}
		return logs.String()
	}
	waitSplit(t, env.Clientset(t), stateNS, "prod", 3, dump)
	if err := rs[0].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	took := waitSplit(t, env.Clientset(t), stateNS, "prod", 2, dump)
	t.Logf("reshard after SIGKILL of one of three: %s (lease 3s)", took)
}

// shardHolders maps each holder of a live shard Lease of Environment env's
// state in ns to the shards it holds.
func shardHolders(t *testing.T, cs k8s.Interface, ns, env string) map[string][]int {
	t.Helper()
	out := map[string][]int{}
	b := kstate.New(cs, ns, env)
	for i := range kstate.DefaultShards {
		l, err := cs.CoordinationV1().Leases(ns).Get(context.Background(), b.ShardLease(i), metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" || l.Spec.RenewTime == nil ||
			time.Since(l.Spec.RenewTime.Time) > time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second {
			continue
		}
		out[*l.Spec.HolderIdentity] = append(out[*l.Spec.HolderIdentity], i)
	}
	return out
}

// waitSplit waits until n replicas hold every shard of env's state in ns,
// none more than its share, and says how long that took; dump says what
// the replicas logged, for a failure.
func waitSplit(t *testing.T, cs k8s.Interface, ns, env string, n int, dump func() string) time.Duration {
	t.Helper()
	split := func() bool {
		h := shardHolders(t, cs, ns, env)
		total := 0
		for _, s := range h {
			if len(s) > (kstate.DefaultShards+n-1)/n {
				return false
			}
			total += len(s)
		}
		return len(h) == n && total == kstate.DefaultShards
	}
	return testutil.Poll(t, 60*time.Second, 50*time.Millisecond, fmt.Sprintf("%d replicas splitting the %d shards", n, kstate.DefaultShards),
		func() (bool, string) { return split(), "" },
		func() string { return fmt.Sprintf("holders %v\n%s", shardHolders(t, cs, ns, env), dump()) })
}

// clusterSpecs is the shipped specs/ against a real API server: the
// kubernetes provider first (the NFRs' targets), the sim world beside it
// for its signals, the state in the cluster; and the objects specs/
// targets, made as kubectl makes them.
func clusterSpecs(t *testing.T, env *kubetest.Env, edits ...[3]string) string {
	t.Helper()
	dir := copySpecs(t, append([][3]string{{stableUp[0], stableUp[2], stableUp[1]},
		{"setpoint.yaml", "  providers:\n    - name: sim\n", "  providers:\n    - name: kubernetes\n    - name: sim\n"},
		{"setpoint.yaml", "state: {backend: file, path: .setpoint/state.json}", "state: {backend: kubernetes}"},
		// The fleet's clusters stay on the sim world.
		{"streaming.fleet.yaml", "  cloud: aws\n", "  target: {provider: sim}\n  cloud: aws\n"}}, edits...)...)
	ctx := context.Background()
	if _, err := env.Clientset(t).CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn := env.Dynamic(t)
	for _, o := range []struct {
		gvr schema.GroupVersionResource
		doc string
	}{
		{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"checkout","namespace":"shop"},"spec":{"replicas":2,"selector":{"matchLabels":{"app":"checkout"}},"template":{"metadata":{"labels":{"app":"checkout"}},"spec":{"containers":[{"name":"function","image":"x","resources":{"requests":{"memory":"256Mi"},"limits":{"memory":"512Mi"}}}]}}}}`},
		{schema.GroupVersionResource{Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"}, `{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","metadata":{"name":"checkout","namespace":"shop"},"spec":{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"checkout"},"minReplicas":2,"maxReplicas":50,"metrics":[{"type":"Resource","resource":{"name":"cpu","target":{"type":"Utilization","averageUtilization":70}}}]}}`},
		{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"inventory","namespace":"shop"},"spec":{"replicas":1,"selector":{"matchLabels":{"app":"inventory"}},"template":{"metadata":{"labels":{"app":"inventory"}},"spec":{"containers":[{"name":"app","image":"x","resources":{"requests":{"memory":"512Mi"},"limits":{"memory":"1Gi"}}},{"name":"sidecar","image":"y","resources":{"requests":{"memory":"64Mi"},"limits":{"memory":"128Mi"}}}]}}}}`},
		{schema.GroupVersionResource{Group: "serving.knative.dev", Version: "v1", Resource: "services"}, `{"apiVersion":"serving.knative.dev/v1","kind":"Service","metadata":{"name":"fib","namespace":"default"},"spec":{"template":{"metadata":{"annotations":{"autoscaling.knative.dev/min-scale":"0"}},"spec":{"containers":[{"name":"user-container","image":"z","resources":{"requests":{"memory":"128Mi"},"limits":{"memory":"256Mi"}}}]}}}}`},
	} {
		var u unstructured.Unstructured
		if err := u.UnmarshalJSON([]byte(o.doc)); err != nil {
			t.Fatal(err)
		}
		if _, err := dyn.Resource(o.gvr).Namespace(u.GetNamespace()).Create(ctx, &u, metav1.CreateOptions{FieldManager: "kubectl-client-side-apply"}); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A setpoint killed between the provider's apply and the state's save:
// the next run neither repeats the change (the object's resourceVersion
// does not move) nor loses it (the state then holds the user's value from
// before and the value applied, as the object does).
func TestKilledMidApplySuccessorAgrees(t *testing.T) {
	env := kubetest.Shared(t)
	stateNS := env.Namespace(t)
	// checkout's increase in one step: the successor then has nothing
	// left to do, so any write of it would be a repeat.
	dir := clusterSpecs(t, env, [3]string{"checkout.nfr.yaml", "maxReplicaStepUp: 30%", "maxReplicaStepUp: 100%"})
	args := []string{"apply", "--auto-approve", "--kubeconfig", env.Kubeconfig, "--state-namespace", stateNS, dir}
	cmd := exec.Command(binary, args...)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), crashAfterApplyEnv+"=1")
	out, _ := cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != crashExitCode {
		t.Fatalf("the crashing apply: exit %d\n%s", cmd.ProcessState.ExitCode(), out)
	}
	ctx := context.Background()
	hpa, err := env.Clientset(t).AutoscalingV2().HorizontalPodAutoscalers("shop").Get(ctx, "checkout", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	applied, rv := *hpa.Spec.MinReplicas, hpa.ResourceVersion
	if applied == 2 {
		t.Fatalf("the crashing apply changed nothing:\n%s", out)
	}
	attr := addrs.Attr{Object: addrs.Object{Provider: "kubernetes", Kind: "HorizontalPodAutoscaler", Namespace: "shop", Name: "checkout"}, Path: addrs.MustPath("spec.minReplicas")}
	b := kstate.New(env.Clientset(t), stateNS, "demo")
	st, err := b.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := st.Lookup(attr); !ok || e.User == nil || e.User.Int() != 2 || e.Applied != nil {
		t.Fatalf("state after the crash: %+v (want the user's 2, no apply)", e)
	}
	// The successor: the dead one's Leases hold until they expire.
	so, se, code := runCLI(t, append([]string{"apply", "--lock-timeout", "40s"}, args[1:]...)...)
	if code != 0 {
		t.Fatalf("the successor: exit %d\n%s\n%s", code, so, se)
	}
	hpa, err = env.Clientset(t).AutoscalingV2().HorizontalPodAutoscalers("shop").Get(ctx, "checkout", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *hpa.Spec.MinReplicas != applied || hpa.ResourceVersion != rv {
		t.Fatalf("the successor wrote again: minReplicas %d (was %d), resourceVersion %s (was %s)\n%s", *hpa.Spec.MinReplicas, applied, hpa.ResourceVersion, rv, so)
	}
	st, err = b.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := st.Lookup(attr); !ok || e.User == nil || e.User.Int() != 2 || e.Applied == nil || e.Applied.Value.Int() != int64(applied) {
		t.Fatalf("state after the successor: %+v (want user 2, applied %d)", e, applied)
	}
}

// clusterWatch runs `setpoint watch` on dir against env's API server, its
// state in stateNS (Leases of 3 s), logging at debug into log, until the
// test ends; waitLog waits (a minute at most) for a condition on the log.
func clusterWatch(t *testing.T, env *kubetest.Env, stateNS, dir string) (log *testutil.Buffer, waitLog func(what string, cond func() bool)) {
	t.Helper()
	log = &testutil.Buffer{}
	cmd := exec.Command(binary, "watch", "--log-level", "debug", "--kubeconfig", env.Kubeconfig, "--state-namespace", stateNS, "--lease-duration", "3s", dir)
	cmd.Dir = "../.."
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return log, func(what string, cond func() bool) {
		t.Helper()
		testutil.Poll(t, 60*time.Second, 50*time.Millisecond, what, func() (bool, string) { return cond(), "" }, log.String)
	}
}

// count is how many lines of the log hold every one of parts.
func count(log string, parts ...string) int {
	n := 0
	for _, line := range strings.Split(log, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			n++
		}
	}
	return n
}

// The API server goes away under a running watch: the loop holds and
// says so once, resumes when the server returns, and no apply is lost or
// doubled (an edit made after the return is undone exactly once).
func TestWatchHoldsWhileTheAPIServerIsAway(t *testing.T) {
	env := kubetest.Start(t)
	stateNS := env.Namespace(t)
	dir := clusterSpecs(t, env, [3]string{"checkout.nfr.yaml", "maxReplicaStepUp: 30%", "maxReplicaStepUp: 100%"},
		[3]string{"setpoint.yaml", "tick: 5s", "tick: 1s"})
	log, waitLog := clusterWatch(t, env, stateNS, dir)
	applied := func() int {
		return count(log.String(), "msg=applied", "HorizontalPodAutoscaler/shop/checkout", "attribute=spec.minReplicas")
	}
	waitLog("the first apply", func() bool { return applied() == 1 })
	if err := env.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	away := "the API server does not answer"
	waitLog("the loop saying it holds", func() bool { return count(log.String(), away) == 1 })
	// It keeps trying every second (quietly: debug); the Leases (3 s)
	// lapse meanwhile.
	waitLog("five more tries", func() bool { return count(log.String(), "still no answer") >= 5 })
	if n := count(log.String(), away); n != 1 {
		t.Fatalf("said %d times that the server is away, want once\n%s", n, log.String())
	}
	// Reconciles that began before the holder noticed may fail; none
	// after (how many before depends on the machine's timing, not on
	// setpoint: not asserted).
	failed := count(log.String(), "msg=reconcile ", "level=ERROR")
	waitLog("five tries more", func() bool { return count(log.String(), "still no answer") >= 10 })
	if n := count(log.String(), "msg=reconcile ", "level=ERROR"); n != failed {
		t.Fatalf("failed reconciles: %d, then %d (want none once it holds)\n%s", failed, n, log.String())
	}
	if err := env.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	waitLog("the loop saying the server is back", func() bool { return count(log.String(), "the API server answers again") == 1 })
	// The reconcile of the shards taken back.
	waitLog("a reconcile after the return", func() bool { return count(log.String(), "msg=reconciled", "shards changed") >= 1 })
	if applied() != 1 {
		t.Fatalf("applied again across the outage\n%s", log.String())
	}
	// Someone sets minReplicas back; the loop, running again, undoes it
	// once.
	patch := []byte(`{"spec":{"minReplicas":2}}`)
	if _, err := env.Clientset(t).AutoscalingV2().HorizontalPodAutoscalers("shop").Patch(context.Background(), "checkout", types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	waitLog("the edit undone", func() bool { return applied() == 2 })
	hpa, err := env.Clientset(t).AutoscalingV2().HorizontalPodAutoscalers("shop").Get(context.Background(), "checkout", metav1.GetOptions{})
	if err != nil || *hpa.Spec.MinReplicas == 2 {
		t.Fatalf("minReplicas after the undo: %v %v", hpa.Spec.MinReplicas, err)
	}
	// One more whole reconcile of checkout (an edit of its file; ticks
	// look the same in the log and are collapsed there): nothing more to
	// apply.
	f, err := os.OpenFile(filepath.Join(dir, "checkout.nfr.yaml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("# touched\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	waitLog("a reconcile after the edit", func() bool { return count(log.String(), "msg=reconciled", "edit of checkout.nfr.yaml") >= 1 })
	if n := applied(); n != 2 {
		t.Fatalf("%d applies of minReplicas, want 2\n%s", n, log.String())
	}
}

// A workload in a real cluster, its signals from a real Prometheus server
// (scraping an endpoint that serves what cAdvisor and kube-state-metrics
// would): the memory decision comes from it, with the numbers.
func TestPlanWithPrometheusSignals(t *testing.T) {
	env := kubetest.Shared(t)
	ns := env.Namespace(t)
	prom := checkoutWithSignals(t, env, ns)
	dir := t.TempDir()
	files := map[string]string{
		"env.yaml":      fmt.Sprintf("apiVersion: setpoint.dev/v1alpha1\nkind: Environment\nmetadata: {name: prod}\nspec:\n  providers: [{name: kubernetes}]\n  signals: {default: prometheus, prometheus: {url: %q}}\n", prom.URL),
		"checkout.yaml": fmt.Sprintf("apiVersion: setpoint.dev/v1alpha1\nkind: NFR\nmetadata: {name: checkout, namespace: %s}\nspec:\n  target: {kind: Deployment, name: checkout}\n  throughput: {minRPS: 100}\n  memory: {containers: [function]}\n", ns),
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code := runCLI(t, "plan", "--kubeconfig", env.Kubeconfig, dir)
	// 115343360 bytes is 110Mi: × 1.2 = 132Mi, rounded up to 144Mi.
	if code != 0 || !strings.Contains(out, "containers[name=function].resources.requests.memory") || !strings.Contains(out, "roundUp16Mi(110Mi × 1.2) = 144Mi") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	// Throughput signals it does not serve: said, not guessed.
	if !strings.Contains(out, "requests per second missing") {
		t.Fatalf("missing rps not said:\n%s", out)
	}
}

// checkoutWithSignals makes a checkout Deployment in ns and a real
// Prometheus server scraping an endpoint that serves what cAdvisor and
// kube-state-metrics would for it (a 110Mi working set), and returns the
// server once it has scraped.
func checkoutWithSignals(t *testing.T, env *kubetest.Env, ns string) *promtest.Server {
	t.Helper()
	env.Apply(t, fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: checkout, namespace: %s}
spec:
  replicas: 2
  selector: {matchLabels: {app: checkout}}
  template:
    metadata: {labels: {app: checkout}}
    spec: {containers: [{name: function, image: x, resources: {requests: {memory: 256Mi}, limits: {memory: 512Mi}}}]}
`, ns))
	exp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "container_memory_working_set_bytes{namespace=%q,pod=\"checkout-1\",container=\"function\"} 115343360\n"+
			"kube_pod_labels{namespace=%q,pod=\"checkout-1\",label_app=\"checkout\"} 1\n", ns, ns)
	}))
	t.Cleanup(exp.Close)
	prom := promtest.Start(t, strings.TrimPrefix(exp.URL, "http://"))
	src, err := promsource.New(promsource.Config{URL: prom.URL})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Poll(t, 30*time.Second, 100*time.Millisecond, "prometheus scraping the endpoint", func() (bool, string) {
		r, err := src.Query(context.Background(), "kube_pod_labels", time.Now())
		return err == nil && len(r.Samples) == 1, fmt.Sprintf("%v %+v", err, r)
	}, nil)
	return prom
}
