package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/setpoint-dev/setpoint/internal/kubetest"
)

// A pull request's Environment names a Prometheus server of its choosing:
// planned as it comes, the operator's bearer token goes there. With the
// base branch's Environment as the trusted one, nothing goes there, the
// plan is made against the trusted world, and the comment says the
// Environment of the change was not used.
func TestTrustedEnvironment(t *testing.T) {
	kube := kubetest.Shared(t)
	ns := kube.Namespace(t)
	kube.Apply(t, `apiVersion: apps/v1
kind: Deployment
metadata: {name: inventory, namespace: `+ns+`}
spec:
  replicas: 1
  selector: {matchLabels: {app: inventory}}
  template:
    metadata: {labels: {app: inventory}}
    spec: {containers: [{name: app, image: x}]}
`)
	var hits atomic.Int64
	var authorized atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.Header.Get("Authorization") != "" {
			authorized.Add(1)
		}
		http.Error(w, "no", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The base branch: the shipped directory, whole.
	base := copySpecs(t)
	// The change: its own Environment, aimed at the listener, and a spec.
	pr := filepath.Join(t.TempDir(), "specs")
	if err := os.MkdirAll(pr, 0o755); err != nil {
		t.Fatal(err)
	}
	hostile := `apiVersion: setpoint.dev/v1alpha1
kind: Environment
metadata: {name: demo}
spec:
  providers: [{name: kubernetes}]
  signals: {default: prometheus, prometheus: {url: "` + srv.URL + `"}}
`
	inv, err := os.ReadFile(filepath.Join(base, "inventory.nfr.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	nfr := strings.Replace(strings.Replace(string(inv), "minRPS: 120", "minRPS: 400", 1), "namespace: shop", "namespace: "+ns, 1)
	for name, body := range map[string]string{"setpoint.yaml": hostile, "inventory.nfr.yaml": nfr} {
		if err := os.WriteFile(filepath.Join(pr, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	trusted := filepath.Join(base, "setpoint.yaml")

	for _, args := range [][]string{{"plan", "--trusted-environment", trusted, pr}, {"plan", "--read-only", "--out", filepath.Join(t.TempDir(), "p.json"), "--trusted-environment", trusted, pr}} {
		if _, errOut, code := runCLI(t, args...); code != 1 || !strings.Contains(errOut, "--trusted-environment needs --read-only, and saves no plan") {
			t.Fatalf("%v: exit %d, %s", args, code, errOut)
		}
	}
	// A trusted file the change can write is not trusted.
	if err := os.WriteFile(filepath.Join(pr, "base.yaml"), []byte(hostile), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runCLI(t, "plan", "--read-only", "--trusted-environment", filepath.Join(pr, "base.yaml"), pr); code != 1 || !strings.Contains(errOut, "is inside the directory planned") {
		t.Fatalf("a trusted Environment inside the change: exit %d, %s", code, errOut)
	}
	if err := os.Remove(filepath.Join(pr, "base.yaml")); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runCLI(t, "plan", "--read-only", "--format", "markdown", "--trusted-environment", trusted, "--prometheus-bearer-token-file", token, "--kubeconfig", kube.Kubeconfig, pr)
	if code != 0 {
		t.Fatalf("plan with the trusted Environment: exit %d\n%s\n%s", code, errOut, out)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("%d requests went to the address the change named", n)
	}
	for _, want := range []string{"this change edits the Environment: planned against the trusted Environment", "sim:Deployment/" + ns + "/inventory"} {
		if !strings.Contains(out, want) {
			t.Fatalf("the comment must say %q:\n%s", want, out)
		}
	}
	// Planned as it comes, the change's Environment is used: the token
	// goes where it says. What the trusted Environment prevents.
	runCLI(t, "plan", "--read-only", "--prometheus-bearer-token-file", token, "--kubeconfig", kube.Kubeconfig, pr)
	if authorized.Load() == 0 {
		t.Fatalf("planned as it comes, no authorized request reached the change's address (%d in all): this test would prove nothing", hits.Load())
	}
}
