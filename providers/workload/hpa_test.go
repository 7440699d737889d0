package workload

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
)

func hpa(provider, ns, name string, exists bool, ref ...string) providers.Object {
	o := providers.Object{Address: addrs.Object{Provider: provider, Kind: HPA, Namespace: ns, Name: name}, Exists: exists, Attributes: map[addrs.Path]values.Value{}}
	if len(ref) > 0 && ref[0] != "-" {
		o.Attributes[ScaleTargetKind] = values.StringOf(ref[0])
	}
	if len(ref) > 1 && ref[1] != "-" {
		o.Attributes[ScaleTargetName] = values.StringOf(ref[1])
	}
	return o
}

func names(objs []providers.Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.Address.String())
	}
	return out
}

// ScaledBy's rules, by hand: the reference names the workload, whatever
// the HPA's own name; without one, the HPA of the workload's own name.
func TestScaledBy(t *testing.T) {
	web := addrs.Object{Provider: "kubernetes", Kind: Deployment, Namespace: "shop", Name: "web"}
	list := []providers.Object{
		hpa("kubernetes", "shop", "other-name", true, Deployment, "web"), // by reference
		hpa("kubernetes", "shop", "web", true, Deployment, "api"),        // its name is no reference
		hpa("kubernetes", "shop", "web", true),                           // no reference: its own name
		hpa("kubernetes", "shop", "x", false, Deployment, "web"),         // gone
		hpa("kubernetes", "shop", "rs", true, "ReplicaSet", "web"),       // another kind
		hpa("kubernetes", "prod", "p", true, Deployment, "web"),          // another namespace
		hpa("sim", "shop", "s", true, Deployment, "web"),                 // another provider
	}
	want := []string{"kubernetes:HorizontalPodAutoscaler/shop/other-name", "kubernetes:HorizontalPodAutoscaler/shop/web"}
	if got := names(ScaledBy(list, web)); !slices.Equal(got, want) {
		t.Errorf("ScaledBy: %v, want %v", got, want)
	}
	if got := names(IndexHPAs(list).ScaledBy(web)); !slices.Equal(got, want) {
		t.Errorf("the index: %v, want %v", got, want)
	}
}

// The index answers as ScaledBy does, in the list's order, for any list
// and workload.
func TestHPAIndexIsScaledBy(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	for i := range 500 {
		var list []providers.Object
		for j := range r.IntN(12) {
			list = append(list, hpa(pick("kubernetes", "sim"), pick("a", "b"), pick("web", "api", fmt.Sprint(j)), r.IntN(5) > 0,
				pick(Deployment, "ReplicaSet", "-"), pick("web", "api", "-")))
		}
		x := IndexHPAs(list)
		for _, w := range []addrs.Object{
			{Provider: pick("kubernetes", "sim"), Kind: pick(Deployment, "ReplicaSet"), Namespace: pick("a", "b"), Name: pick("web", "api", "0", "")},
		} {
			if got, want := names(x.ScaledBy(w)), names(ScaledBy(list, w)); !slices.Equal(got, want) {
				t.Fatalf("case %d, %v: the index says %v, ScaledBy %v", i, w, got, want)
			}
		}
	}
}
