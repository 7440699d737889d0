package main

import (
	"context"
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
	if code != 1 || !strings.Contains(errOut, "lease "+stateNS+"/"+holder.LockName()) || !strings.Contains(errOut, "setpoint watch --in-cluster") {
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
