package embedded

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/setpoint-dev/setpoint/engine/signals"
)

// boundErr evaluates expr at t0 and returns its error, which must be past
// a bound and name it.
func boundErr(t *testing.T, src *Source, expr, names string) error {
	t.Helper()
	_, err := src.Query(context.Background(), expr, at(0))
	var be *signals.BoundError
	if !errors.As(err, &be) || !errors.Is(err, signals.ErrBound) {
		t.Fatalf("%s: %v, want a bound error", expr, err)
	}
	if !strings.Contains(err.Error(), names) || !strings.Contains(err.Error(), fmt.Sprintf("evaluating %q", expr)) {
		t.Fatalf("%s: %q does not name %q", expr, err, names)
	}
	return err
}

// TestSubqueryRefusedBeforeEvaluation: the 45-byte query that took 3.4 GB
// is refused by its cost, having allocated next to nothing.
func TestSubqueryRefusedBeforeEvaluation(t *testing.T) {
	src := NewSource(NewStore(0))
	const attack = `count_over_time(vector(1)[1y:1s])`
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	boundErr(t, src, attack, "makes some 63072002 samples (31536001 steps of 1s over 1y × 2 values held at each): past the query bound of 5000000 samples")
	runtime.ReadMemStats(&after)
	// The engine's own count would have stopped it past 300 MB.
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
		t.Errorf("refusing it allocated %d MiB", got>>20)
	}
}

// TestSubquerySeriesCount: a subquery's cost counts the series its
// selectors match in the store.
func TestSubquerySeriesCount(t *testing.T) {
	s := NewStore(0)
	src := NewSource(s)
	const expr = `max_over_time(g[1d:1s])`
	put(t, s, labels.FromStrings("__name__", "g", "pod", "p-0"), map[int]float64{0: 1})
	if r := query(t, src, expr, 0); len(r.Samples) != 1 || r.Samples[0].Value != 1 {
		t.Fatalf("one series: %+v", r)
	}
	for i := 1; i < 100; i++ {
		put(t, s, labels.FromStrings("__name__", "g", "pod", fmt.Sprintf("p-%d", i)), map[int]float64{0: 1})
	}
	// Other names are not counted.
	put(t, s, labels.FromStrings("__name__", "h", "pod", "p-0"), map[int]float64{0: 1})
	boundErr(t, src, expr, "× 100 values held at each, its selectors matching 100 series")
}

// TestSubqueryDefaultStep: a subquery without a step is evaluated at the
// default interval (it used to stop at a nil function in the engine).
func TestSubqueryDefaultStep(t *testing.T) {
	src := NewSource(NewStore(0))
	// Steps at the minute, the range left-open: 5 in 5 minutes.
	if r := query(t, src, `count_over_time(vector(1)[5m:])`, 0); len(r.Samples) != 1 || r.Samples[0].Value != 5 {
		t.Fatalf("%+v", r)
	}
}

// TestEvaluationSampleBound: what the cost check cannot see (a range
// selector's points are the store's) stops at the engine's count of
// signals.MaxSamples, named.
func TestEvaluationSampleBound(t *testing.T) {
	s := NewStore(24 * time.Hour)
	src := NewSource(s)
	// One series, a point every 10 ms: more than MaxSamples in 15 hours.
	n := signals.MaxSamples + signals.MaxSamples/20
	ref, err := s.Append(labels.FromStrings("__name__", "dense"), ms(0), 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < n; i++ {
		if err := s.AppendRef(&ref, ms(0)+int64(i)*10, float64(i)); err != nil {
			t.Fatal(err)
		}
	}
	end := int(int64(n) * 10 / 1000)
	_, err = src.Query(context.Background(), `count_over_time(dense[15h])`, at(end))
	var be *signals.BoundError
	if !errors.As(err, &be) || !strings.Contains(err.Error(), "the evaluation held more samples at once: past the query bound of 5000000 samples") {
		t.Fatalf("%v, want the sample bound", err)
	}
	// Within it, the same series answers: (end − 10m, end] holds a point
	// every 10 ms but at end itself.
	if r := query(t, src, `count_over_time(dense[10m])`, end); len(r.Samples) != 1 || r.Samples[0].Value != 59999 {
		t.Fatalf("%+v", r)
	}
}

// TestEvaluationTimeBound: an evaluation past the source's time bound is
// an error naming it; a caller's own cancellation is not a bound.
func TestEvaluationTimeBound(t *testing.T) {
	src := NewSource(NewStore(0))
	// A bound that has passed by the time the engine first looks.
	src.timeout = time.Nanosecond
	boundErr(t, src, `vector(1)`, "the evaluation was still running: past the query bound of 1ns")

	src = NewSource(NewStore(0))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := src.Query(ctx, `vector(1)`, at(0)); err == nil || errors.Is(err, signals.ErrBound) {
		t.Fatalf("a cancelled caller: %v", err)
	}
}

// TestBoundsOfTheIssue pins the bounds an evaluation runs under: below the
// default 5 s tick, samples at 5M.
func TestBoundsOfTheIssue(t *testing.T) {
	src := NewSource(NewStore(0))
	if src.timeout != QueryTime || QueryTime >= 5*time.Second || QueryTime > signals.MaxQueryTime || signals.MaxQueryTime > 10*time.Second {
		t.Errorf("time bound %s (the source's %s, every source's %s)", QueryTime, src.timeout, signals.MaxQueryTime)
	}
	if signals.MaxSamples > 5_000_000 {
		t.Errorf("sample bound %d", signals.MaxSamples)
	}
}
