package embedded

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
)

// A subquery such as x[30m:30s] evaluates x at every 30 s step of the
// last 30 minutes, each time it is asked: a reconcile every few seconds
// re-evaluates some sixty steps of which one or none is new. The steps
// are aligned to the step (not to the evaluation time), so two
// evaluations a few seconds apart share all but their newest steps. The
// source keeps each subquery's step results and evaluates only the steps
// it lacks plus those of the last minute (freshSteps: a scrape's samples
// may land a little after their timestamp), then evaluates the whole
// expression with the subquery read from those steps as if they were
// samples of a series. The answer is the subquery's: a range selector
// over the steps in (t − range, t] selects exactly the steps the subquery
// would evaluate.

// stepPrefix names the series the kept steps are served as. A name with
// two leading underscores is reserved: no scraped metric has one.
const stepPrefix = "__setpoint_steps_"

// freshSteps is how far back steps are evaluated again every time.
const freshSteps = time.Minute

// maxStepEntries bounds the subqueries whose steps are kept.
const maxStepEntries = 64

type stepKey struct {
	inner string
	step  time.Duration
}

// stepEntry is one subquery's kept steps: by step time, the inner
// expression's samples there.
type stepEntry struct {
	mu   sync.Mutex
	name string
	// off: the inner expression's series carry a metric name (or a
	// histogram), which the served series cannot: the subquery is
	// evaluated as written.
	off      bool
	steps    map[int64][]promql.Sample
	maxRange time.Duration
	used     time.Time
}

type stepCache struct {
	mu      sync.Mutex
	entries map[stepKey]*stepEntry
	next    int
	// evaluated and served count steps evaluated and steps read from the
	// cache (what the reuse saves, for tests and benchmarks).
	evaluated, served atomic.Int64
}

func (c *stepCache) entry(k stepKey, now time.Time) *stepEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[stepKey]*stepEntry{}
	}
	e, ok := c.entries[k]
	if !ok {
		if len(c.entries) >= maxStepEntries {
			// The least recently used goes.
			var oldest stepKey
			first := true
			for k2, e2 := range c.entries {
				if first || e2.used.Before(c.entries[oldest].used) {
					oldest, first = k2, false
				}
			}
			delete(c.entries, oldest)
		}
		c.next++
		e = &stepEntry{name: stepPrefix + strconv.Itoa(c.next), steps: map[int64][]promql.Sample{}}
		c.entries[k] = e
	}
	e.used = now
	return e
}

// subqueryReusable says whether sq's steps can be kept: a literal range
// and step, no offset or @ anywhere in it, no subquery inside.
func subqueryReusable(sq *parser.SubqueryExpr) bool {
	if sq.Step <= 0 || sq.Range < sq.Step || sq.RangeExpr != nil || sq.StepExpr != nil || sq.OriginalOffsetExpr != nil ||
		sq.OriginalOffset != 0 || sq.Offset != 0 || sq.Timestamp != nil || sq.StartOrEnd != 0 {
		return false
	}
	ok := true
	parser.Inspect(sq.Expr, func(n parser.Node, _ []parser.Node) error {
		switch x := n.(type) {
		case *parser.SubqueryExpr:
			ok = false
		case *parser.VectorSelector:
			if x.Timestamp != nil || x.StartOrEnd != 0 || x.OriginalOffsetExpr != nil {
				ok = false
			}
		case *parser.MatrixSelector:
			if x.RangeExpr != nil {
				ok = false
			}
		}
		return nil
	})
	return ok
}

// stepTimes are the times (ms) a subquery of rng and step evaluates at,
// as the engine aligns them: multiples of step in (at − rng, at].
func stepTimes(at int64, rng, step time.Duration) []int64 {
	st, r := step.Milliseconds(), rng.Milliseconds()
	start := st * ((at - r) / st)
	if start <= at-r {
		start += st
	}
	var out []int64
	for t := start; t <= at; t += st {
		out = append(out, t)
	}
	return out
}

