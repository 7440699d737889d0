package engine

import (
	"fmt"
	"slices"
	"strings"

	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/intent"
	"github.com/setpoint-dev/setpoint/engine/plan"
	"github.com/setpoint-dev/setpoint/engine/state"
)

// A spec that disappears from the directory releases the fields it set,
// as Argo CD's prune safety would have it:
//   - the values stay: setpoint stops managing the fields (the provider
//     hands them back) and forgets them; nothing is restored. A user who
//     wants their values back turns enforcement off first (the plan then
//     restores them) and deletes the spec after;
//   - no object is ever deleted because a spec disappeared;
//   - while any spec file fails to load, nothing is released: a broken
//     spec cannot be told from a deleted one;
//   - when more than half of the specs the state knows vanish at once (an
//     empty or partial checkout), nothing is released until confirmed.

// releases adds to p a release of every field whose applied value was set
// only by specs no longer in force. With a focus (watch reconciling some
// keys), it runs only when a focused spec is gone.
//
// A field a live spec acts on in this plan (a spec renamed, or another
// taking over) is not released: the live spec's next apply takes it over
// in the state (Applied.By), and the user's value recorded at adoption
// stays.
func (e *Engine) releases(p *plan.Plan, st *state.State, focus []string, intents []intent.Intent) {
	live := map[string]bool{}
	for _, d := range e.Specs {
		live[d.Head().ID()] = true
	}
	wanted := map[addrs.Attr]bool{}
	for _, it := range intents {
		wanted[it.Attr] = true
	}
	if focus != nil && !slices.ContainsFunc(focus, func(id string) bool { return !live[id] }) {
		return
	}
	known, gone := map[string]bool{}, map[string]bool{}
	type orphan struct {
		attr addrs.Attr
		en   *state.Entry
	}
	var orphans []orphan
	for _, o := range st.Objects() {
		so, _ := st.Object(o)
		// In any order: the plan sorts its changes and holds.
		for k, en := range so.Attrs {
			if en == nil || en.Applied == nil || len(en.Applied.By) == 0 {
				continue
			}
			alive := false
			for _, id := range en.Applied.By {
				known[id] = true
				if live[id] {
					alive = true
				} else {
					gone[id] = true
				}
			}
			if alive {
				continue
			}
			path, err := addrs.ParsePath(k)
			if err != nil {
				// The apply of another change on the object reports it.
				continue
			}
			if wanted[addrs.Attr{Object: o, Path: path}] {
				continue
			}
			orphans = append(orphans, orphan{addrs.Attr{Object: o, Path: path}, en})
		}
	}
	if len(orphans) == 0 {
		return
	}
	var hold *plan.Hold
	switch {
	case e.Incomplete:
		hold = &plan.Hold{Kind: plan.HoldRelease, Detail: "some spec files do not load, and a spec that does not load cannot be told from a deleted one; fix them first"}
	case 2*len(gone) > len(known) && !e.ConfirmRelease:
		hold = &plan.Hold{Kind: plan.HoldRelease, Detail: fmt.Sprintf("%d of the %d specs setpoint applied for are gone at once (an empty checkout?); run with --confirm-release if they were deleted on purpose", len(gone), len(known))}
	}
	for _, or := range orphans {
		by := slices.Clone(or.en.Applied.By)
		v := or.en.Applied.Value
		c := plan.Change{
			Address: or.attr.Object, Attribute: or.attr.Path, Action: action.Update, Release: true,
			From: v.String(), To: v.String(), Value: v, By: by, Spec: by[0],
			Reason: fmt.Sprintf("%s gone: the field is released and keeps its value", strings.Join(by, ", ")),
			Held:   hold,
		}
		if hold != nil {
			p.Held = append(p.Held, c)
		} else {
			p.Changes = append(p.Changes, c)
		}
	}
}
