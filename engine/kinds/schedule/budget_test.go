package schedulekind_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/workload"
)

// Two triggers that each pass the bound of one query, and validate (at one
// series each they make 1.7M samples), are past the spec's budget once the
// store holds four series: the second is not evaluated, the refusal names
// the budget and the samples counted, and the decision holds (no scale
// down on a trigger without a value).
func TestTriggersPastTheSpecBudgetAreHeld(t *testing.T) {
	a, d := deployment("shop", "api", 3, 3, lastActivity(t0))
	f := newFixture(t, map[addrs.Object]providers.Object{a: d}, schedule(`  target: {kind: Deployment, name: api}
  replicas: {min: 1, atStart: 1, max: 5}
  idle: {after: 1h, grace: 0s, activity: "vector(1)"}
  triggers:
    - {name: sum, query: "sum(sum_over_time(m[5d:1s]))", type: AverageValue, target: 1e12}
    - {name: most, query: "sum(max_over_time(m[5d:1s]))", type: AverageValue, target: 1e12}
  behavior: {scaleDown: {stabilization: 0s}}
  enforcement: {replicas: enforce}
`))
	for i := range 4 {
		l := labels.FromStrings("__name__", "m", "pod", string(rune('a'+i)))
		if _, err := f.store.Append(l, t0.UnixMilli(), 1); err != nil {
			t.Fatal(err)
		}
	}
	p := f.plan(t, t0.Add(time.Minute))
	// 864,001 steps of [5d:1s] × 4 series, + 8 values at the instant:
	// 1,728,012 samples each.
	var refused string
	for _, n := range append(p.Errors, p.Notes...) {
		if strings.Contains(n.Message, "past the query budget") {
			refused += n.Message + "\n"
		}
	}
	for _, want := range []string{`the query "sum(max_over_time(m[5d:1s]))" makes some 1728012 samples`,
		"past the query budget of 2000000 samples per spec and reconcile"} {
		if !strings.Contains(refused, want) {
			t.Fatalf("want %q in the refusal; the plan says:\n%s\n%v", want, refused, p.Notes)
		}
	}
	// What was made before: the first trigger's 1,728,012 and the spec's
	// small queries (its activity); in all, that and this one's.
	m := regexp.MustCompile(`already made (\d+) in this reconcile \((\d+) in all\)`).FindStringSubmatch(refused)
	if m == nil {
		t.Fatalf("the refusal must count what was made:\n%s", refused)
	}
	before, _ := strconv.Atoi(m[1])
	all, _ := strconv.Atoi(m[2])
	if before < 1728012 || before > 1728012+1000 || all != before+1728012 {
		t.Fatalf("counted %d before and %d in all, want ≥ 1728012 (the first trigger) and that + 1728012", before, all)
	}
	if strings.Contains(refused, `"sum(sum_over_time`) {
		t.Fatalf("the first trigger is within the budget:\n%s", refused)
	}
	if c := change(p, a, workload.Replicas); c != nil && c.To < c.From {
		t.Fatalf("a trigger without a value must block the scale down: %s → %s", c.From, c.To)
	}
}
