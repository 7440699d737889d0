package kubernetes_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/cue/load"
	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/signals/embedded"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/internal/kubetest"
	"github.com/setpoint-dev/setpoint/providers"
	k8sprov "github.com/setpoint-dev/setpoint/providers/kubernetes"
)

// BenchmarkPlan1000NFR: a plan of 1,000 NFR specs against the real API
// server: reads of 1,000 Deployments and 1,000 HPAs (one List each), the
// decisions (no signals yet: each says what is missing) and the dry runs.
func BenchmarkPlan1000NFR(b *testing.B) {
	env := kubetest.Shared(b)
	ns := env.Namespace(b)
	ctx := context.Background()
	rc := env.Dynamic(b).Resource(gvrs["Deployment"]).Namespace(ns)
	dir := b.TempDir()
	var specs strings.Builder
	specs.WriteString("apiVersion: setpoint.dev/v1alpha1\nkind: Environment\nmetadata: {name: bench}\nspec:\n  providers: [{name: kubernetes}]\n")
	for i := range 1000 {
		name := fmt.Sprintf("w%04d", i)
		obj := map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": name, "namespace": ns},
			"spec": map[string]any{"replicas": int64(1), "selector": map[string]any{"matchLabels": map[string]any{"app": name}},
				"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": name}},
					"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": "x",
						"resources": map[string]any{"requests": map[string]any{"memory": "256Mi"}, "limits": map[string]any{"memory": "512Mi"}}}}}}}}
		if _, err := rc.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{FieldManager: "kubectl-client-side-apply"}); err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(&specs, "---\napiVersion: setpoint.dev/v1alpha1\nkind: NFR\nmetadata: {name: %s, namespace: %s}\nspec:\n  target: {kind: Deployment, name: %s}\n  throughput: {minRPS: 100}\n", name, ns, name)
	}
	if err := os.WriteFile(filepath.Join(dir, "specs.yaml"), []byte(specs.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	l, err := load.New()
	if err != nil {
		b.Fatal(err)
	}
	r := l.LoadDir(dir)
	if len(r.Diags) > 0 {
		b.Fatal(r.Diags)
	}
	docs := r.Specs()
	p, err := k8sprov.NewForConfig(env.Config())
	if err != nil {
		b.Fatal(err)
	}
	e := &engine.Engine{Env: r.Environment(), Specs: docs, Providers: map[string]providers.Provider{"kubernetes": p}, Signals: embedded.NewSource(embedded.NewStore(0))}
	for b.Loop() {
		pl := e.Plan(ctx, time.Now(), state.New(), nil)
		if len(pl.Errors) > 0 || len(pl.Notes) < 1000 {
			b.Fatalf("errors %v, %d notes", pl.Errors, len(pl.Notes))
		}
	}
}
