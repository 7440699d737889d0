package engine

import (
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/intent"
	"github.com/setpoint-dev/setpoint/engine/values"
)

func restore(i intent.Intent) intent.Intent {
	i.Restore = true
	return i
}

var addr = addrs.Object{Provider: "sim", Kind: "Deployment", Namespace: "shop", Name: "a"}

func it(kind intent.Kind, v int64, src string) intent.Intent {
	return intent.Intent{Attr: addrs.Attr{Object: addr, Path: addrs.MustPath("spec.replicas")}, Kind: kind, Value: values.CountOf(v), Source: src, Rationale: src + " says"}
}

func TestCombine(t *testing.T) {
	cur := func(v int64) func(addrs.Attr, values.Type) (values.Value, bool) {
		return func(addrs.Attr, values.Type) (values.Value, bool) { return values.CountOf(v), true }
	}
	cases := []struct {
		name     string
		intents  []intent.Intent
		current  int64
		want     int64
		set      bool
		conflict string
		contrib  int
	}{
		{"lower bounds: max", []intent.Intent{it(intent.LowerBound, 3, "A"), it(intent.LowerBound, 5, "B")}, 2, 5, true, "", 2},
		// The bound setpoint raised comes back down: desired is the bound,
		// not max(bound, current).
		{"bound below current comes down", []intent.Intent{it(intent.LowerBound, 3, "A")}, 6, 3, true, "", 0},
		{"upper caps lower", []intent.Intent{it(intent.LowerBound, 9, "A"), it(intent.UpperBound, 7, "B")}, 2, 7, true, "", 2},
		{"upper bounds: min", []intent.Intent{it(intent.UpperBound, 9, "A"), it(intent.UpperBound, 7, "B")}, 8, 7, true, "", 2},
		{"upper alone above current: nothing", []intent.Intent{it(intent.UpperBound, 9, "A")}, 4, 0, false, "", 0},
		{"exact clamped into bounds", []intent.Intent{it(intent.Exact, 2, "A"), it(intent.LowerBound, 4, "B"), it(intent.UpperBound, 10, "C")}, 5, 4, true, "", 3},
		{"exact clamped by upper", []intent.Intent{it(intent.Exact, 20, "A"), it(intent.UpperBound, 10, "C")}, 5, 10, true, "", 2},
		{"two exact values conflict", []intent.Intent{it(intent.Exact, 2, "A"), it(intent.Exact, 3, "B")}, 5, 2, true, "2 from A", 2},
		{"two equal exact values agree", []intent.Intent{it(intent.Exact, 3, "A"), it(intent.Exact, 3, "B")}, 5, 3, true, "", 2},
		// A restore counts only alone: another spec's bound wins.
		{"restore yields to another spec", []intent.Intent{restore(it(intent.Exact, 2, "A")), it(intent.LowerBound, 4, "B")}, 5, 4, true, "", 0},
		{"restore alone", []intent.Intent{restore(it(intent.Exact, 2, "A"))}, 5, 2, true, "", 0},
	}
	for _, c := range cases {
		ds := Combine(c.intents, cur(c.current))
		if len(ds) != 1 {
			t.Fatalf("%s: %d groups", c.name, len(ds))
		}
		d := ds[0]
		if d.Set != c.set || (c.set && d.Value != values.CountOf(c.want)) || !strings.HasPrefix(d.Conflict, c.conflict) || (c.conflict == "" && d.Conflict != "") || len(d.Contributors) != c.contrib {
			t.Errorf("%s: %+v", c.name, d)
		}
	}
	// Different attributes stay apart, in a stable order.
	b := it(intent.LowerBound, 2, "A")
	b.Attr.Path = addrs.MustPath("spec.minReplicas")
	ds := Combine([]intent.Intent{it(intent.LowerBound, 3, "A"), b}, cur(1))
	if len(ds) != 2 || ds[0].Attr.Path.String() != "spec.minReplicas" {
		t.Fatalf("%+v", ds)
	}
}
