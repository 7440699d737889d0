package gate

import (
	"encoding/json"
	"time"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/plan"
	"github.com/setpoint-dev/setpoint/engine/values"
)

// Stability is the policy of kinds that follow a recommendation slowly
// (NFR, NodePolicy memory): every recommendation since the window opened
// stays within Tolerance of the one that opened it for Stability; a
// recommendation outside reopens the window; the latest is what gets
// applied; after an apply, a Cooldown, then a fresh window; each apply
// moves at most MaxStep of the current value. It persists only the open
// window.
type Stability struct {
	// Key names the policy's state (the kind).
	Key       string
	Stability time.Duration
	Tolerance float64
	Cooldown  time.Duration
	// MaxStep is the bounded step as a fraction of the current value.
	MaxStep float64
	// Check, if set, is the kind's rule for a group of coupled attributes.
	Check func(group []addrs.Path, value func(addrs.Path) (values.Value, bool)) error
}

// Window is the stability window the policy persists: opened by Anchor at
// OpenedAt.
type Window struct {
	OpenedAt time.Time    `json:"openedAt"`
	Anchor   values.Value `json:"anchor"`
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
// a cooldown; the first evaluation after it opens a fresh one.
func (s Stability) Evaluate(in Input, prev json.RawMessage) (Verdict, json.RawMessage) {
	var v Verdict
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
		wanted := in.Wanted
		if !wanted.IsValid() {
			wanted = in.Desired
		}
		if ok && fresh && values.Within(old.Anchor, wanted, s.Tolerance) {
			w = &old
		} else {
			w = &Window{OpenedAt: in.Now, Anchor: wanted}
		}
	}
	v.Value = in.Desired
	if in.HasCurrent {
		bounded := values.Step(in.Current, in.Desired, s.MaxStep)
		if bounded != in.Desired {
			v.Bounds = append(v.Bounds, plan.Bound{Kind: plan.BoundStep, Percent: s.MaxStep, Of: in.Current, Up: in.Desired.Compare(in.Current) > 0})
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
	}
	if w == nil {
		return v, nil
	}
	b, _ := json.Marshal(w)
	return v, b
}
