package spec

import (
	"fmt"

	"github.com/setpoint-dev/setpoint/engine/signals"
)

var _ = RegisterCheck(Check{Kind: "Schedule", Path: "spec.triggers.*.query", What: "the spec's queries together within the budget of 2M samples per reconcile (at one series each)", Why: WhyPromQL, Example: "checks/query-budget.yaml"})
var _ = RegisterCheck(Check{Kind: "NFR", Path: "spec.signals.*", What: "the spec's queries together within the budget of 2M samples per reconcile (at one series each)", Why: WhyPromQL, Example: "checks/query-budget-nfr.yaml"})

// specQuery is one PromQL field of a spec.
type specQuery struct{ path, expr string }

// budgetErrors adds up what a spec's own queries cost at one series each
// (the least they can cost, whatever the store holds) and errors at the
// query that takes the sum past signals.SpecBudget: at run time that query
// and those after it would be refused every reconcile. A query that does
// not parse or is past a bound on its own is CheckPromQL's to report.
func budgetErrors(qs []specQuery) []FieldError {
	var total int64
	for _, q := range qs {
		if q.expr == "" {
			continue
		}
		e, err := promqlParser.ParseExpr(q.expr)
		if err != nil {
			continue
		}
		cost, err := signals.Cost(q.expr, e, nil)
		if err != nil {
			continue
		}
		total += cost
		if total > signals.SpecBudget {
			return []FieldError{{Path: q.path,
				Message: fmt.Sprintf("the spec's queries make at least %d samples per reconcile with this one (%d), past the budget of %d samples per spec and reconcile: it would be refused every time",
					total, cost, int64(signals.SpecBudget)),
				Expected: "queries that together make fewer samples (a coarser subquery step, a shorter range)"}}
		}
	}
	return nil
}
