package engine

import (
	"fmt"
	"slices"
	"sort"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/intent"
	"github.com/setpoint-dev/setpoint/engine/values"
)

// Desired is the combined wish of every intent on one attribute.
type Desired struct {
	Attr      addrs.Attr
	Dimension intent.Dimension
	// Value is the attribute's desired value; Set is false when nothing
	// asks for a change (only an upper bound the current value is under).
	Value values.Value
	Set   bool
	// Primary is the intent whose numbers explain Value.
	Primary intent.Intent
	// Intents are every intent that counts, Contributors them when more
	// than one spec contributes (for the plan).
	Intents      []intent.Intent
	Contributors []intent.Intent
	// Conflict is set when two specs want different exact values: nothing
	// is applied and the plan names both.
	Conflict string
	Create   *intent.Create
}

// Specs lists the distinct specs whose intents count, in order.
func (d Desired) Specs() []string {
	var out []string
	seen := map[string]bool{}
	for _, it := range d.Intents {
		if !seen[it.Source] {
			seen[it.Source] = true
			out = append(out, it.Source)
		}
	}
	return out
}

// Combine merges intents per attribute: lower bounds by max, upper bounds
// by min, an exact value clamped into the bounds. The desired value is the
// exact value if there is one, else the tightest lower bound (so a bound
// setpoint raised can come back down); an upper bound alone only lowers a
// current value above it. A restore (enforcement turned off) counts only
// when no other intent is on the attribute. Never last-writer-wins.
func Combine(intents []intent.Intent, current func(addrs.Attr, values.Type) (values.Value, bool)) []Desired {
	groups := map[addrs.Attr][]intent.Intent{}
	var order []addrs.Attr
	for _, it := range intents {
		if _, ok := groups[it.Attr]; !ok {
			order = append(order, it.Attr)
		}
		groups[it.Attr] = append(groups[it.Attr], it)
	}
	// Sort by the printed address and path, printed once each.
	type keyed struct {
		k string
		a addrs.Attr
	}
	ks := make([]keyed, len(order))
	for i, a := range order {
		ks[i] = keyed{a.Object.String() + "\x00" + a.Path.String(), a}
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i].k < ks[j].k })
	for i := range ks {
		order[i] = ks[i].a
	}
	out := make([]Desired, 0, len(order))
	for _, k := range order {
		its := groups[k]
		var live []intent.Intent
		for _, it := range its {
			if !it.Restore {
				live = append(live, it)
			}
		}
		if len(live) > 0 {
			its = live
		}
		d := Desired{Attr: k, Dimension: its[0].Dimension, Intents: its}
		var lower, upper, exact *intent.Intent
		for i := range its {
			it := &its[i]
			if it.Create != nil {
				d.Create = it.Create
			}
			switch it.Kind {
			case intent.LowerBound:
				if lower == nil || it.Value.Compare(lower.Value) > 0 {
					lower = it
				}
			case intent.UpperBound:
				if upper == nil || it.Value.Compare(upper.Value) < 0 {
					upper = it
				}
			case intent.Exact:
				if exact != nil && exact.Value != it.Value {
					d.Conflict = fmt.Sprintf("%s from %s (%s) and %s from %s (%s)",
						exact.Value, exact.Source, exact.SourcePos, it.Value, it.Source, it.SourcePos)
				}
				if exact == nil {
					exact = it
				}
			}
		}
		if len(d.Specs()) > 1 {
			d.Contributors = its
		}
		if exact != nil && exact.Sleep && lower != nil {
			// The target sleeps: other specs' minimums do not hold it up,
			// and their gate rules do not slow the sleep down.
			lower = nil
			kept := make([]intent.Intent, 0, len(its))
			for i, it := range its {
				if it.Kind != intent.LowerBound || it.Source == exact.Source {
					kept = append(kept, it)
					continue
				}
				its[i].Rationale += " (yields: " + exact.Source + " puts the target to sleep)"
			}
			d.Intents = kept
		}
		if del := slices.IndexFunc(its, func(it intent.Intent) bool { return it.Delete }); del >= 0 {
			// A deletion is of the whole object: no value to combine.
			d.Primary, d.Set = its[del], true
			out = append(out, d)
			continue
		}
		cur, has := current(k, its[0].Value.Type())
		switch {
		case exact != nil:
			d.Primary, d.Value, d.Set = *exact, exact.Value, true
			if lower != nil && d.Value.Compare(lower.Value) < 0 {
				d.Value = lower.Value
				d.Primary.Rationale += fmt.Sprintf("; raised to %s by %s's lower bound", lower.Value, lower.Source)
			}
			if upper != nil && d.Value.Compare(upper.Value) > 0 {
				d.Value = upper.Value
				d.Primary.Rationale += fmt.Sprintf("; lowered to %s by %s's upper bound", upper.Value, upper.Source)
			}
		case lower != nil:
			d.Primary, d.Value, d.Set = *lower, lower.Value, true
			if upper != nil && d.Value.Compare(upper.Value) > 0 {
				d.Value = upper.Value
				d.Primary.Rationale += fmt.Sprintf("; held at %s by %s", upper.Value, upper.Rationale)
			}
		case upper != nil && has && cur.Compare(upper.Value) > 0:
			d.Primary, d.Value, d.Set = *upper, upper.Value, true
		default:
			d.Primary = its[0]
		}
		out = append(out, d)
	}
	return out
}
