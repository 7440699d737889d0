package sim

import (
	"context"
	"testing"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
	vocab "github.com/setpoint-dev/setpoint/providers/workload"
)

// TestHPAScaleTargetRef: every HPA of the sim world, configured or
// created through apply, says which Deployment it scales, read and
// listed, as a cluster's HPA does (setpoint finds an HPA by it).
func TestHPAScaleTargetRef(t *testing.T) {
	a, b := deployment("checkout", 2), deployment("api", 2)
	a.HPA = &spec.SimHPA{Min: 2, Max: 10}
	r := newRig(t, constTrace(10, 600), a, b)
	created := addr("HorizontalPodAutoscaler", "api")
	// Listed before the create, so the list's index is built: the create
	// must show in the next list, the delete leave it.
	if l := r.p.List(context.Background(), providers.ListRequest{Now: r.at(5), Provider: "sim", Kind: KindHPA, Namespace: "shop"}); len(l.Objects) != 1 {
		t.Fatalf("before the create: listed %+v", l)
	}
	if res := r.apply(t, 10, providers.ObjectChange{Address: created, Action: action.Create, Manager: "setpoint",
		Attributes: map[addrs.Path]values.Value{AttrMinReplicas: count(2), AttrMaxReplicas: count(8)}, Changed: []addrs.Path{AttrMinReplicas}})[0]; res.Err != "" {
		t.Fatal(res.Err)
	}
	l := r.p.List(context.Background(), providers.ListRequest{Now: r.at(20), Provider: "sim", Kind: KindHPA, Namespace: "shop"})
	if len(l.Diagnostics) > 0 || len(l.Objects) != 2 {
		t.Fatalf("listed %+v", l)
	}
	for _, o := range l.Objects {
		if o.Attributes[AttrScaleTargetKind] != values.StringOf("Deployment") || o.Attributes[AttrScaleTargetName] != values.StringOf(o.Address.Name) {
			t.Errorf("%s: %v", o.Address, o.Attributes)
		}
		w := addrs.Object{Provider: "sim", Kind: KindDeployment, Namespace: "shop", Name: o.Address.Name}
		if got := vocab.ScaledBy(l.Objects, w); len(got) != 1 || got[0].Address != o.Address {
			t.Errorf("the HPA of %s: %+v", w, got)
		}
	}
	if o := r.read(t, KindHPA, "api", 30); o.Managers[AttrScaleTargetName] != "setpoint" {
		t.Errorf("a created HPA's target is its creator's: %v", o.Managers)
	}
	if res := r.apply(t, 40, providers.ObjectChange{Address: created, Action: action.Delete, Manager: "setpoint"})[0]; res.Err != "" {
		t.Fatal(res.Err)
	}
	if l := r.p.List(context.Background(), providers.ListRequest{Now: r.at(50), Provider: "sim", Kind: KindHPA, Namespace: "shop"}); len(l.Objects) != 1 || l.Objects[0].Address.Name != "checkout" {
		t.Fatalf("after the delete: listed %+v", l)
	}
}
