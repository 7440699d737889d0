package engine

import (
	"context"
	"fmt"
	"github.com/setpoint-dev/setpoint/cue/spec"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/diag"
	"github.com/setpoint-dev/setpoint/engine/gate"
	"github.com/setpoint-dev/setpoint/engine/plan"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
)

// The intent journal makes apply crash-consistent. Before the providers
// are called, Journal marks every attribute a plan's changes touch with
// what is about to be done (state.Pending), and the caller saves the state.
// Apply replaces each mark with the record of what was done. A process
// killed in between leaves the marks; the next Plan settles each one from
// what the provider reads back: a value setpoint wrote (its field manager,
// the provider's ownership mark) is recorded as applied, a field no longer
// setpoint's as released, a deleted object as gone; anything else did not
// happen and is planned again. So what setpoint created is recognised, not
// adopted as the user's, and a release or a delete is never lost.

// Journal marks the attributes p's changes are about to touch.
func Journal(p *plan.Plan, st *state.State, now time.Time) {
	for _, c := range p.Changes {
		if c.Repair {
			// It moves nothing: cut off again, the provider says so again.
			continue
		}
		pd := &state.Pending{Action: intentOf(c), Value: c.Value, By: slices.Clone(c.By), At: now}
		if c.Action == action.Delete {
			// The whole object: every attribute setpoint knows of it.
			pd.Value = values.Value{}
			if o, ok := st.Object(c.Address); ok {
				for _, en := range o.Attrs {
					en.Pending = pd
				}
			}
			continue
		}
		if c.Action == action.Create && len(c.Create) > 0 {
			pd.Create = map[string]values.Value{}
			for k, v := range c.Create {
				pd.Create[k.String()] = v
			}
		}
		st.Entry(addrs.Attr{Object: c.Address, Path: c.Attribute}).Pending = pd
	}
}

// intentOf is the journal's action for a change.
func intentOf(c plan.Change) string {
	switch {
	case c.Action == action.Delete:
		return state.IntentDelete
	case c.Release:
		return state.IntentRelease
	case c.Restore:
		return state.IntentRestore
	}
	return state.IntentApply
}

