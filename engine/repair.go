package engine

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/diag"
	"github.com/setpoint-dev/setpoint/engine/plan"
	"github.com/setpoint-dev/setpoint/engine/state"
)

// repairs plans an apply of every object whose provider says an apply of
// it was cut off midway (providers.Object.Repair): one attribute setpoint
// owns there, at the value it last applied, so the provider is handed the
// object's change and finishes what was left. A process killed between two
// steps of an apply leaves nothing for the diff to see (the values are
// right), so without this the object would stay as the crash left it. An
// object with a change already planned is finished by that change's apply.
func (e *Engine) repairs(p *plan.Plan, st *state.State, obs Observation) {
	planned := map[addrs.Object]bool{}
	for _, c := range p.Changes {
		planned[c.Address] = true
	}
	for _, a := range slices.SortedFunc(maps.Keys(obs.Objects), func(x, y addrs.Object) int { return strings.Compare(x.String(), y.String()) }) {
		o := obs.Objects[a]
		if o.Repair == "" || !o.Exists || planned[a] {
			continue
		}
		if _, failed := obs.Failed[a]; failed {
			continue
		}
		c, ok := repairOf(a, o.Repair, st)
		if !ok {
			p.Notes = append(p.Notes, plan.Note{Severity: diag.Warning,
				Message: fmt.Sprintf("%s: %s; setpoint owns no field there to apply it again with: mend it by hand", a, o.Repair)})
			continue
		}
		p.Changes = append(p.Changes, c)
	}
}

// repairOf is the repair change of object a: the first (by path) of the
// fields setpoint has applied there and not since handed back.
func repairOf(a addrs.Object, why string, st *state.State) (plan.Change, bool) {
	so, ok := st.Object(a)
	if !ok {
		return plan.Change{}, false
	}
	for _, k := range slices.Sorted(maps.Keys(so.Attrs)) {
		en := so.Attrs[k]
		if en == nil || en.Applied == nil || en.Pending != nil {
			continue
		}
		path, err := addrs.ParsePath(k)
		if err != nil {
			continue
		}
		v := en.Applied.Value
		by := slices.Clone(en.Applied.By)
		c := plan.Change{Address: a, Attribute: path, Action: action.Update, Repair: true,
			From: v.String(), To: v.String(), Value: v, By: by,
			Reason: "repair: " + why}
		if len(by) > 0 {
			c.Spec = by[0]
		}
		return c, true
	}
	return plan.Change{}, false
}
