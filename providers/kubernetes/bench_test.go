package kubernetes

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/internal/kubetest"
	"github.com/setpoint-dev/setpoint/providers"
)

// fleet makes n Deployments in a fresh namespace and returns their
// addresses.
func fleet(b *testing.B, env *kubetest.Env, n int) []providers.Address {
	b.Helper()
	ns := env.Namespace(b)
	rc := env.Dynamic(b).Resource(kinds[KindDeployment].gvr).Namespace(ns)
	ctx := context.Background()
	as := make([]providers.Address, n)
	for i := range n {
		name := fmt.Sprintf("w%04d", i)
		var obj map[string]any
		if err := yamlTo(deployment(ns, name, 1), &obj); err != nil {
			b.Fatal(err)
		}
		if _, err := rc.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{FieldManager: "kubectl-client-side-apply"}); err != nil {
			b.Fatal(err)
		}
		as[i] = addr(KindDeployment, ns, name)
	}
	return as
}

// BenchmarkRead1000Deployments: one Read of 1,000 Deployments (one List).
func BenchmarkRead1000Deployments(b *testing.B) {
	env := kubetest.Shared(b)
	as := fleet(b, env, 1000)
	p, err := NewForConfig(env.Config())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		resp := p.Read(ctx, providers.ReadRequest{Addresses: as})
		if len(resp.Diagnostics) > 0 || !resp.Objects[999].Exists {
			b.Fatal(resp.Diagnostics)
		}
	}
}

// BenchmarkApply100Changes: one Apply of 100 objects' changes (each a GET
// and a server-side apply, plus an Event).
func BenchmarkApply100Changes(b *testing.B) {
	env := kubetest.Shared(b)
	as := fleet(b, env, 100)
	p, err := NewForConfig(env.Config())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	n := int64(1)
	for b.Loop() {
		n = 3 - n // 1 ↔ 2: every apply is a change
		cs := make([]providers.ObjectChange, len(as))
		for i, a := range as {
			cs[i] = providers.ObjectChange{Address: a, Attributes: map[addrs.Path]values.Value{AttrReplicas: values.CountOf(n)},
				Changed: []addrs.Path{AttrReplicas}, Manager: Manager, Force: true}
		}
		resp := p.Apply(ctx, providers.ApplyRequest{Now: time.Now(), Changes: cs})
		for _, r := range resp.Results {
			if r.Err != "" {
				b.Fatal(r.Err)
			}
		}
	}
}

func yamlTo(doc string, out *map[string]any) error { return yaml.Unmarshal([]byte(doc), out) }
