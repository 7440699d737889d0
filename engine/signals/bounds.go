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
	// MaxSamples bounds the samples one query may make. The PromQL engine
	// takes some 130 bytes of resident memory per sample of a subquery
	// before its own count stops it, so 5M keeps one query well under a
	// gigabyte where the previous 50M let a 45-byte query take 3.4 GB.
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
)

// ErrBound is wrapped by every error of a query refused or stopped at one
// of the bounds: the query asks too much, which is not missing data.
var ErrBound = errors.New("past a query bound")

// BoundError is a query refused before evaluation, or stopped during it,
// at one of the bounds.
type BoundError struct {
	// What went past the bound.
	What string
	// Bound names the bound with its value: "5000000 samples".
	Bound string
	// Hint says how to stay within it, when there is a way.
	Hint string
}

func (e *BoundError) Error() string {
	s := fmt.Sprintf("%s: past the query bound of %s", e.What, e.Bound)
	if e.Hint != "" {
		s += "; " + e.Hint
	}
	return s
}

// Is makes errors.Is(err, ErrBound) true of every BoundError.
func (e *BoundError) Is(target error) bool { return target == ErrBound }

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
// one is evaluated over all the outer one's steps at once). Each step holds
// a value for each expression node of its body (an argument is held while
// the function over it runs) and each series its selectors match: series
// says how many (nil: one each, the static cost `validate` checks).
// query is the text e was parsed from, for the position in the message.
func CheckCost(query string, e parser.Expr, series func(*parser.VectorSelector) int) error {
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
		nodes, width := bodyCost(sq.Expr, series)
		samples := steps * float64(nodes) * float64(width)
		total += samples
		if worst == nil || samples > worstSamples {
			worstSamples = samples
			worst = &BoundError{
				What: fmt.Sprintf("the subquery at character %d of the query, [%s:%s], makes some %.0f samples (%.0f steps of %s over %s × %d values a step × %d series)",
					at, fmtDuration(sq.Range), fmtDuration(step), samples, steps, fmtDuration(step), fmtDuration(span), nodes, width),
				Bound: fmt.Sprintf("%d samples", MaxSamples),
				Hint:  "a coarser step or a shorter range makes fewer",
			}
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
		return err
	}
	if total > MaxSamples {
		if total > worstSamples {
			worst.What += fmt.Sprintf(", the query's subqueries some %.0f in all", total)
		}
		return worst
	}
	return nil
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

// bodyCost counts what one step of a subquery's body holds: its expression
// nodes (a nested subquery is one: its own steps are counted on their own)
// and the series its selectors match, at least one.
func bodyCost(body parser.Expr, series func(*parser.VectorSelector) int) (nodes, width int) {
	parser.Inspect(body, func(n parser.Node, path []parser.Node) error {
		if _, ok := n.(parser.Expr); !ok {
			// Inspect's nil at the end of each node's children, and the
			// argument lists.
			return nil
		}
		if vs, ok := n.(*parser.VectorSelector); ok {
			// A nested subquery's series come out of it at this one's
			// steps too.
			if series != nil {
				width += series(vs)
			} else {
				width++
			}
		}
		for _, p := range path {
			if _, nested := p.(*parser.SubqueryExpr); nested {
				return nil
			}
		}
		switch n.(type) {
		case *parser.ParenExpr, *parser.StringLiteral:
			// A parenthesis holds nothing of its own; a string is a
			// function's argument, not a value per step.
		case *parser.VectorSelector:
			if len(path) == 0 || !isMatrix(path[len(path)-1]) {
				nodes++
			}
		default:
			nodes++
		}
		return nil
	})
	return max(nodes, 1), max(width, 1)
}

func isMatrix(n parser.Node) bool {
	_, ok := n.(*parser.MatrixSelector)
	return ok
}

// position is the character (not byte) where sq starts in query, from 1,
// as the parse errors of validate count.
func position(query string, sq *parser.SubqueryExpr) int {
	at := min(max(int(sq.PositionRange().Start), 0), len(query))
	return utf8.RuneCountInString(query[:at]) + 1
}

// fmtDuration writes a duration as PromQL does ("1y", "5m").
func fmtDuration(d time.Duration) string { return model.Duration(d).String() }
