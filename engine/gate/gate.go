// Package gate decides, for every change a plan proposes, whether it is
// applied now or held, and why, with the numbers. A common core holds for
// every kind — mode, pause, hard caps, ownership and GitOps conflicts —
// and each kind brings a Policy with its own persisted state (NFR's
// stability, cooldown and bounded step; Schedule's behavior policies). When
// several specs contribute to one attribute, an increase follows the
// fastest contributor's policy and a decrease the slowest's.
package gate

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/plan"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/engine/values"
)

// SetpointManager is the field manager setpoint writes as.
const SetpointManager = "setpoint"

// Rules are one contributing spec's rules for one attribute.
type Rules struct {
	// Spec is the contributor (kind/namespace/name).
	Spec        string
	Mode        spec.Mode
	Paused      bool
	PauseReason string
	// Cap is a hard ceiling (maxReplicas, maxMemory); invalid for none.
	Cap      values.Value
	CapField string
	// TakeOverFrom lists the GitOps managers the spec lets setpoint take
	// fields from.
	TakeOverFrom []string
	// Policy is the kind's own rules; nil lets every change through
	// unbounded (restoring a user's value).
	Policy Policy
	// NoDelete, when set, holds the deletion of a whole object and says
	// why (the spec has not enabled deletes).
	NoDelete string
}

// Policy is one kind's rules, with the state it persists per attribute.
type Policy interface {
	// Name keys the policy's state in the attribute's entry.
	Name() string
	// Evaluate runs the rules on one change. prev is what the policy saved
	// for this attribute last time (nil at first); it returns what to save
	// now (nil: nothing).
	Evaluate(in Input, prev json.RawMessage) (Verdict, json.RawMessage)
	// Coherent checks the values a group of coupled attributes would have
	// after this plan (value gives each path's value: the new one or the
	// current one); an error holds the whole group.
	Coherent(group []addrs.Path, value func(addrs.Path) (values.Value, bool)) error
}

// Input is one attribute's proposed move as a policy sees it.
type Input struct {
	Now        time.Time
	Current    values.Value
	HasCurrent bool
	// Desired is the combined desired value after the caps; Wanted the
	// same before them (what a stability window tracks).
	Desired values.Value
	Wanted  values.Value
	// Applied is setpoint's last write of the attribute.
	Applied *state.Applied
}

// Verdict is a policy's answer.
type Verdict struct {
	// Value is what it would write now (bounded).
	Value  values.Value
	Bounds []plan.Bound
	// Hold is why not now; nil lets it through.
	Hold *plan.Hold
	// Due is when the hold ends (zero: not known).
	Due time.Time
}

// Change is one attribute's proposed move.
type Change struct {
	Current    values.Value
	HasCurrent bool // false: the attribute or object does not exist yet
	Desired    values.Value
	Manager    string // who owns the field now
}

// Decision is the gate's answer for one attribute.
type Decision struct {
	Apply bool
	// Value is what would be written: Desired after the cap and the step.
	Value values.Value
	// Hold is why not; nil when applied.
	Hold   *plan.Hold
	Bounds []plan.Bound
	// Force: the apply takes the field from another manager.
	Force bool
	// Due is when a held change may pass (zero: not known).
	Due time.Time
}

// MaxPolicyState bounds what one policy keeps for one attribute: state is
// sharded per object and must stay far below an API object's 1 MiB.
const MaxPolicyState = 16 << 10

