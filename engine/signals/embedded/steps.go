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

	"github.com/setpoint-dev/setpoint/engine/signals"
)

// A subquery such as x[30m:30s] evaluates x at every 30 s step of the
// last 30 minutes, each time it is asked: a reconcile every few seconds
// re-evaluates some sixty steps of which one or none is new. The steps
// are aligned to the step (not to the evaluation time), so two
// evaluations a few seconds apart share all but their newest steps. The
// source keeps each subquery's step results and evaluates only the steps
// it cannot trust (stepTrusted), then evaluates the whole expression with
// the subquery read from those steps as if they were samples of a series.
// The answer is the subquery's: a range selector over the steps in
// (t − range, t] selects exactly the steps the subquery would evaluate.

// stepPrefix names the series the kept steps are served as. A name with
// two leading underscores is reserved: no scraped metric has one.
const stepPrefix = "__setpoint_steps_"

// freshSteps is how long after its time a step may still change: a
// scrape's samples land a little after their timestamp. A step is kept
// only once it was evaluated with the store this far past it; samples
// landing later than that are logged by the store (lateLog) and undo the
// steps they fall in.
const freshSteps = time.Minute

// The kept steps are bounded: at most maxStepEntries subqueries, at most
// maxKeptSamples samples over all of them (the least recently used go
// first), and a subquery not asked for in stepIdle is forgotten.
const (
	maxStepEntries = 64
	maxKeptSamples = 1 << 20
	stepIdle       = time.Hour
)

type stepKey struct {
	inner string
	step  time.Duration
}

// keptStep is the inner expression's samples at one step, and whether
// they were evaluated late enough to keep (freshSteps after the step).
type keptStep struct {
	samples []promql.Sample
	settled bool
}

// stepEntry is one subquery's kept steps, by step time.
type stepEntry struct {
	mu   sync.Mutex
	name string
	// off: the inner expression's series carry a metric name (or a
	// histogram), which the served series cannot, or its steps alone
	// pass the budget: the subquery is evaluated as written.
	off   bool
	steps map[int64]keptStep
	// samples kept, over all steps: written under mu, read without it
	// by the budget (fit).
	samples  atomic.Int64
	maxRange time.Duration
	lateSeq  uint64 // the store's late appends seen
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

func (c *stepCache) entry(k stepKey, at time.Time) *stepEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[stepKey]*stepEntry{}
	}
	for k2, e2 := range c.entries {
		if at.Sub(e2.used) > stepIdle {
			delete(c.entries, k2)
		}
	}
	e, ok := c.entries[k]
	if !ok {
		if len(c.entries) >= maxStepEntries {
			c.dropOldest(nil)
		}
		c.next++
		e = &stepEntry{name: stepPrefix + strconv.Itoa(c.next), steps: map[int64]keptStep{}}
		c.entries[k] = e
	}
	e.used = at
	return e
}

// dropOldest forgets the least recently used entry other than keep.
// Called with c.mu held.
func (c *stepCache) dropOldest(keep *stepEntry) bool {
	var oldest stepKey
	var found *stepEntry
	for k, e := range c.entries {
		if e != keep && (found == nil || e.used.Before(found.used)) {
			oldest, found = k, e
		}
	}
	if found != nil {
		delete(c.entries, oldest)
	}
	return found != nil
}

// fit forgets the least recently used entries other than kept until the
// samples kept are within maxKeptSamples. It reads the counts without the
// entries' locks: an entry's lock is held while it asks for c.mu, so
// taking one under c.mu could deadlock.
func (c *stepCache) fit(kept *stepEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		total := int64(0)
		for _, e := range c.entries {
			total += e.samples.Load()
		}
		if total <= maxKeptSamples || !c.dropOldest(kept) {
			return
		}
	}
}

// nameKeeping are functions whose result keeps its series' names, and
// the ones that order or pick among series, whose ties and limits could
// follow the served series' order, not the subquery's: an expression
// that uses one is evaluated as written.
var nameKeeping = map[string]bool{"last_over_time": true, "first_over_time": true, "ts_of_last_over_time": true,
	"ts_of_first_over_time": true, "ts_of_max_over_time": true, "ts_of_min_over_time": true}

