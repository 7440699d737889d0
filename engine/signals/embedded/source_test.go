package embedded

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/setpoint-dev/setpoint/engine/signals"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }

func ms(sec int) int64 { return at(sec).UnixMilli() }

func put(t *testing.T, s *Store, l labels.Labels, pts map[int]float64) {
	t.Helper()
	secs := make([]int, 0, len(pts))
	for k := range pts {
		secs = append(secs, k)
	}
	for i := 0; i < len(secs); i++ {
		for j := i + 1; j < len(secs); j++ {
			if secs[j] < secs[i] {
				secs[i], secs[j] = secs[j], secs[i]
			}
		}
	}
	for _, sec := range secs {
		if _, err := s.Append(l, ms(sec), pts[sec]); err != nil {
			t.Fatal(err)
		}
	}
}

func query(t *testing.T, src *Source, expr string, sec int) signals.Result {
	t.Helper()
	r, err := src.Query(context.Background(), expr, at(sec))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestPromQLHandComputed checks the real engine over our Queryable against
// values worked out by hand from Prometheus's definitions.
func TestPromQLHandComputed(t *testing.T) {
	s := NewStore(0)
	src := NewSource(s)
	// A counter rising 1/s, sampled every 15 s.
	steady := map[int]float64{}
	for sec := 0; sec <= 120; sec += 15 {
		steady[sec] = float64(sec)
	}
	put(t, s, labels.FromStrings("__name__", "req_total", "app", "a", "pod", "a-1"), steady)
	// A counter that resets: 15, 30, then 5, 20 in (0, 60].
	put(t, s, labels.FromStrings("__name__", "req_total", "app", "b", "pod", "b-1"), map[int]float64{0: 0, 15: 15, 30: 30, 45: 5, 60: 20})
	// Histogram buckets whose counters rise at 50, 90, 99 and 100 per second.
	for le, perSec := range map[string]float64{"0.1": 50, "0.25": 90, "0.5": 99, "+Inf": 100} {
		pts := map[int]float64{}
		for sec := 0; sec <= 120; sec += 15 {
			pts[sec] = perSec * float64(sec)
		}
		put(t, s, labels.FromStrings("__name__", "lat_bucket", "app", "a", "le", le), pts)
	}
	put(t, s, labels.FromStrings("__name__", "mem", "pod", "a-1"), map[int]float64{0: 100, 30: 200, 60: 300})
	put(t, s, labels.FromStrings("__name__", "broken", "pod", "a-1"), map[int]float64{60: math.NaN()})

	cases := []struct {
		expr string
		sec  int
		want map[string]float64 // by app label ("" for an unlabelled sample)
	}{
		// 45 s of samples in (60, 120], extrapolated to the window: 1/s.
		{`rate(req_total{app="a"}[1m])`, 120, map[string]float64{"a": 1}},
		// Reset-corrected increase 20+30-15 = 35 over 45 s sampled; the first
		// sample is 15 s after the window's start (< 1.1 × the 15 s interval)
		// and zero is 45×15/35 = 19.3 s before it, so it extrapolates to the
		// full 60 s: 35 × 60/45 = 46.67 → 0.7778/s.
		{`rate(req_total{app="b"}[1m])`, 60, map[string]float64{"b": 35.0 * 60 / 45 / 60}},
		{`increase(req_total{app="b"}[1m])`, 60, map[string]float64{"b": 35.0 * 60 / 45}},
		{`sum(rate(req_total[1m]))`, 60, map[string]float64{"": 1 + 35.0*60/45/60}},
		{`sum by (app) (rate(req_total[1m]))`, 60, map[string]float64{"a": 1, "b": 35.0 * 60 / 45 / 60}},
		// Rates 50/90/99/100: q=0.99 → rank 99 in (0.25, 0.5]: 0.25 + 0.25×9/9.
		{`histogram_quantile(0.99, sum by (le) (rate(lat_bucket[1m])))`, 120, map[string]float64{"": 0.5}},
		// q=0.95 → rank 95: 0.25 + 0.25 × (95-90)/(99-90).
		{`histogram_quantile(0.95, sum by (le) (rate(lat_bucket[1m])))`, 120, map[string]float64{"": 0.25 + 0.25*5/9}},
		// q=0.5 → rank 50 in the first bucket, from 0: 0.1 × 50/50.
		{`histogram_quantile(0.5, sum by (le) (rate(lat_bucket[1m])))`, 120, map[string]float64{"": 0.1}},
		// Samples at 30 and 60 fall in (0, 60].
		{`avg_over_time(mem[1m])`, 60, map[string]float64{"": 250}},
		{`max_over_time(mem[2m])`, 60, map[string]float64{"": 300}},
		{`mem offset 30s`, 60, map[string]float64{"": 200}},
		{`mem > 250`, 60, map[string]float64{"": 300}},
		{`mem > 350`, 60, map[string]float64{}},
		{`sum without (pod) (mem)`, 60, map[string]float64{"": 300}},
		{`scalar(mem) * 2`, 60, map[string]float64{"": 600}},
		// A single sample in the window: rate has nothing to say.
		{`rate(mem[20s])`, 60, map[string]float64{}},
		{`absent_metric_total`, 60, map[string]float64{}},
	}
	for _, c := range cases {
		r := query(t, src, c.expr, c.sec)
		got := r.By("app")
		if len(got) != len(c.want) {
			t.Errorf("%s @%ds: got %v, want %v", c.expr, c.sec, got, c.want)
			continue
		}
		for k, w := range c.want {
			if g, ok := got[k]; !ok || !near(g, w) {
				t.Errorf("%s @%ds: got %v, want %v", c.expr, c.sec, got, c.want)
			}
		}
		if len(c.want) == 0 && r.NoData() != "no series matched" {
			t.Errorf("%s: NoData() = %q", c.expr, r.NoData())
		}
	}

	// NaN is never a value: it is dropped and the result says so.
	r := query(t, src, `broken`, 60)
	if r.Dropped != 1 || len(r.Samples) != 0 || r.NoData() != "1 samples were NaN or Inf" {
		t.Fatalf("NaN: %+v", r)
	}
	if _, err := r.Value(); !errors.Is(err, signals.ErrNoData) {
		t.Fatalf("Value() on NaN: %v", err)
	}
	r = query(t, src, `1/0`, 60)
	if r.Kind != signals.Scalar || r.NoData() == "" {
		t.Fatalf("Inf scalar: %+v", r)
	}
	if _, err := query(t, src, `sum(rate(req_total[1m]))`, 60).Value(); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Query(context.Background(), `sum(rate(`, at(60)); err == nil || !strings.Contains(err.Error(), "parsing") {
		t.Fatalf("a parse error should say so: %v", err)
	}
}

// TestLookbackDelta: a gauge's only sample, 7 minutes before the query,
// is past the default 5m lookback (no series) and within a 10m one (its
// value); the edge is exclusive, as in Prometheus 3: a sample exactly a
// lookback old does not answer, one a millisecond newer does.
func TestLookbackDelta(t *testing.T) {
	s := NewStore(0)
	put(t, s, labels.FromStrings("__name__", "g", "pod", "p"), map[int]float64{0: 42})
	for _, c := range []struct {
		name     string
		lookback time.Duration // 0: NewSource's default
		sec      int
		want     []float64
	}{
		{"7m old, the default 5m", 0, 7 * 60, nil},
		{"7m old, 10m", 10 * time.Minute, 7 * 60, []float64{42}},
		{"7m old, 7m", 7 * time.Minute, 7 * 60, nil},
		{"4m old, the default 5m", 0, 4 * 60, []float64{42}},
		{"11m old, 10m", 10 * time.Minute, 11 * 60, nil},
	} {
		src := NewSource(s)
		if c.lookback > 0 {
			src.WithLookback(c.lookback)
		}
		r := query(t, src, "g", c.sec)
		var got []float64
		for _, smp := range r.Samples {
			got = append(got, smp.Value)
		}
		if len(got) != len(c.want) || (len(got) == 1 && got[0] != c.want[0]) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	src := NewSource(s).WithLookback(7 * time.Minute)
	r, err := src.Query(context.Background(), "g", at(7*60).Add(-time.Millisecond))
	if err != nil || len(r.Samples) != 1 || r.Samples[0].Value != 42 {
		t.Errorf("a millisecond within a 7m lookback: %v %v, want 42", r.Samples, err)
	}
	if d := NewSource(s).Lookback(); d != signals.DefaultLookbackDelta {
		t.Errorf("default lookback %s, want %s", d, signals.DefaultLookbackDelta)
	}
}

func TestRetentionBound(t *testing.T) {
	s := NewStore(30 * time.Minute)
	l := labels.FromStrings("__name__", "g", "pod", "p")
	ref, err := s.Append(l, ms(0), 0)
	if err != nil {
		t.Fatal(err)
	}
	for sec := 15; sec <= 4*3600; sec += 15 {
		if err := s.AppendRef(&ref, ms(sec), float64(sec)); err != nil {
			t.Fatal(err)
		}
		st := s.Stats()
		if st.MaxT-st.MinT > (30 * time.Minute).Milliseconds() {
			t.Fatalf("at %ds the store spans %d ms, more than its retention", sec, st.MaxT-st.MinT)
		}
		if st.Samples > 121 {
			t.Fatalf("at %ds the store holds %d samples; 30 min at 15 s is at most 121", sec, st.Samples)
		}
	}
	// The backing arrays are compacted too, not only hidden.
	if ref.s != nil && cap(ref.s.ts) > 4*121 {
		t.Fatalf("backing array grew to %d", cap(ref.s.ts))
	}
	// A series not written for longer than the retention disappears.
	old := labels.FromStrings("__name__", "gone", "pod", "p")
	if _, err := s.Append(old, ms(4*3600), 1); err != nil {
		t.Fatal(err)
	}
	for sec := 4*3600 + 15; sec <= 6*3600; sec += 15 {
		if err := s.AppendRef(&ref, ms(sec), 1); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.Stats(); st.Series != 1 {
		t.Fatalf("want only the live series, got %d", st.Series)
	}
	if _, err := s.Append(l, ms(0), 1); err == nil {
		t.Fatal("an out-of-order sample must be refused")
	}
}

func TestRequestedNamesOnlyForScrapes(t *testing.T) {
	s := NewStore(0)
	src := NewSource(s)
	l := labels.FromStrings("__name__", "up", "job", "x")
	if ok, _ := s.AppendScraped(l, ms(0), 1); ok {
		t.Fatal("a name no query asked for must not be kept")
	}
	if r := query(t, src, `up`, 1); r.NoData() == "" {
		t.Fatal("nothing should be stored yet")
	}
	// The query registered "up": later scrapes are kept, earlier ones are not.
	if ok, _ := s.AppendScraped(l, ms(10), 1); !ok {
		t.Fatal("a requested name must be kept")
	}
	if r := query(t, src, `count_over_time(up[1m])`, 20); len(r.Samples) != 1 || r.Samples[0].Value != 1 {
		t.Fatalf("want one sample, got %+v", r)
	}
	// Direct appends (the sim world) are always kept.
	if _, err := s.Append(labels.FromStrings("__name__", "other"), ms(10), 1); err != nil {
		t.Fatal(err)
	}
	if r := query(t, src, `other`, 20); len(r.Samples) != 1 {
		t.Fatalf("direct append lost: %+v", r)
	}
}

// TestSubqueryMatrix: a subquery gives each series' points at its steps,
// NaN points left out, and a series with none counted as dropped.
func TestSubqueryMatrix(t *testing.T) {
	s := NewStore(0)
	src := NewSource(s)
	put(t, s, labels.FromStrings("__name__", "g", "app", "a"), map[int]float64{0: 1, 60: 2, 120: 3})
	put(t, s, labels.FromStrings("__name__", "g", "app", "b"), map[int]float64{0: math.NaN(), 60: math.NaN(), 120: math.NaN()})
	r := query(t, src, `g[2m:1m]`, 120)
	if r.Kind != signals.Matrix || len(r.Samples) != 1 || r.Dropped != 1 {
		t.Fatalf("%+v", r)
	}
	got := r.Samples[0]
	// Steps at 60 s and 120 s (a subquery's range is left-open).
	if got.Labels["app"] != "a" || len(got.Points) != 2 || got.Points[0].V != 2 || !got.Points[0].T.Equal(at(60)) || got.Points[1].V != 3 {
		t.Fatalf("points %+v", got)
	}
	if _, err := r.Value(); err == nil {
		t.Error("a matrix gave a single value")
	}
}

// A query that waited for room among the process's queries in flight and
// got none is refused for the wait, not charged to its spec: the budget is
// given back. The wait ends with the caller's context (cancelled here, so
// no verdict hangs on how long a busy machine takes).
func TestInFlightWaitIsNotTheQuerys(t *testing.T) {
	src := NewSource(NewStore(time.Hour))
	src.InFlight = signals.NewInFlight(100)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// Another query holds all the room.
	release, err := src.InFlight.Acquire(context.Background(), "other", 100)
	if err != nil {
		t.Fatal(err)
	}
	b := signals.NewBudget(1000)
	gone, cancel := context.WithCancel(signals.WithBudget(context.Background(), b))
	cancel()
	if _, err := src.Query(gone, "vector(1)", at); !errors.Is(err, signals.ErrBudget) {
		t.Fatalf("a query that got no room must say the in-flight budget: %v", err)
	}
	if b.Spent() != 0 {
		t.Fatalf("the spec was charged %d for a query that never ran", b.Spent())
	}
	release()
	if _, err := src.Query(signals.WithBudget(context.Background(), b), "vector(1)", at); err != nil || b.Spent() == 0 {
		t.Fatalf("with room it runs and is charged: %v, spent %d", err, b.Spent())
	}
}
