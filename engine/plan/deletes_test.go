package plan

import (
	"slices"
	"testing"

	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
)

func TestDeletesGone(t *testing.T) {
	a := addrs.Object{Provider: "kubernetes", Kind: "Cluster", Namespace: "fleet", Name: "a"}
	b := addrs.Object{Provider: "kubernetes", Kind: "Cluster", Namespace: "fleet", Name: "b"}
	del := func(o addrs.Object) Change { return Change{Address: o, Action: action.Delete} }
	saved := &Plan{Changes: []Change{del(a), del(b), {Address: a, Action: action.Update}}}
	for _, c := range []struct {
		name  string
		fresh *Plan
		want  []string
	}{
		{"both still wanted", &Plan{Changes: []Change{del(a), del(b)}}, nil},
		{"one no longer", &Plan{Changes: []Change{del(b)}}, []string{"kubernetes:Cluster/fleet/a: a plan now does not delete it"}},
		{"one held now", &Plan{Changes: []Change{del(a)}, Held: []Change{{Address: b, Action: action.Delete, Held: &Hold{Kind: HoldPolicy, Policy: "delete", Detail: "3 instances on it"}}}},
			[]string{"kubernetes:Cluster/fleet/b: a plan now holds its delete: delete: 3 instances on it"}},
		{"an update is not a delete", &Plan{Changes: []Change{{Address: a, Action: action.Update}, {Address: b, Action: action.Update}}},
			[]string{"kubernetes:Cluster/fleet/a: a plan now does not delete it", "kubernetes:Cluster/fleet/b: a plan now does not delete it"}},
	} {
		if got := DeletesGone(saved, c.fresh); !slices.Equal(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
