package engine

import (
	"slices"
	"testing"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/gate"
	"github.com/setpoint-dev/setpoint/engine/intent"
	"github.com/setpoint-dev/setpoint/engine/plan"
	"github.com/setpoint-dev/setpoint/engine/state"
)

// chain specs read the objects named in their metadata labels.
type chainDoc struct{ spec.Header }

type chainDecider struct{}

func (chainDecider) Reads(doc spec.Document, def string) []addrs.Object {
	var out []addrs.Object
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range doc.Head().Metadata.Labels {
			if !yield(k) {
				return
			}
		}
	}) {
		out = append(out, addrs.Object{Provider: def, Kind: "Thing", Name: name})
	}
	return out
}

func (chainDecider) Decide(*Tick, spec.Document, []addrs.Object, Observation, *state.State) ([]intent.Intent, []plan.Note, []plan.Note) {
	return nil, nil, nil
}

func (chainDecider) Rules(spec.Document, []addrs.Object, intent.Dimension, Observation) gate.Rules {
	return gate.Rules{}
}

func init() { Register("Chain", chainDecider{}) }

func chain(name string, reads ...string) spec.Document {
	d := &chainDoc{}
	d.Kind, d.Metadata.Name, d.Metadata.Labels = "Chain", name, map[string]string{}
	for _, r := range reads {
		d.Metadata.Labels[r] = ""
	}
	return d
}

// TestFocusIsTransitive: a spec is planned with every spec that shares an
// object with it, and theirs, transitively — and with nothing else.
func TestFocusIsTransitive(t *testing.T) {
	e := &Engine{Specs: []spec.Document{
		chain("a", "x"), chain("b", "x", "y"), chain("c", "y", "z"), chain("d", "w"),
	}}
	ids := func(focus []string) []string {
		ds, _ := e.specs(focus)
		var out []string
		for _, d := range ds {
			out = append(out, d.id)
		}
		return out
	}
	if got := ids([]string{"Chain//a"}); !slices.Equal(got, []string{"Chain//a", "Chain//b", "Chain//c"}) {
		t.Fatalf("a shares x with b, b shares y with c: %v", got)
	}
	if got := ids([]string{"Chain//d"}); !slices.Equal(got, []string{"Chain//d"}) {
		t.Fatalf("d shares nothing: %v", got)
	}
	if got := ids(nil); len(got) != 4 {
		t.Fatalf("no focus is everything: %v", got)
	}
	if got := ids([]string{"Chain//gone"}); len(got) != 0 {
		t.Fatalf("a removed spec plans nothing: %v", got)
	}
}

func TestReaders(t *testing.T) {
	e := &Engine{Specs: []spec.Document{chain("a", "x"), chain("b", "x", "y"), chain("c", "z")}}
	if got := e.Readers(addrs.Object{Kind: "Thing", Name: "x"}); !slices.Equal(got, []string{"Chain//a", "Chain//b"}) {
		t.Fatalf("readers of x: %v", got)
	}
	if got := e.Readers(addrs.Object{Kind: "Thing", Name: "nope"}); len(got) != 0 {
		t.Fatalf("readers of nothing: %v", got)
	}
}
