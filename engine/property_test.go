package engine

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/decide/nfr"
	"github.com/setpoint-dev/setpoint/engine/gate"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
)

// TestUserValueNeverUndercut drives the decider, Combine and the gate with
// random signals and values: whenever the current replicas are at or above
// the user's value, what setpoint writes never goes below it.
func TestUserValueNeverUndercut(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	n := &spec.NFR{}
	n.Kind, n.Metadata.Name, n.Metadata.Namespace = "NFR", "a", "shop"
	n.Spec.Target = spec.Target{Kind: "Deployment", Name: "a"}
	n.Spec.CPUPerPod = 500
	n.Spec.Enforcement = spec.NFREnforcement{Replicas: spec.ModeEnforce, Memory: spec.ModeOff}
	addr := addrs.Object{Provider: "sim", Kind: "Deployment", Namespace: "shop", Name: "a"}
	t0 := time.Unix(0, 0)
	for i := 0; i < 100000; i++ {
		n.Spec.Throughput = &spec.Throughput{MinRPS: 1 + r.Float64()*1000}
		rps, cpu := 0.01+r.Float64()*1000, r.Float64()*20000
		user := int64(1 + r.IntN(40))
		cur := int64(r.IntN(60))
		target := providers.Object{Address: addr, Exists: true, Attributes: map[addrs.Path]values.Value{nfr.AttrReplicas: values.CountOf(cur)}}
		out := nfr.Decide(nfr.Input{Spec: n, Target: target, Signals: nfr.Signals{RPS: &rps, CPUMilli: &cpu}, UserValue: map[addrs.Path]values.Value{nfr.AttrReplicas: values.CountOf(user)}})
		ds := Combine(out.Intents, func(addrs.Attr, values.Type) (values.Value, bool) { return values.CountOf(cur), true })
		for _, d := range ds {
			if d.Value.Int() < user {
				t.Fatalf("desired %s below the user's %d", d.Value, user)
			}
			rules := gate.Rules{Mode: spec.ModeEnforce, Policy: gate.Stability{Key: "nfr", MaxStep: []float64{0.1, 0.3, 1}[r.IntN(3)]}}
			dec := gate.Evaluate(t0, nil, []gate.Rules{rules}, 0,
				gate.Change{Current: values.CountOf(cur), HasCurrent: true, Desired: d.Value}, &state.Entry{})
			if cur >= user && dec.Value.Int() < user {
				t.Fatalf("current %d, user %d, desired %s: wrote %s", cur, user, d.Value, dec.Value)
			}
		}
	}
}
