package sim

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/route"
)

// sampleCount counts the samples a world writes, by metric name.
type sampleCount map[string]int

func (c sampleCount) AppendCached(l labels.Labels, _ *any, _ int64, _ float64) error {
	c[l.Get("__name__")]++
	return nil
}

// TestRouteSamplesBoundedWhateverTheTick: a group's setpoint_routegroup_*
// series are written at most once a virtual second, as the eBPF agent
// records them, however short the config's tick: a 10 ms tick over 8
// backends wrote some 100 samples of each series a second, and the
// provider's buffer keeps 35 minutes of them.
func TestRouteSamplesBoundedWhateverTheTick(t *testing.T) {
	const n = 8
	g := spec.SimRouteGroup{Namespace: "shop", Name: "checkout-vip", VIP: vip, Share: 1}
	var eps []string
	for i := range n {
		a := fmt.Sprintf("127.0.1.%d:9000", i+1)
		eps = append(eps, a)
		g.Backends = append(g.Backends, spec.SimBackend{Address: a, Capacity: 100, Latency: spec.Duration(20 * time.Millisecond)})
	}
	sink := sampleCount{}
	p, err := NewProvider(spec.SimConfig{Seed: 1, RouteGroups: []spec.SimRouteGroup{g}}, constTrace(400, 120), "", Options{Sink: sink})
	if err != nil {
		t.Fatal(err)
	}
	c := routeConf(route.TableEnforce, eps...)
	c.Every, c.Jitter = 10*time.Millisecond, 0.5
	if r := applyAt(t, p, 0, configChange(t, action.Create, c)); r.Err != "" {
		t.Fatal(r.Err)
	}
	const secs = 60
	if o := readGroup(t, p, secs); o.Attributes[route.AttrTick].Int() < 50*secs {
		t.Fatalf("%d ticks in %d s of a 10 ms tick", o.Attributes[route.AttrTick].Int(), secs)
	}
	// One record a second, and the one at the config's first tick.
	most := secs + 1
	if got := sink["setpoint_routegroup_mean_pressure"]; got == 0 || got > most {
		t.Errorf("%d mean-pressure samples in %d virtual seconds, want 1 to %d", got, secs, most)
	}
	if got := sink["setpoint_routegroup_slots"]; got == 0 || got > n*most {
		t.Errorf("%d slot samples in %d virtual seconds over %d backends, want 1 to %d", got, secs, n, n*most)
	}
}

// TestRouteConfigNamingABackendTwiceRefused: two spellings of one
// backend's address (a port with a leading 0) are one backend; a config
// naming it twice gave it two shares of the table and fed its report two
// slot counts a tick. PlanChange and Apply refuse it; nothing is
// configured.
func TestRouteConfigNamingABackendTwiceRefused(t *testing.T) {
	p := groupProvider(t, constTrace(300, 100), "", threeBackends())
	c := configChange(t, action.Create, routeConf(route.TableEnforce, backA, "127.0.0.1:09001", backC))
	const want = "config: backend 127.0.0.1:09001 is 127.0.0.1:9001 again: name each backend once"
	pr := p.PlanChange(context.Background(), providers.PlanChangeRequest{Now: at(p, 5), Changes: []providers.ObjectChange{c}})
	if len(pr.Results) != 1 || pr.Results[0].Err != want {
		t.Errorf("PlanChange: %+v\nwant %q", pr.Results, want)
	}
	if r := applyAt(t, p, 5, c); r.Err != want {
		t.Errorf("Apply: %q\nwant %q", r.Err, want)
	}
	if o := readGroup(t, p, 10); o.Exists || len(p.World.changes) != 0 {
		t.Errorf("configured after a refused change: %+v", o)
	}
}

// TestRouteConfigRefusalIsDeterministic: a change with several attributes
// a RouteGroup does not take is refused naming the first in path order,
// every time (the refusal goes into the plan).
func TestRouteConfigRefusalIsDeterministic(t *testing.T) {
	p := groupProvider(t, constTrace(10, 100), "", threeBackends())
	c := configChange(t, action.Create, routeConf(route.TableEnforce, backA))
	for _, a := range []addrs.Path{route.AttrRegime, route.AttrAdmission, route.AttrSkew, route.AttrEpoch, route.AttrTick} {
		c.Attributes[a] = values.StringOf("x")
	}
	const want = "status.admission: a RouteGroup takes only config (the rest is what its loop reports)"
	for i := range 50 {
		if _, res := p.World.check(c); res.Err != want {
			t.Fatalf("try %d: %q, want %q", i, res.Err, want)
		}
	}
}
