package signals_test

import (
	"testing"

	"github.com/prometheus/prometheus/promql/parser"

	nfrkind "github.com/setpoint-dev/setpoint/engine/kinds/nfr"
	"github.com/setpoint-dev/setpoint/engine/signals"
)

// TestDefaultQueriesWithinTheBound: setpoint's own grouped queries, with
// subqueries over every workload at once, stay within the sample bound in
// a store of 20,000 series a metric name.
func TestDefaultQueriesWithinTheBound(t *testing.T) {
	p := parser.NewParser(parser.Options{})
	many := func(*parser.VectorSelector) int { return 20_000 }
	for _, q := range []string{nfrkind.QueryHistory, nfrkind.QueryServiceTime, nfrkind.QueryFit} {
		e, err := p.ParseExpr(q)
		if err != nil {
			t.Fatal(err)
		}
		if err := signals.CheckCost(q, e, many); err != nil {
			t.Errorf("%s: %v", q, err)
		}
	}
}
