// Package gate decides, for every change a plan proposes, whether it is
// applied now or held, and why, with the numbers: modes, pause, hard caps,
// ownership, cooldown, stability and the bounded step all live here, for
// every kind.
package gate

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/intent"
	"github.com/setpoint-dev/setpoint/engine/state"
)

// SetpointManager is the field manager setpoint writes as.
const SetpointManager = "setpoint"

// Params are the rules for one dimension of one spec.
type Params struct {
	Mode        spec.Mode
	Paused      bool
	PauseReason string
	// Stability: every recommendation since the window opened stays within
	// Tolerance (a fraction, at least one unit for counts) of the one that
	// opened it for this long. Zero disables it.
	Stability time.Duration
	Tolerance float64
	Cooldown  time.Duration
	// MaxStep is the bounded step as a fraction of the current value
	// (replicas: at least 1; memory: rounded to 16Mi toward the current).
	MaxStep float64
	// Cap is a hard ceiling (maxReplicas, maxMemory), 0 for none.
	Cap      int64
	CapField string
	// GitOps managers, and those of them the spec lets setpoint take from.
	GitOps       []string
	TakeOverFrom []string
}

// Change is one attribute's proposed move.
type Change struct {
	Unit       intent.Unit
	Current    int64
	HasCurrent bool // false: the attribute or object does not exist yet
	Desired    int64
	Manager    string // who owns the field now
}

// Decision is the gate's answer.
type Decision struct {
	Apply bool
	// Value is what would be written: Desired after the cap and the step.
	Value int64
	// Held is why not, with numbers; empty when applied.
	Held string
	// Conflict marks a hold caused by ownership.
	Conflict bool
	// Notes explain how Value differs from Desired and whose field is taken.
	Notes []string
	// Window is the stability window after this evaluation (to save).
	Window *state.Window
}

// Evaluate runs the gate on one change at now. e is the attribute's state
// (its last apply and open window); Evaluate does not modify it.
func Evaluate(now time.Time, p Params, c Change, e *state.Entry) Decision {
	var d Decision
	// The stability window tracks the desired value, whatever the mode, so
	// turning enforcement on finds the history there. During a cooldown no
	// window is open; the first evaluation after it opens a fresh one.
	inCooldown := false
	var coolLeft time.Duration
	if e != nil && e.Applied != nil && p.Cooldown > 0 {
		if since := now.Sub(e.Applied.At); since < p.Cooldown {
			inCooldown, coolLeft = true, since
		}
	}
	if !inCooldown {
		d.Window = track(now, p, c, e)
	}

	d.Value = c.Desired
	if p.Cap > 0 && d.Value > p.Cap {
		d.Value = p.Cap
		d.Notes = append(d.Notes, fmt.Sprintf("capped at %s by %s", intent.Format(p.Cap, c.Unit), p.CapField))
	}
	if c.HasCurrent {
		v, note := Step(c.Unit, c.Current, d.Value, p.MaxStep)
		if v != d.Value {
			d.Notes = append(d.Notes, note)
		}
		d.Value = v
	}
	taking := c.Manager != "" && c.Manager != SetpointManager
	switch {
	case p.Paused:
		d.Held = "paused (" + p.PauseReason + ")"
	case p.Mode != spec.ModeEnforce:
		d.Held = string(p.Mode) + " mode"
	case taking && slices.Contains(p.GitOps, c.Manager) && !slices.Contains(p.TakeOverFrom, c.Manager):
		d.Held = fmt.Sprintf("conflict: the field is managed by %s, a GitOps controller; list it under takeOverFrom to let setpoint take it", c.Manager)
		d.Conflict = true
	case inCooldown:
		d.Held = fmt.Sprintf("cooldown %d s of %d s since the last apply", int(coolLeft.Seconds()), int(p.Cooldown.Seconds()))
	case p.Stability > 0 && (d.Window == nil || now.Sub(d.Window.OpenedAt) < p.Stability):
		stable := time.Duration(0)
		if d.Window != nil {
			stable = now.Sub(d.Window.OpenedAt)
		}
		d.Held = fmt.Sprintf("stable %d s of %d s", int(stable.Seconds()), int(p.Stability.Seconds()))
	default:
		d.Apply = true
		if taking {
			d.Notes = append(d.Notes, "takes the field from "+c.Manager)
		}
	}
	return d
}

// track updates the stability window with a new desired value: a value
// outside the tolerance of the one that opened the window reopens it.
func track(now time.Time, p Params, c Change, e *state.Entry) *state.Window {
	if e != nil && e.Window != nil && Within(c.Unit, e.Window.Anchor, c.Desired, p.Tolerance) {
		w := *e.Window
		return &w
	}
	return &state.Window{OpenedAt: now, Anchor: c.Desired}
}

// Within reports whether v is within tolerance of anchor: a fraction of
// the anchor, and for counts at least one.
func Within(u intent.Unit, anchor, v int64, tolerance float64) bool {
	tol := tolerance * math.Abs(float64(anchor))
	if u == intent.Count {
		tol = max(tol, 1)
	}
	return math.Abs(float64(v-anchor)) <= tol+1e-9
}

const mi16 = 16 << 20

// Step bounds one move from cur toward want. Replicas: |Δ| ≤ max(1,
// floor(pct × cur)). Memory: |Δ| ≤ pct × cur, the bounded value rounded to
// 16Mi toward cur (so the bound always holds), or unrounded when no 16Mi
// multiple lies strictly between (only below 64Mi at 25%).
func Step(u intent.Unit, cur, want int64, pct float64) (int64, string) {
	if pct <= 0 || want == cur {
		return want, ""
	}
	delta := want - cur
	switch u {
	case intent.Count:
		maxD := max(int64(1), int64(math.Floor(pct*float64(cur)+1e-9)))
		if abs(delta) <= maxD {
			return want, ""
		}
		sign := "+"
		v := cur + maxD
		if delta < 0 {
			sign, v = "-", cur-maxD
		}
		return v, fmt.Sprintf("bounded to %s%s%% of %d, at least 1", sign, pctString(pct), cur)
	default:
		maxD := pct * float64(cur)
		if float64(abs(delta)) <= maxD+1e-6 {
			return want, ""
		}
		var v int64
		if delta > 0 {
			v = int64(math.Floor((float64(cur)+maxD)/mi16)) * mi16
			if v <= cur {
				v = cur + int64(maxD)
			}
		} else {
			v = int64(math.Ceil((float64(cur)-maxD)/mi16)) * mi16
			if v >= cur {
				v = cur - int64(maxD)
			}
		}
		return v, fmt.Sprintf("step bounded to %s%% of %s", pctString(pct), intent.Format(cur, intent.Bytes))
	}
}

func pctString(p float64) string { return fmt.Sprintf("%g", p*100) }

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
