package load

import (
	"testing"

	"github.com/setpoint-dev/setpoint/cue/spec"
)

// TestFleetDefaults: a Fleet that names neither its zones nor its create
// rate gets 3 zones and one new cluster per region per hour; a note about
// the rate, unset, points at the clusters block.
func TestFleetDefaults(t *testing.T) {
	l := newLoader(t)
	src := `apiVersion: setpoint.dev/v1alpha1
kind: Fleet
metadata: {name: streaming}
spec:
  cloud: aws
  regions: [us-east-1]
  clusterTemplate: standard
  capacity: [{name: connections, perInstance: 1, perNode: 1}]
  nodes: {ceiling: 9}
  remaining: {connections: sum by (cluster) (x)}
  clusters: {delete: true}
`
	var got *spec.Fleet
	if ds := l.LoadBytes("fleet.yaml", []byte(src), func(d spec.Document) { got = d.(*spec.Fleet) }); len(ds) > 0 {
		t.Fatal(ds)
	}
	s := got.Spec
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"multiAZ", s.MultiAZ, true},
		{"zones", s.Zones, 3},
		{"maxCreatesPerHour", s.Clusters.MaxCreatesPerHour, 1},
		{"reporter", s.Reporter, ""},
		{"step", s.Nodes.Step, 3},
		{"pos of maxCreatesPerHour", got.Src.PosOf("spec.clusters.maxCreatesPerHour").String(), "fleet.yaml:11:3"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}
