package plugin

import (
	"testing"

	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
)

// TestChangeCarriesSeen: the values a plan read cross the protocol, so a
// provider out of process can test them; a malformed one refuses the
// change whole.
func TestChangeCarriesSeen(t *testing.T) {
	nodes := addrs.MustPath("spec.nodes")
	c := providers.ObjectChange{Address: providers.Address{Provider: "kubernetes", Kind: "Cluster", Namespace: "f", Name: "a"}, Action: action.Update,
		Attributes: map[addrs.Path]values.Value{nodes: values.CountOf(9)}, Changed: []addrs.Path{nodes},
		Seen: map[addrs.Path]values.Value{nodes: values.CountOf(6)}}
	back, err := fromChange(toChange(c))
	if err != nil || back.Seen[nodes] != values.CountOf(6) {
		t.Fatalf("round trip: %+v %v", back.Seen, err)
	}
	x := toChange(c)
	for k := range x.Seen {
		x.Seen[k].Type = 9999
	}
	if _, err := fromChange(x); err == nil {
		t.Fatal("a malformed seen value must refuse the change")
	}
}