// withSteps rewrites e's reusable subqueries into range selectors over
// series of their kept steps, evaluating the steps missing at `at`. It
// returns the expression to evaluate and what to evaluate it on; ok is
// false when nothing was rewritten (e is evaluated as written).
func (s *Source) withSteps(ctx context.Context, e parser.Expr, at time.Time) (string, storage.Queryable, bool) {
	served := map[string][]storage.Series{}
	var failed bool
	var rewrite func(parser.Expr) parser.Expr
	rewrite = func(n parser.Expr) parser.Expr {
		switch x := n.(type) {
		case *parser.SubqueryExpr:
			if subqueryReusable(x) {
				if name, series, ok := s.steps(ctx, x, at); ok {
					served[name] = series
					m := labels.MustNewMatcher(labels.MatchEqual, metricName, name)
					return &parser.MatrixSelector{VectorSelector: &parser.VectorSelector{Name: name, LabelMatchers: []*labels.Matcher{m}}, Range: x.Range}
				}
				failed = true
			}
			// A subquery inside another is evaluated at the outer one's
			// steps, not at `at`: it is left as written.
			return x
		case *parser.AggregateExpr:
			x.Expr = rewrite(x.Expr)
			if x.Param != nil {
				x.Param = rewrite(x.Param)
			}
		case *parser.BinaryExpr:
			x.LHS, x.RHS = rewrite(x.LHS), rewrite(x.RHS)
		case *parser.Call:
			for i := range x.Args {
				x.Args[i] = rewrite(x.Args[i])
			}
		case *parser.ParenExpr:
			x.Expr = rewrite(x.Expr)
		case *parser.UnaryExpr:
			x.Expr = rewrite(x.Expr)
		}
		return n
	}
	out := rewrite(e)
	if len(served) == 0 || failed {
		return "", nil, false
	}
	return out.String(), &stepQueryable{store: s.Store, served: served}, true
}

// steps brings sq's kept steps up to `at` and returns them as series of
// the entry's name.
func (s *Source) steps(ctx context.Context, sq *parser.SubqueryExpr, at time.Time) (string, []storage.Series, bool) {
	e := s.stepCache.entry(stepKey{inner: sq.Expr.String(), step: sq.Step}, at)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.off {
		return "", nil, false
	}
	atMs := at.UnixMilli()
	need := stepTimes(atMs, sq.Range, sq.Step)
	if len(need) == 0 {
		return "", nil, false
	}
	// A step is evaluated again when it is new, within the last minute, or
	// when what it reads reaches past the store's retention now (the
	// subquery would see less there than when the step was kept).
	fresh := atMs - freshSteps.Milliseconds()
	horizon := s.Store.horizon() + innerLookback(sq.Expr, s.opts.LookbackDelta()).Milliseconds()
	var runs [][2]int64 // contiguous spans of steps to evaluate
	for _, t := range need {
		if _, kept := e.steps[t]; kept && t <= fresh && t >= horizon {
			continue
		}
		if n := len(runs); n > 0 && runs[n-1][1] == t-sq.Step.Milliseconds() {
			runs[n-1][1] = t
		} else {
			runs = append(runs, [2]int64{t, t})
		}
	}
	evaluated := int64(0)
	for _, run := range runs {
		got, ok := s.evalSteps(ctx, e, sq, run[0], run[1])
		if !ok {
			return "", nil, false
		}
		for t := run[0]; t <= run[1]; t += sq.Step.Milliseconds() {
			e.steps[t] = got[t] // nil where the inner had nothing: kept as such
			evaluated++
		}
	}
	s.stepCache.evaluated.Add(evaluated)
	s.stepCache.served.Add(int64(len(need)) - evaluated)
	// Steps no longer in any range asked for go.
	e.maxRange = max(e.maxRange, sq.Range)
	oldest := atMs - e.maxRange.Milliseconds()
	for t := range e.steps {
		if t <= oldest-sq.Step.Milliseconds() || t > atMs+e.maxRange.Milliseconds() {
			delete(e.steps, t)
		}
	}
	bySeries := map[uint64]*series{}
	var order []uint64
	for _, t := range need {
		for _, smp := range e.steps[t] {
			h := smp.Metric.Hash()
			sr, ok := bySeries[h]
			if !ok {
				sr = &series{lbls: labels.NewBuilder(smp.Metric).Set(metricName, e.name).Labels()}
				bySeries[h] = sr
				order = append(order, h)
			}
			sr.ts, sr.vs = append(sr.ts, t), append(sr.vs, smp.F)
		}
	}
	out := make([]storage.Series, 0, len(order))
	for _, h := range order {
		out = append(out, bySeries[h])
	}
	return e.name, out, true
}

