package engine

import (
	"fmt"
	"slices"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/intent"
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