// Evaluate runs the gate on one change at now. rules has one entry per
// contributing spec; primary is the index of the one whose intent decided
// the desired value (its mode and takeovers apply). Each policy's new
// state is written into e.Policy: the state tracks the desired value in
// every mode, so turning enforcement on finds the history there.
func Evaluate(now time.Time, gitops []string, rules []Rules, primary int, c Change, e *state.Entry) Decision {
	var d Decision
	d.Value = c.Desired
	// Caps: the tightest of every contributor's.
	for _, r := range rules {
		if r.Cap.IsValid() && d.Value.Compare(r.Cap) > 0 {
			d.Value = r.Cap
			d.Bounds = append(d.Bounds[:0], plan.Bound{Kind: plan.BoundCap, Cap: r.Cap, Field: r.CapField})
		}
	}
	in := Input{Now: now, Current: c.Current, HasCurrent: c.HasCurrent, Desired: d.Value, Wanted: c.Desired, Applied: e.Applied}
	up := !c.HasCurrent || d.Value.Compare(c.Current) > 0

	var verdicts []Verdict
	var oversize *plan.Hold
	seen := map[string]bool{}
	for _, r := range rules {
		if r.Policy == nil {
			// No policy lets the change through unbounded: it counts in
			// the merge as the fastest contributor.
			verdicts = append(verdicts, Verdict{Value: d.Value})
			continue
		}
		if seen[r.Policy.Name()] {
			continue
		}
		name := r.Policy.Name()
		seen[name] = true
		v, next := r.Policy.Evaluate(in, e.Policy[name])
		if len(next) > MaxPolicyState {
			// Keep the last good state and hold: a policy that outgrows its
			// bound is a bug to see, not a shard to bloat.
			oversize = &plan.Hold{Kind: plan.HoldPolicy, Policy: name, Detail: fmt.Sprintf("its state for this attribute grew to %d bytes, over the bound of %d", len(next), MaxPolicyState)}
			continue
		}
		if next == nil {
			delete(e.Policy, name)
		} else {
			if e.Policy == nil {
				e.Policy = map[string]json.RawMessage{}
			}
			e.Policy[name] = next
		}
		verdicts = append(verdicts, v)
	}
	policyHold, due := merge(verdicts, up, &d)
	if oversize != nil {
		// Whichever way it moves: the policy's rules cannot be kept.
		policyHold, due = oversize, time.Time{}
	}

	taking := c.Manager != "" && c.Manager != SetpointManager
	switch core := Core(gitops, rules, primary, c.Manager); {
	case core != nil:
		d.Hold = core
	case policyHold != nil:
		d.Hold, d.Due = policyHold, due
	default:
		d.Apply = true
		if taking {
			d.Force = true
			d.Bounds = append(d.Bounds, plan.Bound{Kind: plan.BoundTakeover, Manager: c.Manager})
		}
	}
	return d
}

// merge combines the contributors' verdicts: an increase passes when any
// policy lets it through, at the largest value they allow (the fastest
// contributor); a decrease only when every policy does, at the largest
// value (the slowest).
func merge(vs []Verdict, up bool, d *Decision) (*plan.Hold, time.Time) {
	if len(vs) == 0 {
		return nil, time.Time{}
	}
	var pass []Verdict
	var held []Verdict
	for _, v := range vs {
		if v.Hold == nil {
			pass = append(pass, v)
		} else {
			held = append(held, v)
		}
	}
	pick := func(from []Verdict) Verdict {
		best := from[0]
		for _, v := range from[1:] {
			if v.Value.Compare(best.Value) > 0 {
				best = v
			}
		}
		return best
	}
	if up && len(pass) > 0 || !up && len(held) == 0 {
		v := pick(pass)
		d.Value = v.Value
		d.Bounds = append(d.Bounds, v.Bounds...)
		return nil, time.Time{}
	}
	// Held: the value shown is what the policy holding it would write.
	v := pick(held)
	d.Value = v.Value
	d.Bounds = append(d.Bounds, v.Bounds...)
	due := v.Due
	for _, h := range held {
		if h.Due.IsZero() {
			continue
		}
		// An increase waits for the first hold to end, a decrease for the
		// last.
		if due.IsZero() || up && h.Due.Before(due) || !up && h.Due.After(due) {
			due = h.Due
		}
	}
	return v.Hold, due
}

// Core is the common core's hold for every kind, before any policy: a
// paused contributor, the primary's mode other than enforce, or a field
// (or object) a GitOps controller manages that the spec does not take
// over. nil lets the change on to the policies. A deletion has no value
// to gate and goes through this alone.
func Core(gitops []string, rules []Rules, primary int, manager string) *plan.Hold {
	p := rules[primary]
	taking := manager != "" && manager != SetpointManager
	switch {
	case paused(rules) != nil:
		return &plan.Hold{Kind: plan.HoldPaused, Detail: paused(rules).PauseReason}
	case p.Mode != spec.ModeEnforce:
		return &plan.Hold{Kind: plan.HoldMode, Mode: string(p.Mode)}
	case taking && slices.Contains(gitops, manager) && !slices.Contains(p.TakeOverFrom, manager):
		return &plan.Hold{Kind: plan.HoldConflict, Manager: manager}
	}
	return nil
}

// paused returns the first contributor that is paused.
func paused(rules []Rules) *Rules {
	for i := range rules {
		if rules[i].Paused {
			return &rules[i]
		}
	}
	return nil
}
