package engine

import (
	"fmt"
	"slices"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/intent"
	"github.com/setpoint-dev/setpoint/engine/plan"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/providers"
)

// Restores returns, for every attribute of objs that the spec id wrote
// (another spec's writes are its own) and whose dimension off reports as
// turned off, the user's value as an intent: turning enforcement off
// hands the workload back as it was. Every kind's decider uses it.
func Restores(id string, pos spec.Pos, objs []providers.Object, st *state.State, off func(addrs.Path) (intent.Dimension, bool)) []intent.Intent {
	var out []intent.Intent
	for _, o := range objs {
		if !o.Exists {
			continue
		}
		for attr := range o.Attributes {
			e, ok := st.Lookup(addrs.Attr{Object: o.Address, Path: attr})
			if !ok || e.User == nil || e.Applied == nil || !slices.Contains(e.Applied.By, id) {
				continue
			}
			dim, isOff := off(attr)
			if !isOff {
				continue
			}
			out = append(out, intent.Intent{Attr: addrs.Attr{Object: o.Address, Path: attr}, Kind: intent.Exact, Value: *e.User, Recommended: *e.User,
				Dimension: dim, Restore: true, Source: id, SourcePos: pos,
				Rationale: fmt.Sprintf("enforcement of %s is off: restoring the user's value %s", dim, *e.User)})
		}
	}
	return out
}

// adoptionOf is what a plan adopted of attr (entry as it left it).
func adoptionOf(attr addrs.Attr, en *state.Entry) plan.Adoption {
	a := plan.Adoption{Address: attr.Object, Attribute: attr.Path}
	if en.User != nil {
		u := *en.User
		a.User = &u
	}
	if en.Applied != nil {
		v := en.Applied.Value
		a.Own, a.OwnBy, a.OwnAt = &v, slices.Clone(en.Applied.By), en.Applied.At
	}
	return a
}

// Adopt records a saved plan's adoptions in st where st has no user value,
// no record of setpoint's and no journal mark for the attribute (a
// tombstone the plan read again is replaced, as the plan's adoption
// replaced it): the plan may have been made without saving (--read-only),
// and applying it must leave the state an apply leaves. Each adoption is
// a value the plan observed (plan.Load checks it), and the observations
// matched the world before this is called, so what it adopted is still
// what the world holds.
func Adopt(p *plan.Plan, st *state.State) {
	for _, a := range p.Adopted {
		attr := addrs.Attr{Object: a.Address, Path: a.Attribute}
		if en, ok := st.Lookup(attr); ok && (en.User != nil || en.Applied != nil || en.Pending != nil) {
			continue
		}
		en := st.Entry(attr)
		// A tombstone the plan read again is gone in its adoption.
		en.Released = nil
		if a.User != nil {
			u := *a.User
			en.User = &u
		}
		if a.Own != nil {
			en.Applied = &state.Applied{Value: *a.Own, At: a.OwnAt, By: slices.Clone(a.OwnBy)}
		}
	}
}