// subqueryReusable says whether sq's steps can be kept: a literal range
// and step, no offset or @ on it or inside it, no subquery inside.
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
			// A negative offset reads samples after the step, which land
			// after it was kept.
			if x.Timestamp != nil || x.StartOrEnd != 0 || x.OriginalOffsetExpr != nil || x.OriginalOffset < 0 {
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

// readsNames says whether e could tell the served series from the
// subquery's: it names __name__ (label_replace, label_join, by, on), keeps
// a series' name through a range function, or picks among series (topk,
// bottomk, limitk, limit_ratio), whose ties follow series order.
func readsNames(e parser.Expr) bool {
	found := false
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		switch x := n.(type) {
		case *parser.StringLiteral:
			found = found || x.Val == metricName
		case *parser.AggregateExpr:
			found = found || slices.Contains(x.Grouping, metricName) || x.Op == parser.TOPK || x.Op == parser.BOTTOMK ||
				x.Op == parser.LIMITK || x.Op == parser.LIMIT_RATIO
		case *parser.BinaryExpr:
			if vm := x.VectorMatching; vm != nil {
				found = found || slices.Contains(vm.MatchingLabels, metricName) || slices.Contains(vm.Include, metricName)
			}
		case *parser.Call:
			found = found || nameKeeping[x.Func.Name]
		}
		return nil
	})
	return found
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
	if readsNames(e) {
		return "", nil, false
	}
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

// steps brings sq's kept steps up to `at` and returns them as series of a
// name of the entry and range (one inner expression may be asked over
// two ranges in one query).
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
	stepMs := sq.Step.Milliseconds()
	// Samples that landed late since the last look undo the steps whose
	// windows they fall in (and every later one, to be simple).
	mark := s.Store.watermark()
	if oldest, any, lost := s.Store.lateSince(e.lateSeq); lost {
		e.forget(func(int64) bool { return true })
	} else if any {
		e.forget(func(t int64) bool { return t >= oldest })
	}
	e.lateSeq = mark.lateSeq
	lookback := s.opts.LookbackDelta()
	if lookback <= 0 {
		lookback = signals.DefaultLookbackDelta
	}
	horizon := mark.horizon + innerLookback(sq.Expr, lookback).Milliseconds()
	var runs [][2]int64 // contiguous spans of steps to evaluate
	for _, t := range need {
		if stepTrusted(e.steps[t], t, horizon) {
			continue
		}
		if n := len(runs); n > 0 && runs[n-1][1] == t-stepMs {
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
		for t := run[0]; t <= run[1]; t += stepMs {
			e.samples.Add(int64(len(got[t]) - len(e.steps[t].samples)))
			// Nothing at a step is kept as such: the inner had no value.
			e.steps[t] = keptStep{samples: got[t], settled: mark.maxT >= t+freshSteps.Milliseconds()}
			evaluated++
		}
	}
	s.stepCache.evaluated.Add(evaluated)
	s.stepCache.served.Add(int64(len(need)) - evaluated)
	// Steps no longer in any range asked for go.
	e.maxRange = max(e.maxRange, sq.Range)
	oldest := atMs - e.maxRange.Milliseconds() - stepMs
	e.forget(func(t int64) bool { return t <= oldest || t > atMs+e.maxRange.Milliseconds() })
	if e.samples.Load() > maxKeptSamples {
		e.off = true
		e.forget(func(int64) bool { return true })
		return "", nil, false
	}
	s.stepCache.fit(e)
	name := e.name + "_" + strconv.FormatInt(sq.Range.Milliseconds(), 10)
	return name, e.series(name, need), true
}

// stepTrusted says whether a kept step answers as evaluating it now
// would: it was evaluated freshSteps after its time (no late sample has
// undone it since), and what it reads is inside the store's retention
// (horizon), where evaluating it now would see less.
func stepTrusted(k keptStep, t, horizon int64) bool {
	return k.settled && t >= horizon
}

// forget drops the kept steps drop says.
func (e *stepEntry) forget(drop func(int64) bool) {
	for t, k := range e.steps {
		if drop(t) {
			e.samples.Add(-int64(len(k.samples)))
			delete(e.steps, t)
		}
	}
}

// series are the kept steps of need as series named name, in label order.
func (e *stepEntry) series(name string, need []int64) []storage.Series {
	type byLabels struct {
		key labels.Labels // the inner's labels, without the name
		s   *series
	}
	byHash := map[uint64][]byLabels{}
	var out []storage.Series
	for _, t := range need {
		for _, smp := range e.steps[t].samples {
			h := smp.Metric.Hash()
			var sr *series
			for _, c := range byHash[h] {
				if labels.Equal(c.key, smp.Metric) {
					sr = c.s
				}
			}
			if sr == nil {
				sr = &series{lbls: labels.NewBuilder(smp.Metric).Set(metricName, name).Labels()}
				byHash[h] = append(byHash[h], byLabels{smp.Metric, sr})
				out = append(out, sr)
			}
			sr.ts, sr.vs = append(sr.ts, t), append(sr.vs, smp.F)
		}
	}
	slices.SortFunc(out, func(a, b storage.Series) int { return labels.Compare(a.Labels(), b.Labels()) })
	return out
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
			e.forget(func(int64) bool { return true })
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
