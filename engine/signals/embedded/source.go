package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"

	"github.com/setpoint-dev/setpoint/engine/signals"
)

// Source evaluates PromQL over a Store with the real Prometheus engine.
type Source struct {
	Store  *Store
	engine *promql.Engine
	parser parser.Parser
	opts   promql.QueryOpts
	// timeout bounds one evaluation: QueryTime but in tests.
	timeout time.Duration
	// InFlight bounds the samples of the queries evaluated at once; nil:
	// the process's (signals.Process), shared with every other source.
	InFlight *signals.InFlight
	// stepCache keeps subqueries' steps between evaluations (steps.go);
	// noStepReuse evaluates every subquery whole (tests compare).
	stepCache   stepCache
	noStepReuse bool
}

// QueryTime bounds one evaluation, below the default 5 s tick and the
// signals.MaxQueryTime of every source: in memory, a query within the
// sample bound takes well under a second, so one that runs this long is
// one to stop (nested subqueries make work, not memory: only time bounds
// them).
const QueryTime = 4 * time.Second

// NewSource returns a source over store, looking back signals.DefaultLookbackDelta.
func NewSource(store *Store) *Source {
	p := parser.NewParser(parser.Options{})
	return &Source{
		Store: store,
		engine: promql.NewEngine(promql.EngineOpts{
			Logger:               slog.New(slog.DiscardHandler),
			MaxSamples:           signals.MaxSamples,
			Timeout:              QueryTime,
			LookbackDelta:        signals.DefaultLookbackDelta,
			EnableAtModifier:     true,
			EnableNegativeOffset: true,
			// Without it a subquery that names no step ("x[5m:]")
			// dereferences a nil function inside the engine.
			NoStepSubqueryIntervalFn: func(int64) int64 { return signals.DefaultSubqueryStep.Milliseconds() },
			Parser:                   p,
		}),
		parser:  p,
		opts:    promql.NewPrometheusQueryOpts(false, signals.DefaultLookbackDelta),
		timeout: QueryTime,
	}
}

// WithLookback sets how far back an instant selector looks for a sample
// (0: the engine's, signals.DefaultLookbackDelta) and returns s. Set before
// the first query: the queries read it unguarded.
func (s *Source) WithLookback(d time.Duration) *Source {
	s.opts = promql.NewPrometheusQueryOpts(false, d)
	return s
}

// Lookback is how far back an instant selector looks for a sample.
func (s *Source) Lookback() time.Duration { return s.opts.LookbackDelta() }

// Parse checks an expression and returns the metric names it reads.
func (s *Source) Parse(expr string) ([]string, error) {
	e, err := s.parser.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	return names(e), nil
}

// names are the metric names e reads.
func names(e parser.Expr) []string {
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			if vs.Name != "" {
				names = append(names, vs.Name)
			}
			for _, m := range vs.LabelMatchers {
				if m.Name == metricName && m.Type == labels.MatchEqual {
					names = append(names, m.Value)
				}
			}
		}
		return nil
	})
	return names
}

// Query evaluates expr at the instant at. It registers the metric names the
// expression reads, so the store keeps scraping them from now on. A query
// past a bound (signals.MaxSamples, QueryTime) is an error wrapping a
// signals.BoundError, refused before evaluation when its subqueries alone
// would make too many samples.
func (s *Source) Query(ctx context.Context, expr string, at time.Time) (signals.Result, error) {
	res := signals.Result{Expr: expr, At: at}
	e, err := s.parser.ParseExpr(expr)
	if err != nil {
		return res, fmt.Errorf("parsing %q: %w", expr, err)
	}
	cost, err := signals.Cost(expr, e, s.Store.countSeries)
	if err != nil {
		return res, fmt.Errorf("evaluating %q: %w", expr, err)
	}
	// The spec's budget for this reconcile first (it refuses at once),
	// then the process's samples in flight (it waits its turn, as long as
	// an evaluation may take: the wait is not the query's own time).
	b := signals.BudgetOf(ctx)
	if b != nil {
		if err := b.Charge(expr, cost); err != nil {
			return res, fmt.Errorf("evaluating %q: %w", expr, err)
		}
	}
	inFlight := s.InFlight
	if inFlight == nil {
		inFlight = signals.Process
	}
	wctx, wcancel := context.WithTimeout(ctx, s.timeout)
	release, err := inFlight.Acquire(wctx, expr, cost)
	wcancel()
	if err != nil {
		if b != nil {
			// Not evaluated: the spec did not spend it.
			b.Refund(cost)
		}
		return res, fmt.Errorf("evaluating %q: %w", expr, err)
	}
	defer release()
	s.Store.Request(names(e)...)
	late := &signals.BoundError{What: "the evaluation was still running", Bound: s.timeout.String()}
	ctx, cancel := context.WithTimeoutCause(ctx, s.timeout, late)
	defer cancel()
	eval, on := expr, storage.Queryable(s.Store)
	lbls := func(l labels.Labels) labels.Labels { return l }
	if !s.noStepReuse {
		if x, q, ok := s.withSteps(ctx, e, at); ok {
			eval, on, lbls = x, q, stripStepName
		}
	}
	q, err := s.engine.NewInstantQuery(ctx, on, s.opts, eval, at)
	if err != nil {
		return res, fmt.Errorf("preparing %q: %w", expr, err)
	}
	defer q.Close()
	r := q.Exec(ctx)
	if r.Err != nil {
		return res, fmt.Errorf("evaluating %q: %w", expr, bounded(ctx, r.Err, late))
	}
	switch v := r.Value.(type) {
	case promql.Vector:
		res.Kind = signals.Vector
		res.Samples = make([]signals.Sample, 0, len(v))
		for _, smp := range v {
			if smp.H != nil || !signals.Usable(smp.F) {
				res.Dropped++
				continue
			}
			res.Samples = append(res.Samples, signals.Sample{Labels: toLabels(lbls(smp.Metric)), Value: smp.F})
		}
	case promql.Scalar:
		res.Kind = signals.Scalar
		if signals.Usable(v.V) {
			res.Samples = []signals.Sample{{Value: v.V}}
		} else {
			res.Dropped = 1
		}
	case promql.Matrix:
		res.Kind = signals.Matrix
		for _, series := range v {
			smp := signals.Sample{Labels: toLabels(lbls(series.Metric))}
			for _, p := range series.Floats {
				if signals.Usable(p.F) {
					smp.Points = append(smp.Points, signals.Point{T: time.UnixMilli(p.T).UTC(), V: p.F})
				}
			}
			if len(smp.Points) == 0 {
				res.Dropped++
				continue
			}
			res.Samples = append(res.Samples, smp)
		}
	default:
		return res, fmt.Errorf("%q evaluates to a %s; a vector, scalar or matrix is needed", expr, r.Value.Type())
	}
	return res, nil
}

// bounded names the bound an engine error stopped at: the engine's own
// errors say only "too many samples" or "timed out". A caller's deadline
// or cancellation is left as it is: that is not the query's cost.
func bounded(ctx context.Context, err error, late *signals.BoundError) error {
	var many promql.ErrTooManySamples
	var timeout promql.ErrQueryTimeout
	switch {
	case errors.As(err, &many):
		return signals.SamplesBound("the evaluation held more samples at once")
	case errors.As(err, &timeout) && errors.Is(context.Cause(ctx), late):
		return late
	}
	return err
}

func toLabels(l labels.Labels) signals.Labels {
	out := make(signals.Labels, l.Len())
	l.Range(func(x labels.Label) {
		if x.Name != metricName {
			out[x.Name] = x.Value
		}
	})
	return out
}
