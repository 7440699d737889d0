package engine

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/diag"
	"github.com/setpoint-dev/setpoint/engine/gate"
	"github.com/setpoint-dev/setpoint/engine/intent"
	"github.com/setpoint-dev/setpoint/engine/plan"
	"github.com/setpoint-dev/setpoint/engine/state"
)

// maxRepairText bounds a provider's why (it may quote the object).
const maxRepairText = 300

// repairs plans an apply of every object whose provider says an apply of
// it was cut off midway (providers.Object.Repair), so the provider is
// handed the object's change and finishes what was left. A process killed
// between two steps of an apply leaves nothing for the diff to see (the
// values are right), so without this the object would stay as the crash
// left it. The change names one field setpoint owns there and the spec
// that decides it; it moves nothing and takes no field (the apply carries
// what setpoint owns, as every apply does), and the spec's common rules
// hold it as they would any change (paused, not enforcing, a GitOps
// manager). An object with a change planned is finished by that change's
// apply (so this runs after the dry run, which may have held it), and
// one with a release by the release's.
func (e *Engine) repairs(p *plan.Plan, st *state.State, obs Observation, intents []intent.Intent, bySpec map[string]decided, gitops []string) {
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
		why := diag.Cut(o.Repair, maxRepairText)
		c, it, ok := repairOf(a, why, st, intents)
		if !ok {
			p.Notes = append(p.Notes, plan.Note{Severity: diag.Warning,
				Message: fmt.Sprintf("%s: %s; no spec decides a field setpoint owns there, to apply it again with: mend it by hand", a, why)})
			continue
		}
		if cur, has := obs.Value(addrs.Attr{Object: a, Path: c.Attribute}, c.Value.Type()); has {
			c.From, c.To = cur.String(), cur.String()
		}
		sp := bySpec[it.Source]
		r := sp.decider.Rules(sp.doc, sp.reads, it.Dimension, obs)
		r.Spec = it.Source
		if hold := gate.Core(gitops, []gate.Rules{r}, 0, o.Managers[c.Attribute]); hold != nil {
			c.Held = hold
			p.Held = append(p.Held, c)
			continue
		}
		p.Changes = append(p.Changes, c)
	}
}

// repairOf is the repair change of object a: the first (by path) of the
// fields setpoint has applied there, not since handed back, that a spec
// decides now; and that spec's intent.
func repairOf(a addrs.Object, why string, st *state.State, intents []intent.Intent) (plan.Change, intent.Intent, bool) {
	so, ok := st.Object(a)
	if !ok {
		return plan.Change{}, intent.Intent{}, false
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
		i := slices.IndexFunc(intents, func(it intent.Intent) bool { return it.Attr == addrs.Attr{Object: a, Path: path} })
		if i < 0 {
			continue
		}
		it := intents[i]
		v := en.Applied.Value
		return plan.Change{Address: a, Attribute: path, Action: action.Update, Repair: true, Dimension: string(it.Dimension),
			From: v.String(), To: v.String(), Value: v, By: slices.Clone(en.Applied.By),
			Spec: it.Source, SpecPos: it.SourcePos.String(), Reason: "repair: " + why}, it, true
	}
	return plan.Change{}, intent.Intent{}, false
}
