// Package embedded is the default signal source: an in-memory store with
// bounded retention, evaluated by the real PromQL engine through a small
// storage.Queryable of its own.
package embedded

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/util/annotations"
)

// metricName is the label holding a series' metric name.
const metricName = model.MetricNameLabel

// DefaultRetention is how much history the store keeps.
const DefaultRetention = 30 * time.Minute

// Store holds float samples per series for a bounded window. Appends must
// be in time order per series. It is safe for concurrent use.
type Store struct {
	mu        sync.RWMutex
	retention int64 // ms
	series    map[uint64][]*memSeries
	byName    map[string][]*memSeries
	requested *requestedNames
	nseries   int
	lastSweep int64
	maxT      int64 // newest sample: the retention window ends here
	timed     bool  // a sample has set maxT
	late      lateLog
}

// lateLog records the samples appended more than freshSteps older than
// the newest one, for readers that keep results computed from older data
// (the kept subquery steps): a ring of their timestamps by sequence.
type lateLog struct {
	seq  uint64
	ring [256]int64
}

// watermark is what a reader keeping results notes of the store: its
// newest sample, the oldest time a query can read, and the late samples
// logged so far.
type watermark struct {
	maxT, horizon int64
	lateSeq       uint64
}

func (s *Store) watermark() watermark {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return watermark{maxT: s.maxT, horizon: s.maxT - s.retention, lateSeq: s.late.seq}
}

// lateSince is the oldest timestamp of the late samples logged after seq
// `from` (any false: none); lost says the log no longer reaches back to
// from, so any kept result may be undone.
func (s *Store) lateSince(from uint64) (oldest int64, any, lost bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.late.seq-from > uint64(len(s.late.ring)) {
		return 0, false, true
	}
	for q := from; q < s.late.seq; q++ {
		t := s.late.ring[q%uint64(len(s.late.ring))]
		if !any || t < oldest {
			oldest, any = t, true
		}
	}
	return oldest, any, false
}

type memSeries struct {
	lbls    labels.Labels
	name    string
	dropped bool // swept out of the store; a Ref to it must re-create it
	ts      []int64
	vs      []float64
	start   int // samples before start are expired
}

// Ref names a series for repeated appends without hashing its labels.
type Ref struct{ s *memSeries }

// NewStore returns a store keeping retention of history (0: the default).
func NewStore(retention time.Duration) *Store {
	if retention <= 0 {
		retention = DefaultRetention
	}
	return &Store{
		retention: retention.Milliseconds(),
		series:    map[uint64][]*memSeries{},
		byName:    map[string][]*memSeries{},
		requested: newRequestedNames(MaxRequested),
	}
}

// Request registers metric names a query needs. Scraped samples of names no
// query has asked for are dropped; registration is not retroactive. A name
// is forgotten when no query has asked for it within the retention and its
// series have all left the store, or when MaxRequested newer names push it
// out.
func (s *Store) Request(names ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range names {
		s.requested.ask(n, s.maxT)
	}
}

// Requested reports whether a query has asked for the metric name.
func (s *Store) Requested(name string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.requested.has(name)
}

// AppendScraped records a scraped sample if its metric name was requested.
func (s *Store) AppendScraped(l labels.Labels, t int64, v float64) (bool, error) {
	if !s.Requested(l.Get(metricName)) {
		return false, nil
	}
	_, err := s.Append(l, t, v)
	return err == nil, err
}

// Append records a sample whatever its name (the sim world records every
// metric it exposes) and returns the series' ref for later appends.
func (s *Store) Append(l labels.Labels, t int64, v float64) (Ref, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ms := s.getOrCreate(l)
	return Ref{ms}, s.appendLocked(ms, t, v)
}

// AppendRef records a sample on a series returned by Append; it updates r
// when the series had expired and was recreated.
func (s *Store) AppendRef(r *Ref, t int64, v float64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.s == nil {
		return fmt.Errorf("append: nil series ref")
	}
	if r.s.dropped {
		r.s = s.getOrCreate(r.s.lbls)
	}
	return s.appendLocked(r.s, t, v)
}

// AppendCached appends through a handle the caller keeps per series (the
// sim world's path): the first call hashes the labels, later ones do not.
func (s *Store) AppendCached(l labels.Labels, cache *any, t int64, v float64) error {
	if r, ok := (*cache).(*Ref); ok {
		return s.AppendRef(r, t, v)
	}
	ref, err := s.Append(l, t, v)
	*cache = &ref
	return err
}

func (s *Store) lookup(l labels.Labels) *memSeries {
	for _, ms := range s.series[l.Hash()] {
		if labels.Equal(ms.lbls, l) {
			return ms
		}
	}
	return nil
}