// pendingObjects lists the objects with a journaled intent.
func pendingObjects(st *state.State) []addrs.Object {
	var out []addrs.Object
	st.Each(func(o addrs.Object, so *state.Object) {
		for _, en := range so.Attrs {
			if en != nil && en.Pending != nil {
				out = append(out, o)
				break
			}
		}
	})
	slices.SortFunc(out, func(a, b addrs.Object) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// settle resolves the journal left by an apply that did not finish, from
// what the providers read back (obs, plus a read of the objects no spec
// reads now). It returns notes for the plan: what it found applied.
func (e *Engine) settle(ctx context.Context, now time.Time, st *state.State, obs Observation) []plan.Note {
	pending := pendingObjects(st)
	if len(pending) == 0 {
		return nil
	}
	seen := map[addrs.Object]providers.Object{}
	failed := map[addrs.Object]string{}
	byProv := map[string][]addrs.Object{}
	for _, o := range pending {
		if x, ok := obs.Objects[o]; ok {
			seen[o] = x
			continue
		}
		if why, ok := obs.Failed[o]; ok {
			failed[o] = why
			continue
		}
		byProv[o.Provider] = append(byProv[o.Provider], o)
	}
	// What no spec reads now (a release's object, a deleted one): read as
	// observe reads.
	e.read(ctx, now, byProv, seen, failed)
	pos := map[string]spec.Pos{}
	for _, d := range e.Specs {
		h := d.Head()
		pos[h.ID()] = h.Src.Pos
	}
	var notes []plan.Note
	for _, o := range pending {
		x, ok := seen[o]
		if why, bad := failed[o]; !ok || bad {
			notes = append(notes, plan.Note{Severity: diag.Warning, Message: fmt.Sprintf("%s: an apply that was cut off cannot be settled yet (%s); nothing of it is changed until it can", o, why)})
			continue
		}
		so, _ := st.Object(o)
		for _, k := range slices.Sorted(maps.Keys(so.Attrs)) {
			en := so.Attrs[k]
			if en == nil || en.Pending == nil {
				continue
			}
			spec := ""
			if len(en.Pending.By) > 0 {
				spec = en.Pending.By[0]
			}
			if msg := settleEntry(st, o, k, en, x); msg != "" {
				notes = append(notes, plan.Note{Severity: diag.Warning, Spec: spec, Pos: pos[spec], Message: fmt.Sprintf("%s %s: %s", o, k, msg)})
			}
		}
	}
	return notes
}

// settleEntry settles one journaled attribute of o against what was read
// (x), and says what it found when the apply had happened.
func settleEntry(st *state.State, o addrs.Object, k string, en *state.Entry, x providers.Object) string {
	pd := en.Pending
	en.Pending = nil
	path, err := addrs.ParsePath(k)
	if err != nil {
		return ""
	}
	cur, has := x.Attributes[path]
	ours := x.Exists && x.Managers[path] == gate.SetpointManager
	switch pd.Action {
	case state.IntentApply:
		if !ours || !has || cur != pd.Value {
			return "" // it did not happen: the plan does it again
		}
		en.Applied = &state.Applied{Value: pd.Value, At: pd.At, By: pd.By}
		for ck, v := range pd.Create {
			cp, err := addrs.ParsePath(ck)
			if ck == k || err != nil {
				continue
			}
			other := st.Entry(addrs.Attr{Object: o, Path: cp})
			if other.Applied == nil {
				other.Applied = &state.Applied{Value: v, At: pd.At, By: pd.By}
			}
		}
		return fmt.Sprintf("an apply cut off before it was recorded had happened: %s is setpoint's (recorded as applied, not adopted)", brief(pd.Value))
	case state.IntentRelease:
		if x.Exists && x.Managers[path] == gate.SetpointManager {
			return "" // still setpoint's: the release is planned again
		}
		tombstone(en, pd.At)
		return "a release cut off before it was recorded had happened: recorded"
	case state.IntentRestore:
		// Done when the user's value reads back, whoever owns the field
		// now (a restore hands it back; a provider that wrote it as
		// setpoint's before it gave it up still restored it). Judged "did
		// not happen", the stale applied record would be carried into the
		// object's next apply and cut the value again.
		if !x.Exists || !has || cur != pd.Value {
			return ""
		}
		if ours {
			// Still setpoint's: dropped from the state, the next apply
			// that does not name it would remove it. The record says what
			// the world has, the user's value.
			en.Applied = &state.Applied{Value: pd.Value, At: pd.At, By: pd.By}
			return fmt.Sprintf("a restore cut off before it was recorded had happened: %s is back, still setpoint's (recorded as applied)", brief(pd.Value))
		}
		st.Delete(addrs.Attr{Object: o, Path: path})
		return "a restore cut off before it was recorded had happened: recorded"
	case state.IntentDelete:
		if x.Exists {
			return ""
		}
		st.Delete(addrs.Attr{Object: o, Path: path})
		return "a delete cut off before it was recorded had happened: recorded"
	}
	return ""
}

// brief shortens a value for a message (a whole config is long).
func brief(v values.Value) string {
	s := v.String()
	if len(s) > 60 {
		return "the value it wanted (" + s[:40] + "…)"
	}
	return s
}

// Journaled says which of p's changes have their journal mark in durable
// (the state as the backend holds it after a save that failed in part):
// only those may be applied, since a kill after the provider's apply would
// leave no mark to settle for the others.
func Journaled(p *plan.Plan, durable *state.State) (ok []bool) {
	ok = make([]bool, len(p.Changes))
	for i, c := range p.Changes {
		if c.Action == action.Delete {
			// Every attribute setpoint knows of the object must be marked
			// (none known: nothing to lose).
			so, has := durable.Object(c.Address)
			ok[i] = true
			if has {
				for _, en := range so.Attrs {
					if en != nil && (en.Pending == nil || en.Pending.Action != state.IntentDelete) {
						ok[i] = false
					}
				}
			}
			continue
		}
		if c.Repair {
			ok[i] = true // never journaled (see Journal)
			continue
		}
		en, has := durable.Lookup(addrs.Attr{Object: c.Address, Path: c.Attribute})
		ok[i] = has && en.Pending != nil && en.Pending.Action == intentOf(c) && en.Pending.Value == c.Value
	}
	return ok
}
