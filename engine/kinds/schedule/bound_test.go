package schedulekind_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/workload"
)

// TestTriggerPastABound: a trigger whose query asks more than a query may
// is an error at its field naming the bound, and the reason of the
// decision says the bound, not "missing".
func TestTriggerPastABound(t *testing.T) {
	a, d := deployment("shop", "api", 4, 4, nil)
	f := newFixture(t, map[addrs.Object]providers.Object{a: d}, schedule(`  target: {kind: Deployment, name: api}
  replicas: {min: 1, atStart: 1, max: 10}
  idle: {activity: "vector(1)"}
  triggers: [{name: load, query: "max_over_time(sum(load)[1d:1s])", target: 10}, {name: q, query: "vector(10)", target: 10}]
  enforcement: {replicas: enforce}
`))
	// 60 series: a day of them at one second is past 5M samples.
	for i := range 60 {
		if _, err := f.store.Append(labels.FromStrings("__name__", "load", "pod", fmt.Sprint(i)), t0.UnixMilli(), 1); err != nil {
			t.Fatal(err)
		}
	}
	p := f.plan(t, t0)
	if len(p.Errors) != 1 || p.Errors[0].Spec != "Schedule/shop/api" || !strings.Contains(p.Errors[0].Message, "trigger load: ") ||
		!strings.Contains(p.Errors[0].Message, "past the query bound of 5000000 samples") || p.Errors[0].Pos.Line == 0 {
		t.Fatalf("errors %+v: want one at the trigger's query naming the bound", p.Errors)
	}
	// The other trigger still sizes it; this one only keeps it from
	// going down, and says why.
	said := false
	for _, n := range p.Notes {
		if strings.Contains(n.Message, "load: no usable value (missing)") {
			t.Errorf("note %q: the bound is said as missing data", n.Message)
		}
		said = said || strings.Contains(n.Message, `load: no usable value (evaluating "max_over_time(sum(load)[1d:1s])": the subquery`) &&
			strings.Contains(n.Message, "past the query bound of 5000000 samples")
	}
	if !said {
		t.Errorf("notes %+v: want the trigger's reason naming the bound", p.Notes)
	}
	if c := change(p, a, workload.Replicas); c != nil {
		t.Errorf("%s → %s (%s): want no decrease", c.From, c.To, c.Reason)
	}
}