func (s *Store) getOrCreate(l labels.Labels) *memSeries {
	if ms := s.lookup(l); ms != nil {
		return ms
	}
	ms := &memSeries{lbls: l, name: l.Get(metricName)}
	h := l.Hash()
	s.series[h] = append(s.series[h], ms)
	s.byName[ms.name] = append(s.byName[ms.name], ms)
	s.nseries++
	return ms
}

func (s *Store) appendLocked(ms *memSeries, t int64, v float64) error {
	if n := len(ms.ts); n > ms.start && t <= ms.ts[n-1] {
		if t == ms.ts[n-1] {
			ms.vs[n-1] = v // a repeated timestamp overwrites, as a re-scrape would
			return nil
		}
		return fmt.Errorf("out-of-order sample for %s: %d after %d", ms.lbls, t, ms.ts[n-1])
	}
	if s.timed && t <= s.maxT-freshSteps.Milliseconds() {
		s.late.ring[s.late.seq%uint64(len(s.late.ring))] = t
		s.late.seq++
	}
	ms.ts = append(ms.ts, t)
	ms.vs = append(ms.vs, v)
	s.maxT = max(s.maxT, t)
	if !s.timed {
		s.timed = true
		s.requested.restamp(s.maxT)
	}
	ms.expire(t - s.retention)
	// Series nobody writes any more are swept a few times per retention,
	// and with them the names nobody asks for any more.
	if t-s.lastSweep > s.retention/4 {
		s.lastSweep = t
		s.dropStale(t - s.retention)
		s.requested.expire(t-s.retention, func(name string) bool { return len(s.byName[name]) > 0 })
	}
	return nil
}

// expire forgets samples older than min, compacting when half is dead so
// memory stays proportional to the retention window.
func (ms *memSeries) expire(min int64) {
	for ms.start < len(ms.ts) && ms.ts[ms.start] < min {
		ms.start++
	}
	if ms.start > 64 && ms.start*2 > len(ms.ts) {
		n := copy(ms.ts, ms.ts[ms.start:])
		copy(ms.vs, ms.vs[ms.start:])
		ms.ts, ms.vs, ms.start = ms.ts[:n], ms.vs[:n], 0
	}
}

// dropStale removes series whose every sample is older than min, in one
// pass over the store (never a scan per removed series: churn of pods makes
// many at once).
func (s *Store) dropStale(min int64) {
	removed := false
	for h, list := range s.series {
		kept := list[:0]
		for _, ms := range list {
			ms.expire(min)
			if ms.start < len(ms.ts) {
				kept = append(kept, ms)
				continue
			}
			ms.dropped = true
			removed = true
			s.nseries--
		}
		if len(kept) == 0 {
			delete(s.series, h)
		} else {
			s.series[h] = kept
		}
	}
	if !removed {
		return
	}
	for name, list := range s.byName {
		kept := list[:0]
		for _, ms := range list {
			if !ms.dropped {
				kept = append(kept, ms)
			}
		}
		if len(kept) == 0 {
			delete(s.byName, name)
		} else {
			s.byName[name] = kept
		}
	}
}

// Stats describes the store's contents.
type Stats struct {
	Series, Samples int
	MinT, MaxT      int64
}

// Stats counts the series and samples inside the retention window. Samples
// of series no longer written leave memory at the next sweep, within a
// quarter of the retention; they are never visible to queries.
func (s *Store) Stats() Stats {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st := Stats{MinT: 1<<63 - 1}
	floor := s.maxT - s.retention
	for _, list := range s.series {
		for _, ms := range list {
			lo := ms.start + sort.Search(len(ms.ts)-ms.start, func(i int) bool { return ms.ts[ms.start+i] >= floor })
			n := len(ms.ts) - lo
			if n == 0 {
				continue
			}
			st.Series++
			st.Samples += n
			st.MinT = min(st.MinT, ms.ts[lo])
			st.MaxT = max(st.MaxT, ms.ts[len(ms.ts)-1])
		}
	}
	if st.Series == 0 {
		st.MinT = 0
	}
	return st
}

// Querier implements storage.Queryable.
func (s *Store) Querier(mint, maxt int64) (storage.Querier, error) {
	return &querier{s: s, mint: mint, maxt: maxt}, nil
}

type querier struct {
	s          *Store
	mint, maxt int64
}

