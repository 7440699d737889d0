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
	// MinStepUp is the least an increase of a count may move in a step,
	// whatever MaxStepUp's percentage gives (0: none).
	MinStepUp int64
	// NoCooldownAfterUp lets a decrease follow an increase without the
	// cooldown (what follows an increase is the burst memory's to say).
	NoCooldownAfterUp bool
	// Period, when positive, makes the step bound hold over a period as
	// well as over one apply, as the HPA's scaling policies do: within a
	// Period of its start the value moves at most the step from where the
	// period began, however many applies it takes (under watch the next
	// step would otherwise follow the last as soon as it is applied).
	Period time.Duration
	// Check, if set, is the kind's rule for a group of coupled attributes.
	Check func(group []addrs.Path, value func(addrs.Path) (values.Value, bool)) error
}

// Window is the stability window the policy persists: opened by Anchor at
// OpenedAt; High is the highest recommendation seen in it.
type Window struct {
	OpenedAt time.Time    `json:"openedAt,omitzero"`
	Anchor   values.Value `json:"anchor,omitzero"`
	High     values.Value `json:"high,omitzero"`
	// PeriodAt is when the step's period began, PeriodFrom the value
	// then (Period).
	PeriodAt   time.Time    `json:"periodAt,omitzero"`
	PeriodFrom values.Value `json:"periodFrom,omitzero"`
	// LastUp says the last move the policy let through was an increase.
	LastUp bool `json:"lastUp,omitzero"`
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
	var old Window
	decoded := prev != nil && json.Unmarshal(prev, &old) == nil
	// The step's period: it begins at the first move and, while it lasts,
	// the value it began at bounds every apply in it. It holds only while
	// the value is what setpoint last left it: a value someone else set is
	// where a new period starts. A clock that went back keeps it.
	var period Window
	if s.Period > 0 && in.HasCurrent && decoded && !old.PeriodAt.IsZero() && old.PeriodFrom.IsValid() &&
		old.PeriodFrom.Type() == in.Current.Type() && in.Now.Sub(old.PeriodAt) < s.Period &&
		in.Applied != nil && in.Applied.Value == in.Current {
		period = Window{PeriodAt: old.PeriodAt, PeriodFrom: old.PeriodFrom}
	}
	lastUp := decoded && old.LastUp
	save := func(w *Window) json.RawMessage {
		if w == nil {
			if period.PeriodAt.IsZero() && !lastUp {
				return nil
			}
			w = &Window{}
		}
		w.PeriodAt, w.PeriodFrom, w.LastUp = period.PeriodAt, period.PeriodFrom, lastUp
		b, _ := json.Marshal(w)
		return b
	}
	up := !in.HasCurrent || in.Desired.Compare(in.Current) > 0
	if up && s.ImmediateUp {
		v.Value = in.Desired
		if in.HasCurrent {
			step := s.MaxStepUp
			if step == 0 {
				step = s.MaxStep
			}
			v.Value, v.Bounds = s.step(in, &period, in.Desired, step)
		}
		if in.HasCurrent && v.Value != in.Current {
			lastUp = true
		}
		// The apply ends any window: a later decrease starts a fresh one.
		return v, save(nil)
	}
	inCooldown := false
	var since time.Duration
	if in.Applied != nil && s.Cooldown > 0 && !(s.NoCooldownAfterUp && lastUp) {
		if since = in.Now.Sub(in.Applied.At); since < s.Cooldown {
			inCooldown = true
		}
	}
	var w *Window
	if !inCooldown {
		ok := decoded && old.Anchor.IsValid()
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
	if !up && w != nil && s.Stability > 0 && w.High.Type() == in.Desired.Type() && w.High.Compare(in.Desired) > 0 {
		// A decrease goes only as far as the highest recommendation of
		// the window (never above the cap the desired value carries). With
		// no stability there is no window to have seen anything: a high
		// kept from one would hold every decrease within its tolerance.
		target = w.High
		if in.HasCurrent && target.Compare(in.Current) > 0 {
			// A decrease never turns into an increase.
			target = in.Current
		}
	}
	v.Value = target
	if in.HasCurrent {
		v.Value, v.Bounds = s.step(in, &period, target, s.MaxStep)
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
	if v.Hold == nil && in.HasCurrent && v.Value.Compare(in.Current) < 0 {
		lastUp = false
	}
	return v, save(w)
}

// step bounds a move from the current value to target: at most pct of the
// current value, or, within a period (Period), of the value the period
// began at; an increase may always move MinStepUp. The result lies between
// the current value and target: never past target, never the wrong way (a
// period that began lower than an increase already made leaves no room,
// not a decrease). A move opens a period when none is open.
func (s Stability) step(in Input, period *Window, target values.Value, pct float64) (values.Value, []plan.Bound) {
	from := in.Current
	if s.Period > 0 && period.PeriodFrom.IsValid() {
		from = period.PeriodFrom
	}
	v := values.Step(from, target, pct)
	up := target.Compare(in.Current) > 0
	minStep := false
	if up && s.MinStepUp > 0 && from.Type() == values.Count && target.Compare(from) > 0 && v.Int()-from.Int() < s.MinStepUp {
		// At least MinStepUp whatever the percentage, as the HPA's
		// default scale-up (4 pods or 100% a period, whichever is more):
		// from 2 pods, 30% is one.
		v, minStep = from.WithInt(min(from.Int()+s.MinStepUp, target.Int())), true
	}
	if up && v.Compare(in.Current) < 0 || !up && v.Compare(in.Current) > 0 {
		v = in.Current
	}
	if up && v.Compare(target) > 0 || !up && v.Compare(target) < 0 {
		v = target
	}
	if s.Period > 0 && period.PeriodAt.IsZero() && v != in.Current {
		*period = Window{PeriodAt: in.Now, PeriodFrom: in.Current}
	}
	if v == target {
		return v, nil
	}
	b := plan.Bound{Kind: plan.BoundStep, Percent: pct, Of: from, Up: up}
	if minStep {
		b.AtLeast = s.MinStepUp
	}
	if s.Period > 0 {
		b.Period = s.Period
	}
	return v, []plan.Bound{b}
}
