package spec

import (
	"fmt"

	"github.com/setpoint-dev/setpoint/engine/signals"
)

var _ = RegisterCheck(Check{Kind: "Schedule", Path: "spec.triggers.*.query", What: "the spec's queries together within the budget of 2M samples per reconcile (at one series each)", Why: WhyPromQL, Example: "checks/query-budget.yaml"})
var _ = RegisterCheck(Check{Kind: "NFR", Path: "spec.signals.*", What: "the spec's queries together within the budget of 2M samples per reconcile (at one series each)", Why: WhyPromQL, Example: "checks/query-budget-nfr.yaml"})

// queries checks a spec's PromQL fields one by one and adds up what they
// cost at one series each (the least they can cost, whatever the store
// holds), parsing each once.
type queries struct {
	total int64
	over  *FieldError // the first field that takes the sum past signals.SpecBudget
}

// check says what is wrong with the query at path (CheckPromQL), "" for
// an empty field, and counts its cost.
func (q *queries) check(path, expr, expected string) []FieldError {
	if expr == "" {
		return nil
	}
	msg, cost := checkPromQL(expr)
	if msg != "" {
		return []FieldError{{Path: path, Message: msg, Expected: expected}}
	}
	q.total += cost
	if q.over == nil && q.total > signals.SpecBudget {
		// At run time this query and those after it would be refused
		// every reconcile.
		q.over = &FieldError{Path: path,
			Message: fmt.Sprintf("the spec's queries make at least %d samples per reconcile with this one (%d), past the budget of %d samples per spec and reconcile: it would be refused every time",
				q.total, cost, int64(signals.SpecBudget)),
			Expected: "queries that together make fewer samples (a coarser subquery step, a shorter range)"}
	}
	return nil
}

// past is the error at the field that took the spec past its budget.
func (q *queries) past() []FieldError {
	if q.over == nil {
		return nil
	}
	return []FieldError{*q.over}
}