// evalSteps evaluates sq's inner expression at its steps from..to (ms).
// ok is false when it cannot (the subquery is then evaluated as written,
// which says why), or when the inner's series carry a metric name or a
// histogram, which the served series cannot (the entry is turned off).
func (s *Source) evalSteps(ctx context.Context, e *stepEntry, sq *parser.SubqueryExpr, from, to int64) (map[int64][]promql.Sample, bool) {
	q, err := s.engine.NewRangeQuery(ctx, s.Store, s.opts, sq.Expr.String(), time.UnixMilli(from), time.UnixMilli(to), sq.Step)
	if err != nil {
		return nil, false
	}
	defer q.Close()
	r := q.Exec(ctx)
	m, err := r.Matrix()
	if r.Err != nil || err != nil {
		return nil, false
	}
	got := map[int64][]promql.Sample{}
	for _, sr := range m {
		if sr.Metric.Has(metricName) || len(sr.Histograms) > 0 {
			e.off = true
			return nil, false
		}
		for _, p := range sr.Floats {
			got[p.T] = append(got[p.T], promql.Sample{Metric: sr.Metric, T: p.T, F: p.F})
		}
	}
	return got, true
}

// innerLookback is how far before an evaluation time expr reads samples:
// its longest range or, for an instant selector, the lookback, plus any
// offset.
func innerLookback(expr parser.Expr, lookback time.Duration) time.Duration {
	var most time.Duration
	parser.Inspect(expr, func(n parser.Node, path []parser.Node) error {
		switch x := n.(type) {
		case *parser.MatrixSelector:
			if vs, ok := x.VectorSelector.(*parser.VectorSelector); ok {
				most = max(most, x.Range+vs.OriginalOffset)
			}
		case *parser.VectorSelector:
			if len(path) == 0 || !isMatrix(path[len(path)-1]) {
				most = max(most, lookback+x.OriginalOffset)
			}
		}
		return nil
	})
	return most
}

func isMatrix(n parser.Node) bool {
	_, ok := n.(*parser.MatrixSelector)
	return ok
}

// stepQueryable serves the kept steps' series by their names and the
// store for everything else.
type stepQueryable struct {
	store  *Store
	served map[string][]storage.Series
}

func (q *stepQueryable) Querier(mint, maxt int64) (storage.Querier, error) {
	inner, err := q.store.Querier(mint, maxt)
	if err != nil {
		return nil, err
	}
	return &stepQuerier{Querier: inner, served: q.served, mint: mint, maxt: maxt}, nil
}

type stepQuerier struct {
	storage.Querier
	served     map[string][]storage.Series
	mint, maxt int64
}

func (q *stepQuerier) Select(ctx context.Context, sortSeries bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	for _, m := range ms {
		if m.Name != metricName || m.Type != labels.MatchEqual || !strings.HasPrefix(m.Value, stepPrefix) {
			continue
		}
		var out []storage.Series
		for _, sr := range q.served[m.Value] {
			x := sr.(*series)
			if !matches(x.lbls, ms) {
				continue
			}
			lo, _ := slices.BinarySearch(x.ts, q.mint)
			hi, found := slices.BinarySearch(x.ts, q.maxt)
			if found {
				hi++
			}
			if lo < hi {
				out = append(out, &series{lbls: x.lbls, ts: x.ts[lo:hi], vs: x.vs[lo:hi]})
			}
		}
		if sortSeries {
			slices.SortFunc(out, func(a, b storage.Series) int { return labels.Compare(a.Labels(), b.Labels()) })
		}
		return &seriesSet{list: out, i: -1}
	}
	return q.Querier.Select(ctx, sortSeries, hints, ms...)
}

// stripStepName drops a kept-steps series' name from a result's labels
// (the subquery it stands for had no name there).
func stripStepName(l labels.Labels) labels.Labels {
	if strings.HasPrefix(l.Get(metricName), stepPrefix) {
		return labels.NewBuilder(l).Del(metricName).Labels()
	}
	return l
}
