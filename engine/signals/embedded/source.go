package embedded

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/setpoint-dev/setpoint/engine/signals"
)

// Source evaluates PromQL over a Store with the real Prometheus engine.
type Source struct {
	Store  *Store
	engine *promql.Engine
	parser parser.Parser
	opts   promql.QueryOpts
}

// LookbackDelta is how far back an instant selector looks for a sample,
// as in Prometheus.
const LookbackDelta = 5 * time.Minute

// NewSource returns a source over store.
func NewSource(store *Store) *Source {
	p := parser.NewParser(parser.Options{})
	return &Source{
		Store: store,
		engine: promql.NewEngine(promql.EngineOpts{
			Logger:               slog.New(slog.DiscardHandler),
			MaxSamples:           50_000_000,
			Timeout:              30 * time.Second,
			LookbackDelta:        LookbackDelta,
			EnableAtModifier:     true,
			EnableNegativeOffset: true,
			Parser:               p,
		}),
		parser: p,
		opts:   promql.NewPrometheusQueryOpts(false, LookbackDelta),
	}
}

// Parse checks an expression and returns the metric names it reads.
func (s *Source) Parse(expr string) ([]string, error) {
	e, err := s.parser.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
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
	return names, nil
}

// Query evaluates expr at the instant at. It registers the metric names the
// expression reads, so the store keeps scraping them from now on.
func (s *Source) Query(ctx context.Context, expr string, at time.Time) (signals.Result, error) {
	res := signals.Result{Expr: expr, At: at}
	names, err := s.Parse(expr)
	if err != nil {
		return res, fmt.Errorf("parsing %q: %w", expr, err)
	}
	s.Store.Request(names...)
	q, err := s.engine.NewInstantQuery(ctx, s.Store, s.opts, expr, at)
	if err != nil {
		return res, fmt.Errorf("preparing %q: %w", expr, err)
	}
	defer q.Close()
	r := q.Exec(ctx)
	if r.Err != nil {
		return res, fmt.Errorf("evaluating %q: %w", expr, r.Err)
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
			res.Samples = append(res.Samples, signals.Sample{Labels: toLabels(smp.Metric), Value: smp.F})
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
			smp := signals.Sample{Labels: toLabels(series.Metric)}
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

func toLabels(l labels.Labels) signals.Labels {
	out := make(signals.Labels, l.Len())
	l.Range(func(x labels.Label) {
		if x.Name != metricName {
			out[x.Name] = x.Value
		}
	})
	return out
}
