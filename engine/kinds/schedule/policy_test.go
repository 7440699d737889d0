package schedulekind_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/cue/spec"
	decide "github.com/setpoint-dev/setpoint/engine/decide/schedule"
	"github.com/setpoint-dev/setpoint/engine/gate"
	schedulekind "github.com/setpoint-dev/setpoint/engine/kinds/schedule"
	"github.com/setpoint-dev/setpoint/engine/plan"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/engine/values"
)

// TestPolicyCountsWhatWasApplied: scale-up Pods 2 per 60 s. From 2
// wanting 10 at t0 it lets 4 through; once 4 is applied at t0, the
// change of +2 in the period leaves nothing more until t0+60s (held,
// due then); after it, 6.
func TestPolicyCountsWhatWasApplied(t *testing.T) {
	p := schedulekind.Policy{Behavior: decide.Behavior{
		Up:   decide.Rules{Select: decide.SelectMax, Policies: []decide.Policy{{Type: decide.Pods, Value: 2, Period: time.Minute}}},
		Down: decide.Rules{Select: decide.SelectMin, Stabilization: 5 * time.Minute},
	}}
	n := values.CountOf
	in := gate.Input{Now: t0, Current: n(2), HasCurrent: true, Desired: n(10), Wanted: n(10)}
	v, mem := p.Evaluate(in, nil)
	if v.Value != n(4) || v.Hold != nil || len(v.Bounds) != 1 || v.Bounds[0].Kind != plan.BoundPolicy || !strings.Contains(v.Bounds[0].Field, "Pods 2 per 1m0s") {
		t.Fatalf("t0: %+v; want 4 bounded by Pods 2 per 1m", v)
	}
	applied := &state.Applied{Value: n(4), At: t0}
	in = gate.Input{Now: t0.Add(10 * time.Second), Current: n(4), HasCurrent: true, Desired: n(10), Wanted: n(10), Applied: applied}
	v, mem = p.Evaluate(in, mem)
	if v.Hold == nil || v.Value != n(4) || !v.Due.Equal(t0.Add(time.Minute)) {
		t.Fatalf("t0+10s: %+v; want held at 4 until t0+1m", v)
	}
	var m schedulekind.Memory
	if err := json.Unmarshal(mem, &m); err != nil || len(m.Events) != 1 || m.Events[0].Delta != 2 || !m.Events[0].At.Equal(t0) {
		t.Fatalf("log %s: want one +2 at t0", mem)
	}
	in.Now = t0.Add(61 * time.Second)
	if v, _ = p.Evaluate(in, mem); v.Value != n(6) || v.Hold != nil {
		t.Fatalf("t0+61s: %+v; want 6", v)
	}
}

// TestPolicySleepAndWakeAreUnbounded: from 0 or to 0 the behavior does
// not apply (the 0→N decision already waited), and the windows start
// over.
func TestPolicySleepAndWakeAreUnbounded(t *testing.T) {
	p := schedulekind.Policy{Behavior: decide.Behavior{
		Up:   decide.Rules{Select: decide.SelectDisabled},
		Down: decide.Rules{Select: decide.SelectDisabled, Stabilization: time.Hour},
	}}
	n := values.CountOf
	for _, tc := range []struct{ from, to int64 }{{0, 5}, {5, 0}} {
		v, mem := p.Evaluate(gate.Input{Now: t0, Current: n(tc.from), HasCurrent: true, Desired: n(tc.to)}, nil)
		if v.Hold != nil || v.Value != n(tc.to) {
			t.Errorf("%d → %d: %+v; want it through", tc.from, tc.to, v)
		}
		var m schedulekind.Memory
		// Nor do they enter the change log (a wake's +5 would hold the
		// next scale-up within its period).
		if json.Unmarshal(mem, &m) != nil || len(m.Recommendations) != 0 || m.Pass != nil || len(m.Events) != 0 {
			t.Errorf("%d → %d: memory %s", tc.from, tc.to, mem)
		}
	}
	// Between two counts, Disabled holds.
	if v, _ := p.Evaluate(gate.Input{Now: t0, Current: n(3), HasCurrent: true, Desired: n(5)}, nil); v.Hold == nil {
		t.Errorf("3 → 5 with scale-up disabled: %+v; want held", v)
	}
}

