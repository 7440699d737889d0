package signals

import (
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
)

// The bounds every query setpoint evaluates is held to, whoever wrote it
// (a spec's trigger, activity or override, or a client of the debug
// endpoint): a query is text from a pull request or a socket, and the
// reconciler evaluating it must stay up whatever it asks for.
const (
	// MaxSamples bounds the samples one query may hold at once. The
	// PromQL engine takes some 60 bytes of resident memory per sample it
	// counts (slices grown by doubling, copies between steps), so the
	// largest query within it peaks near 300 MB, where the previous 50M
	// let a 45-byte query take 3.4 GB.
	MaxSamples = 5_000_000
	// MaxPointsRead bounds the points range functions over a nested
	// subquery read over all their steps: the engine does not look at its
	// deadline between the steps of one series, so time alone does not
	// stop them. Some 400M points take a second.
	MaxPointsRead = 500_000_000
	// MaxQueryTime bounds one evaluation by any source (a Prometheus
	// server's configured timeout is capped at it): a reconcile waits
	// for its queries, and a tick is 5 s by default.
	MaxQueryTime = 10 * time.Second
	// MaxResponseBytes bounds a Prometheus server's answer to one query:
	// it is read whole and decoded, so its size is memory.
	MaxResponseBytes = 32 << 20
	// DefaultSubqueryStep is the step of a subquery that names none, as a
	// Prometheus server's default evaluation interval.
	DefaultSubqueryStep = time.Minute
	// DefaultLookbackDelta is how far back an instant selector looks for
	// a sample unless the Environment says otherwise
	// (spec.signals.lookbackDelta): Prometheus's default.
	DefaultLookbackDelta = 5 * time.Minute
)

// ErrBound is wrapped by every error of a query refused or stopped at one
// of the bounds: the query asks too much, which is not missing data.
var ErrBound = errors.New("past a query bound")

// ErrBudget is wrapped by the errors of a query refused at a budget: it
// may pass in another reconcile or beside other queries.
var ErrBudget = errors.New("past a query budget")

// BoundError is a query refused before evaluation, or stopped during it,
// at one of the bounds.
type BoundError struct {
	// What went past the bound.
	What string
	// Bound names the bound with its value: "5000000 samples".
	Bound string
	// Hint says how to stay within it, when there is a way.
	Hint string
	// Budget: the bound is a budget shared by several queries (what the
	// others spent counts), not this query's own cost alone.
	Budget bool
}

func (e *BoundError) Error() string {
	kind := "bound"
	if e.Budget {
		kind = "budget"
	}
	s := fmt.Sprintf("%s: past the query %s of %s", e.What, kind, e.Bound)
	if e.Hint != "" {
		s += "; " + e.Hint
	}
	return s
}

// Is makes errors.Is(err, ErrBound) true of every BoundError, and
// errors.Is(err, ErrBudget) of one at a budget.
func (e *BoundError) Is(target error) bool {
	return target == ErrBound || (target == ErrBudget && e.Budget)
}

// SamplesBound is the error of a query whose evaluation held more than
// MaxSamples: what a source reports when the engine's own count stops it.
func SamplesBound(what string) *BoundError {
	return &BoundError{What: what, Bound: fmt.Sprintf("%d samples", MaxSamples)}
}

// CheckCost refuses a query whose subqueries would make more than
// MaxSamples samples, or whose range functions over nested subqueries would
// read more than MaxPointsRead points, before anything is evaluated: the
// PromQL engine counts samples only as it makes them (a subquery of a year
// at one second takes gigabytes before the count stops it), and looks at
// its deadline only between series, not between the steps of one.
//
// A subquery's steps are its range over its step (DefaultSubqueryStep when
// it names none), its range widened by every subquery around it (the inner
// one is evaluated over all the outer one's steps at once). At each step
// its body holds what held estimates from the series its selectors match:
// series says how many (nil: one each, the static cost `validate` checks).
// query is the text e was parsed from, for the position in the message.
func CheckCost(query string, e parser.Expr, series func(*parser.VectorSelector) int) error {
	_, err := Cost(query, e, series)
	return err
}