func (q *querier) Select(_ context.Context, sortSeries bool, _ *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	q.s.mu.RLock()
	defer q.s.mu.RUnlock()
	mint := max(q.mint, q.s.maxT-q.s.retention)
	var candidates []*memSeries
	named := false
	for _, m := range ms {
		if m.Name == metricName && m.Type == labels.MatchEqual {
			candidates, named = q.s.byName[m.Value], true
			break
		}
	}
	if !named {
		for _, list := range q.s.byName {
			candidates = append(candidates, list...)
		}
	}
	var out []storage.Series
	for _, c := range candidates {
		if !matches(c.lbls, ms) {
			continue
		}
		// Copy the window: appends after this call must not move it.
		lo := c.start + sort.Search(len(c.ts)-c.start, func(i int) bool { return c.ts[c.start+i] >= mint })
		hi := c.start + sort.Search(len(c.ts)-c.start, func(i int) bool { return c.ts[c.start+i] > q.maxt })
		if lo >= hi {
			continue
		}
		out = append(out, &series{lbls: c.lbls, ts: append([]int64(nil), c.ts[lo:hi]...), vs: append([]float64(nil), c.vs[lo:hi]...)})
	}
	if sortSeries {
		sort.Slice(out, func(i, j int) bool { return labels.Compare(out[i].Labels(), out[j].Labels()) < 0 })
	}
	return &seriesSet{list: out, i: -1}
}

func matches(l labels.Labels, ms []*labels.Matcher) bool {
	for _, m := range ms {
		if !m.Matches(l.Get(m.Name)) {
			return false
		}
	}
	return true
}

func (q *querier) LabelValues(_ context.Context, name string, _ *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	q.s.mu.RLock()
	defer q.s.mu.RUnlock()
	set := map[string]bool{}
	for _, list := range q.s.byName {
		for _, s := range list {
			if v := s.lbls.Get(name); v != "" && matches(s.lbls, ms) {
				set[v] = true
			}
		}
	}
	return sortedKeys(set), nil, nil
}

func (q *querier) LabelNames(_ context.Context, _ *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	q.s.mu.RLock()
	defer q.s.mu.RUnlock()
	set := map[string]bool{}
	for _, list := range q.s.byName {
		for _, s := range list {
			if matches(s.lbls, ms) {
				s.lbls.Range(func(l labels.Label) { set[l.Name] = true })
			}
		}
	}
	return sortedKeys(set), nil, nil
}

func (q *querier) Close() error { return nil }

func sortedKeys(m map[string]bool) []string {
	return slices.Sorted(maps.Keys(m))
}

type seriesSet struct {
	list []storage.Series
	i    int
}

func (s *seriesSet) Next() bool                        { s.i++; return s.i < len(s.list) }
func (s *seriesSet) At() storage.Series                { return s.list[s.i] }
func (s *seriesSet) Err() error                        { return nil }
func (s *seriesSet) Warnings() annotations.Annotations { return nil }

type series struct {
	lbls labels.Labels
	ts   []int64
	vs   []float64
}

func (s *series) Labels() labels.Labels { return s.lbls }

func (s *series) Iterator(it chunkenc.Iterator) chunkenc.Iterator {
	if r, ok := it.(*iterator); ok {
		r.ts, r.vs, r.i = s.ts, s.vs, -1
		return r
	}
	return &iterator{ts: s.ts, vs: s.vs, i: -1}
}

// iterator walks float samples; the store holds no native histograms.
type iterator struct {
	ts []int64
	vs []float64
	i  int
}

func (it *iterator) Next() chunkenc.ValueType {
	if it.i+1 >= len(it.ts) {
		it.i = len(it.ts)
		return chunkenc.ValNone
	}
	it.i++
	return chunkenc.ValFloat
}

func (it *iterator) Seek(t int64) chunkenc.ValueType {
	if it.i < 0 {
		it.i = 0
	}
	if it.i >= len(it.ts) {
		return chunkenc.ValNone
	}
	if it.ts[it.i] >= t {
		return chunkenc.ValFloat
	}
	it.i += sort.Search(len(it.ts)-it.i, func(j int) bool { return it.ts[it.i+j] >= t })
	if it.i >= len(it.ts) {
		return chunkenc.ValNone
	}
	return chunkenc.ValFloat
}

func (it *iterator) At() (int64, float64) { return it.ts[it.i], it.vs[it.i] }
func (it *iterator) AtHistogram(*histogram.Histogram) (int64, *histogram.Histogram) {
	return it.ts[it.i], nil
}
func (it *iterator) AtFloatHistogram(*histogram.FloatHistogram) (int64, *histogram.FloatHistogram) {
	return it.ts[it.i], nil
}
func (it *iterator) AtT() int64  { return it.ts[it.i] }
func (it *iterator) AtST() int64 { return 0 }
func (it *iterator) Err() error  { return nil }