// TestPolicyStateStaysBounded: a recommendation every second for hours,
// alternating, and an apply every tick keep the state under the gate's
// bound per policy.
func TestPolicyStateStaysBounded(t *testing.T) {
	p := schedulekind.Policy{Behavior: decide.Behavior{
		Up:   decide.Rules{Select: decide.SelectMax, Stabilization: time.Hour, Policies: []decide.Policy{{Type: decide.Pods, Value: 1, Period: time.Hour}}},
		Down: decide.Rules{Select: decide.SelectMin, Stabilization: time.Hour, Policies: []decide.Policy{{Type: decide.Pods, Value: 1, Period: time.Hour}}},
	}}
	var mem json.RawMessage
	cur := int64(5)
	for s := 0; s < 4*3600; s++ {
		now := t0.Add(time.Duration(s) * time.Second)
		des := int64(3 + s%5)
		v, next := p.Evaluate(gate.Input{Now: now, Current: values.CountOf(cur), HasCurrent: true, Desired: values.CountOf(des),
			Applied: &state.Applied{Value: values.CountOf(cur), At: now.Add(-time.Millisecond)}}, mem)
		if len(next) > gate.MaxPolicyState {
			t.Fatalf("at %ds the state is %d bytes, over %d", s, len(next), gate.MaxPolicyState)
		}
		mem = next
		cur = v.Value.Int()
	}
}

// TestPolicyFirstScaleDownWaitsTheWindow: with nothing in its memory (just
// adopted) or its windows started afresh (just woken), the current count
// is recorded first, as the HPA records it: a scale-down waits out the
// 300 s window from then (held, due t0+300s), and passes after it.
func TestPolicyFirstScaleDownWaitsTheWindow(t *testing.T) {
	p := schedulekind.Policy{Behavior: decide.Behavior{
		Up:   decide.Rules{Select: decide.SelectMax},
		Down: decide.Rules{Select: decide.SelectMin, Stabilization: 5 * time.Minute},
	}}
	n := values.CountOf
	// Awake at 8 ten minutes ago, asleep, woken a minute ago.
	var woken json.RawMessage
	for _, s := range []struct {
		ago      time.Duration
		cur, des int64
	}{{10 * time.Minute, 8, 8}, {9 * time.Minute, 8, 0}, {time.Minute, 0, 8}} {
		_, woken = p.Evaluate(gate.Input{Now: t0.Add(-s.ago), Current: n(s.cur), HasCurrent: true, Desired: n(s.des)}, woken)
	}
	for name, mem := range map[string]json.RawMessage{"adopted": nil, "woken": woken} {
		v, next := p.Evaluate(gate.Input{Now: t0, Current: n(8), HasCurrent: true, Desired: n(3)}, mem)
		if v.Hold == nil || v.Value != n(8) || !v.Due.Equal(t0.Add(5*time.Minute)) {
			t.Errorf("%s, t0: %+v; want held at 8 until t0+5m", name, v)
			continue
		}
		v, _ = p.Evaluate(gate.Input{Now: t0.Add(5*time.Minute + time.Second), Current: n(8), HasCurrent: true, Desired: n(3)}, next)
		if v.Hold != nil || v.Value != n(3) {
			t.Errorf("%s, t0+5m1s: %+v; want 3", name, v)
		}
	}
}

// TestPolicyNoBehaviorKeepsThePace pins that a Schedule with no behavior
// still keeps its scale events: its policies are the HPA's defaults (up,
// 100% or 4 pods per 15 s), read against the changes of the last 15 s.
// (An HPA with no behavior stores none and bounds each 15 s sync from the
// current count alone; at a 5 s tick that would be 4 → 8 → 16 → 32 in
// 10 s.) From 4 wanting 100, a tick every 5 s, each change applied:
// 8 at t0; held at 8 at +5 s and +10 s (from 4, the period's start:
// max(4 × 2, 4 + 4) = 8); 16 at +15 s, when the +4 has left the period.
func TestPolicyNoBehaviorKeepsThePace(t *testing.T) {
	s := &spec.Schedule{}
	p := schedulekind.Policy{Behavior: schedulekind.BehaviorOf(s)}
	n := values.CountOf
	cur := int64(4)
	var mem json.RawMessage
	var applied *state.Applied
	for i, want := range []int64{8, 8, 8, 16} {
		now := t0.Add(time.Duration(i) * 5 * time.Second)
		var v gate.Verdict
		v, mem = p.Evaluate(gate.Input{Now: now, Current: n(cur), HasCurrent: true, Desired: n(100), Wanted: n(100), Applied: applied}, mem)
		if v.Value != n(want) {
			t.Fatalf("+%ds: %v (%+v); want %d", i*5, v.Value, v.Hold, want)
		}
		if v.Value != n(cur) {
			cur = v.Value.Int()
			applied = &state.Applied{Value: n(cur), At: now}
		}
	}
}
