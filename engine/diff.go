package engine

import (
	"fmt"
	"sort"

	"github.com/setpoint-dev/setpoint/engine/intent"
	"github.com/setpoint-dev/setpoint/providers"
)

// Desired is the combined wish of every intent on one attribute.
type Desired struct {
	Address   providers.Address
	Attribute string
	Unit      intent.Unit
	Dimension intent.Dimension
	// Value is the attribute's desired value; Set is false when nothing
	// asks for a change (only an upper bound the current value is under).
	Value int64
	Set   bool
	// Primary is the intent whose numbers explain Value.
	Primary intent.Intent
	// Contributors are all intents, when there is more than one spec.
	Contributors []intent.Intent
	// Conflict is set when two specs want different exact values: nothing
	// is applied and the plan names both.
	Conflict string
	Create   *intent.Create
}

// Combine merges intents per attribute: lower bounds by max, upper bounds
// by min, an exact value clamped into the bounds. The desired value is the
// exact value if there is one, else the tightest lower bound (so a bound
// setpoint raised can come back down); an upper bound alone only lowers a
// current value above it. Never last-writer-wins.
func Combine(intents []intent.Intent, current func(providers.Address, string, intent.Unit) (int64, bool)) []Desired {
	type group struct {
		its []intent.Intent
	}
	groups := map[string]*group{}
	var order []string
	for _, it := range intents {
		k := it.Address.String() + " " + it.Attribute
		g, ok := groups[k]
		if !ok {
			g = &group{}
			groups[k] = g
			order = append(order, k)
		}
		g.its = append(g.its, it)
	}
	sort.Strings(order)
	out := make([]Desired, 0, len(order))
	for _, k := range order {
		its := groups[k].its
		d := Desired{Address: its[0].Address, Attribute: its[0].Attribute, Unit: its[0].Unit, Dimension: its[0].Dimension}
		var lower, upper, exact *intent.Intent
		for i := range its {
			it := &its[i]
			if it.Create != nil {
				d.Create = it.Create
			}
			switch it.Kind {
			case intent.LowerBound:
				if lower == nil || it.Value > lower.Value {
					lower = it
				}
			case intent.UpperBound:
				if upper == nil || it.Value < upper.Value {
					upper = it
				}
			case intent.Exact:
				if exact != nil && exact.Value != it.Value {
					d.Conflict = fmt.Sprintf("two specs want exact values: %s from %s (%s) and %s from %s (%s)",
						intent.Format(exact.Value, exact.Unit), exact.Source, exact.SourcePos,
						intent.Format(it.Value, it.Unit), it.Source, it.SourcePos)
				}
				if exact == nil {
					exact = it
				}
			}
		}
		if specs := distinctSources(its); specs > 1 {
			d.Contributors = its
		}
		cur, has := current(d.Address, d.Attribute, d.Unit)
		switch {
		case exact != nil:
			d.Primary, d.Value, d.Set = *exact, exact.Value, true
			if lower != nil && d.Value < lower.Value {
				d.Value = lower.Value
			}
			if upper != nil && d.Value > upper.Value {
				d.Value = upper.Value
			}
		case lower != nil:
			d.Primary, d.Value, d.Set = *lower, lower.Value, true
			if upper != nil && d.Value > upper.Value {
				d.Value = upper.Value
				d.Primary.Rationale += fmt.Sprintf("; held at %d by %s", upper.Value, upper.Rationale)
			}
		case upper != nil && has && cur > upper.Value:
			d.Primary, d.Value, d.Set = *upper, upper.Value, true
		default:
			d.Primary = its[0]
		}
		out = append(out, d)
	}
	return out
}

func distinctSources(its []intent.Intent) int {
	seen := map[string]bool{}
	for _, it := range its {
		seen[it.Source] = true
	}
	return len(seen)
}
