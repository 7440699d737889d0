package load

import "testing"

// TestQueryCostDiagnostics: a spec query whose static cost is past the
// sample bound is an error at its field, as a query that does not parse.
func TestQueryCostDiagnostics(t *testing.T) {
	l := newLoader(t)
	const attack = `count_over_time(vector(1)[1y:1s])`
	const past = "the subquery at character 17 of the query, [1y:1s], makes some 63072002 samples (31536001 steps of 1s over 1y × 2 values held at each): past the query bound of 5000000 samples; a coarser step or a shorter range makes fewer (expected a PromQL instant vector or scalar expression)"
	schedule := func(extra string) string {
		return "apiVersion: setpoint.dev/v1alpha1\nkind: Schedule\nmetadata: {name: a, namespace: shop}\nspec:\n  target: {kind: Deployment, name: a}\n" + extra
	}
	for _, c := range []struct {
		name, src string
		want      []string
	}{
		{"an NFR's signal override", nfrDoc("a", "  signals: {rps: '"+attack+"'}\n"),
			[]string{`f.yaml:6:13: spec.signals.rps: ` + past}},
		{"a Schedule's trigger", schedule("  triggers:\n  - {name: load, target: 10, query: '" + attack + "'}\n"),
			[]string{`f.yaml:7:30: spec.triggers.0.query: ` + past}},
		{"a Schedule's activity", schedule("  idle:\n    activity: '" + attack + "'\n"),
			[]string{`f.yaml:7:5: spec.idle.activity: ` + past}},
		{"a subquery within the bound", schedule("  triggers:\n  - {name: load, target: 10, query: 'max_over_time(sum(load)[1d:1s])'}\n"), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			diags, _ := loadOne(t, l, "f.yaml", c.src)
			checkDiags(t, diags, c.want)
		})
	}
}