// Cost is CheckCost's estimate of the samples the query makes: its
// subqueries' steps times what each holds at a step, plus what the
// expression itself holds at its one instant (at least 1). It is what a
// query is charged against the budgets (Budget, InFlight).
func Cost(query string, e parser.Expr, series func(*parser.VectorSelector) int) (int64, error) {
	// A selector is counted once per check: the count scans the store, and
	// the walk below asks for each selector several times.
	if count := series; count != nil {
		counted := map[*parser.VectorSelector]int{}
		series = func(vs *parser.VectorSelector) int {
			n, ok := counted[vs]
			if !ok {
				n = count(vs)
				counted[vs] = n
			}
			return n
		}
	}
	var total, worstSamples float64
	var worst, err *BoundError
	parser.Inspect(e, func(n parser.Node, path []parser.Node) error {
		sq, ok := n.(*parser.SubqueryExpr)
		if !ok {
			return nil
		}
		at := position(query, sq)
		if sq.RangeExpr != nil || sq.StepExpr != nil {
			// Only a parser with duration expressions on makes these;
			// their value is known at evaluation, too late.
			err = &BoundError{What: fmt.Sprintf("the subquery at character %d of the query has a range or step computed at evaluation, so its cost cannot be known before", at),
				Bound: fmt.Sprintf("%d samples", MaxSamples)}
			return err
		}
		steps, step, span := subquerySteps(sq, path)
		width, peak := held(sq.Expr, series)
		width, peak = max(width, 1), max(peak, 1)
		samples := steps * float64(peak)
		total += samples
		if worst == nil || samples > worstSamples {
			worstSamples = samples
			what := fmt.Sprintf("the subquery at character %d of the query, [%s:%s], makes some %.0f samples (%.0f steps of %s over %s × %d values held at each",
				at, fmtDuration(sq.Range), fmtDuration(step), samples, steps, fmtDuration(step), fmtDuration(span), peak)
			if n := selected(sq.Expr, series); n > 0 {
				what += fmt.Sprintf(", its selectors matching %d series", n)
			}
			worst = &BoundError{What: what + ")", Bound: fmt.Sprintf("%d samples", MaxSamples),
				Hint: "a coarser step or a shorter range makes fewer"}
		}
		// A range function over this subquery inside another one reads
		// the whole window again at each of the outer one's steps.
		if len(path) == 0 {
			return nil
		}
		if _, ok := path[len(path)-1].(*parser.Call); !ok {
			return nil
		}
		for i := len(path) - 1; i >= 0; i-- {
			outer, ok := path[i].(*parser.SubqueryExpr)
			if !ok {
				continue
			}
			outerSteps, outerStep, _ := subquerySteps(outer, path[:i])
			window := float64(sq.Range)/float64(step) + 1
			if reads := outerSteps * window * float64(width); reads > MaxPointsRead {
				err = &BoundError{
					What: fmt.Sprintf("the range function over the subquery at character %d of the query reads some %.0f points (%.0f steps of the subquery around it, each of %s, × %.0f points of its [%s:%s] window × %d series)",
						at, reads, outerSteps, fmtDuration(outerStep), window, fmtDuration(sq.Range), fmtDuration(step), width),
					Bound: fmt.Sprintf("%d points read", MaxPointsRead),
					Hint:  "a coarser step or a shorter range reads fewer",
				}
				return err
			}
			break
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if total > MaxSamples {
		if total > worstSamples {
			worst.What += fmt.Sprintf(", the query's subqueries some %.0f in all", total)
		}
		return 0, worst
	}
	_, peak := held(e, series)
	cost := int64(total) + int64(max(peak, 1))
	if ms := topMatrix(e); ms != nil {
		// A range vector as the answer (a debug evaluation, `setpoint
		// query`) holds every point of its window: counted at one a
		// second, the finest the stores here keep.
		n := 1
		if series != nil {
			n = max(series(ms.VectorSelector.(*parser.VectorSelector)), 1)
		}
		cost += int64(n) * (int64(ms.Range/time.Second) + 1)
	}
	return cost, nil
}

// topMatrix is the range selector e is, under parentheses, or nil.
func topMatrix(e parser.Expr) *parser.MatrixSelector {
	for {
		switch x := e.(type) {
		case *parser.ParenExpr:
			e = x.Expr
		case *parser.StepInvariantExpr:
			e = x.Expr
		case *parser.MatrixSelector:
			if _, ok := x.VectorSelector.(*parser.VectorSelector); ok {
				return x
			}
			return nil
		default:
			return nil
		}
	}
}

// subquerySteps is how many steps sq is evaluated at, under the subqueries
// of path around it, and its step and the span they cover.
func subquerySteps(sq *parser.SubqueryExpr, path []parser.Node) (steps float64, step, span time.Duration) {
	span = sq.Range
	for _, p := range path {
		if outer, ok := p.(*parser.SubqueryExpr); ok {
			span += outer.Range
		}
	}
	step = sq.Step
	if step <= 0 {
		step = DefaultSubqueryStep
	}
	// In float64: ranges of centuries at a millisecond step overflow an
	// int64 product.
	return float64(span)/float64(step) + 1, step, span
}

// held estimates, for one step of a range evaluation of e, how many series
// e answers (out) and the most values it holds at once on the way (peak):
// the engine evaluates a node's arguments in turn over all the steps,
// holding each one's answer until the node's own is made. series says how
// many series a selector matches (nil: one). An aggregation with grouping
// is taken to keep all its input's series, and a binary operation the
// larger side's: upper bounds, since what they make depends on labels.
func held(e parser.Expr, series func(*parser.VectorSelector) int) (out, peak int) {
	switch x := e.(type) {
	case *parser.VectorSelector:
		n := 1
		if series != nil {
			n = series(x)
		}
		return n, n
	case *parser.MatrixSelector:
		// Its points are read a window at a time by the function over
		// it: the function's answer is what stays.
		return held(x.VectorSelector, series)
	case *parser.SubqueryExpr:
		// Its own steps are counted on their own; here, what comes out.
		o, _ := held(x.Expr, series)
		return o, o
	case *parser.ParenExpr:
		return held(x.Expr, series)
	case *parser.StepInvariantExpr:
		return held(x.Expr, series)
	case *parser.StringLiteral:
		return 0, 0
	case *parser.NumberLiteral:
		return 1, 1
	case *parser.UnaryExpr:
		o, p := held(x.Expr, series)
		return o, max(p, 2*o)
	case *parser.Call:
		holding := 0
		for _, a := range x.Args {
			o, p := held(a, series)
			peak = max(peak, holding+p)
			holding += o
			out = max(out, o)
		}
		// time(), vector(1): one series.
		out = max(out, 1)
		return out, max(peak, holding+out)
	case *parser.AggregateExpr:
		param := 0
		if x.Param != nil {
			param, peak = held(x.Param, series)
		}
		o, p := held(x.Expr, series)
		out = o
		switch x.Op {
		case parser.TOPK, parser.BOTTOMK, parser.LIMITK, parser.LIMIT_RATIO, parser.COUNT_VALUES:
			// As many series as their input, grouped or not.
		default:
			if len(x.Grouping) == 0 && !x.Without {
				out = min(o, 1)
			}
		}
		return out, max(peak, param+p, param+o+out)
	case *parser.BinaryExpr:
		lo, lp := held(x.LHS, series)
		ro, rp := held(x.RHS, series)
		switch x.Op {
		case parser.LOR:
			out = lo + ro
		case parser.LAND, parser.LUNLESS:
			out = lo
		default:
			out = max(lo, ro)
		}
		return out, max(lp, lo+rp, lo+ro+out)
	}
	// A node this does not know: as a selector.
	return 1, 1
}

// selected is how many series the selectors under e match, 0 when series
// does not know.
func selected(e parser.Expr, series func(*parser.VectorSelector) int) int {
	n := 0
	if series == nil {
		return 0
	}
	parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
		if vs, ok := node.(*parser.VectorSelector); ok {
			n += series(vs)
		}
		return nil
	})
	return n
}

// position is the character (not byte) where sq starts in query, from 1,
// as the parse errors of validate count.
func position(query string, sq *parser.SubqueryExpr) int {
	at := min(max(int(sq.PositionRange().Start), 0), len(query))
	return utf8.RuneCountInString(query[:at]) + 1
}

// fmtDuration writes a duration as PromQL does ("1y", "5m").
func fmtDuration(d time.Duration) string { return model.Duration(d).String() }
