package main

import (
	"bytes"
	"context"
	"os/exec"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/internal/kubetest"
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
	holders := func() map[string][]int {
		out := map[string][]int{}
		b := kstate.New(env.Clientset(t), stateNS, "prod")
		for i := range kstate.DefaultShards {
			l, err := env.Clientset(t).CoordinationV1().Leases(stateNS).Get(context.Background(), b.ShardLease(i), metav1.GetOptions{})
			if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" || l.Spec.RenewTime == nil ||
				time.Since(l.Spec.RenewTime.Time) > time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second {
				continue
			}
			out[*l.Spec.HolderIdentity] = append(out[*l.Spec.HolderIdentity], i)
		}
		return out
	}
	// split: every shard held, by n holders, each at most its share.
	split := func(n int) bool {
		h := holders()
		total := 0
		for _, s := range h {
			if len(s) > (kstate.DefaultShards+n-1)/n {
				return false
			}
			total += len(s)
		}
		return len(h) == n && total == kstate.DefaultShards
	}
	wait := func(what string, cond func() bool) time.Duration {
		start := time.Now()
		for !cond() {
			if time.Since(start) > 60*time.Second {
				var logs strings.Builder
				for i, r := range rs {
					fmt.Fprintf(&logs, "--- replica %d\n%s\n", i, r.log.String())
				}
				t.Fatalf("%s: not within 60s; holders %v\n%s", what, holders(), logs.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
		return time.Since(start)
	}
	wait("three replicas split 16 shards", func() bool { return split(3) })
	if err := rs[0].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	took := wait("two replicas hold all 16", func() bool { return split(2) })
	t.Logf("reshard after SIGKILL of one of three: %s (lease 3s)", took)
}
