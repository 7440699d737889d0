package gate

import (
	"encoding/json"
	"time"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/plan"
	"github.com/setpoint-dev/setpoint/engine/values"
)

// Stability is the policy of kinds that follow a recommendation slowly
// (NFR, NodePolicy memory). A window opens with a recommendation (its
// anchor); every recommendation after it within Tolerance of the anchor
// keeps it open, including one equal to the current value (a flip between
// 4 and 5 does not restart it); one outside reopens it. A change passes
// once the window has lasted Stability; after an apply, a Cooldown, then a
// fresh window; each apply moves at most MaxStep of the current value.
//
// A decrease applies the highest recommendation the window saw, so what
// was needed a moment ago is not taken away; a window that ends without a
// decrease (its highest was the current value) starts again, so an old
// high does not hold a decrease back for ever. With ImmediateUp, an
// increase skips the window and the cooldown: it is needed to meet a
// target now (bounded by MaxStepUp, or MaxStep when that is 0). It
// persists only the open window.
type Stability struct {
	// Key names the policy's state (the kind).
	Key       string
	Stability time.Duration
	Tolerance float64
	Cooldown  time.Duration
	// MaxStep is the bounded step as a fraction of the current value.
	MaxStep float64
	// ImmediateUp lets increases through at once; MaxStepUp bounds them
	// (0: MaxStep).
	ImmediateUp bool
	MaxStepUp   float64
	// Check, if set, is the kind's rule for a group of coupled attributes.
	Check func(group []addrs.Path, value func(addrs.Path) (values.Value, bool)) error
}

// Window is the stability window the policy persists: opened by Anchor at
// OpenedAt; High is the highest recommendation seen in it.
type Window struct {
	OpenedAt time.Time    `json:"openedAt"`
	Anchor   values.Value `json:"anchor"`
	High     values.Value `json:"high,omitzero"`
}

// Name is the state key.
func (s Stability) Name() string { return s.Key }

// Coherent runs the kind's group rule.
func (s Stability) Coherent(group []addrs.Path, value func(addrs.Path) (values.Value, bool)) error {
	if s.Check == nil {
		return nil
	}
	return s.Check(group, value)
}

// Evaluate tracks the window and bounds the step. No window is open during
// a cooldown; the first evaluation after it opens a fresh one. It is also
// called when the recommendation is the current value, to keep the window.
func (s Stability) Evaluate(in Input, prev json.RawMessage) (Verdict, json.RawMessage) {
	var v Verdict
	wanted := in.Wanted
	if !wanted.IsValid() {
		wanted = in.Desired
	}
	up := !in.HasCurrent || in.Desired.Compare(in.Current) > 0
	if up && s.ImmediateUp {
		v.Value = in.Desired
		if in.HasCurrent {
			step := s.MaxStepUp
			if step == 0 {
				step = s.MaxStep
			}
			v.Value = values.Step(in.Current, in.Desired, step)
			if v.Value != in.Desired {
				v.Bounds = append(v.Bounds, plan.Bound{Kind: plan.BoundStep, Percent: step, Of: in.Current, Up: true})
			}
		}
		// The apply ends any window: a later decrease starts a fresh one.
		return v, nil
	}
	inCooldown := false
	var since time.Duration
	if in.Applied != nil && s.Cooldown > 0 {
		if since = in.Now.Sub(in.Applied.At); since < s.Cooldown {
			inCooldown = true
		}
	}
	var w *Window
	if !inCooldown {
		var old Window
		ok := prev != nil && json.Unmarshal(prev, &old) == nil && old.Anchor.IsValid()
		// A window opened before the last apply is over: the apply used it.
		fresh := in.Applied == nil || !old.OpenedAt.Before(in.Applied.At)
		if ok && fresh && values.Within(old.Anchor, wanted, s.Tolerance) {
			w = &old
			// The high is kept after the cap: a decrease must never land
			// above it.
			if !w.High.IsValid() || w.High.Type() != in.Desired.Type() || in.Desired.Compare(w.High) > 0 {
				w.High = in.Desired
			}
		} else {
			w = &Window{OpenedAt: in.Now, Anchor: wanted, High: in.Desired}
		}
	}
	target := in.Desired
	if !up && w != nil && w.High.Type() == in.Desired.Type() && w.High.Compare(in.Desired) > 0 {
		// A decrease goes only as far as the highest recommendation of
		// the window (never above the cap the desired value carries).
		target = w.High
		if in.HasCurrent && target.Compare(in.Current) > 0 {
			// A decrease never turns into an increase.
			target = in.Current
		}
	}
	v.Value = target
	if in.HasCurrent {
		bounded := values.Step(in.Current, target, s.MaxStep)
		if bounded != target {
			v.Bounds = append(v.Bounds, plan.Bound{Kind: plan.BoundStep, Percent: s.MaxStep, Of: in.Current, Up: target.Compare(in.Current) > 0})
		}
		v.Value = bounded
	}
	switch {
	case inCooldown:
		until := in.Applied.At.Add(s.Cooldown)
		v.Hold = &plan.Hold{Kind: plan.HoldCooldown, Elapsed: since, Total: s.Cooldown, Until: until}
		v.Due = until
	case s.Stability > 0 && in.Now.Sub(w.OpenedAt) < s.Stability:
		until := w.OpenedAt.Add(s.Stability)
		v.Hold = &plan.Hold{Kind: plan.HoldStability, Elapsed: in.Now.Sub(w.OpenedAt), Total: s.Stability, Until: until}
		v.Due = until
	case in.HasCurrent && v.Value == in.Current && s.Stability > 0:
		// The window ran its course and its highest is where things are:
		// start over from now, so the high it saw ages out.
		w = &Window{OpenedAt: in.Now, Anchor: wanted, High: in.Desired}
	}
	if w == nil {
		return v, nil
	}
	b, _ := json.Marshal(w)
	return v, b
}
