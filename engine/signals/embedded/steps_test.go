package embedded

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/setpoint-dev/setpoint/engine/signals"
)

// stepQueries are the subquery shapes the NFR decisions ask (their
// history, fit, fewest ready pods and service time), and others: two
// subqueries in one expression, a bare selector's (its series keep their
// name: evaluated as written), one inner expression over two ranges, a
// range function that keeps names, one reading __name__, a negative offset
// inside, a nested one and one with an offset (the last five never reused).
var stepQueries = []string{
	`label_replace(sum by (namespace, app) (rate(http_requests_total[30s])), "series", "rate", "", "")[30m:30s]`,
	`(label_replace(sum by (namespace, app) (rate(http_requests_total{code!~"5.."}[1m])), "series", "rps", "", "") or label_replace(sum by (namespace, app) (rate(cpu_seconds_total[1m])) * 1000, "series", "cpu", "", ""))[30m:1m]`,
	`min_over_time((sum by (namespace, app) (ready * on(namespace, pod) group_left(app) pod_labels))[2m:5s])`,
	`min_over_time((sum by (namespace, app) (rate(duration_sum[1m])) / sum by (namespace, app) (rate(duration_count[1m])))[30m:1m])`,
	`max_over_time(sum by (app) (rate(http_requests_total[1m]))[10m:1m]) - avg_over_time(sum by (app) (rate(http_requests_total[1m]))[5m:30s])`,
	`max_over_time(sum by (app) (rate(http_requests_total[1m]))[10m:1m]) - avg_over_time(sum by (app) (rate(http_requests_total[1m]))[5m:1m])`,
	`last_over_time(sum by (app) (rate(http_requests_total[1m]))[5m:1m])`,
	`max_over_time(sum by (app) (rate(http_requests_total[1m] offset -3m))[5m:1m])`,
	`label_replace(last_over_time(sum by (app) (rate(http_requests_total[1m]))[5m:1m]), "was", "$1", "__name__", "(.*)")`,
	`ready[3m:15s]`,
	`max_over_time(max_over_time(sum(ready)[2m:10s])[5m:1m])`,
	`sum(rate(http_requests_total[1m]))[5m:1m] offset 1m`,
}

// The kept steps answer exactly as the engine's own subqueries, at every
// evaluation of a store that grows as a scraped one does (samples every
// 5 s, some landing after evaluations later than their time, a series's
// first minutes landing four minutes late; evaluations every 5 to 20 s,
// across step boundaries), and they
// are used: after the first evaluation most steps are read, not
// evaluated.
func TestKeptStepsAnswerAsTheSubquery(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	store := NewStore(0)
	kept, whole := NewSource(store), NewSource(store)
	whole.noStepReuse = true
	type sr struct {
		l    labels.Labels
		v    float64
		rate float64
	}
	var all []*sr
	for _, app := range []string{"a", "b", "c"} {
		for p := range 3 {
			pod := fmt.Sprintf("%s-%d", app, p)
			for _, code := range []string{"200", "503"} {
				all = append(all, &sr{l: labels.FromStrings("__name__", "http_requests_total", "namespace", "shop", "app", app, "pod", pod, "code", code), rate: 10 * r.Float64()})
			}
			all = append(all,
				&sr{l: labels.FromStrings("__name__", "cpu_seconds_total", "namespace", "shop", "app", app, "pod", pod), rate: r.Float64()},
				&sr{l: labels.FromStrings("__name__", "duration_sum", "namespace", "shop", "app", app, "pod", pod), rate: r.Float64()},
				&sr{l: labels.FromStrings("__name__", "duration_count", "namespace", "shop", "app", app, "pod", pod), rate: 5 * r.Float64()},
				&sr{l: labels.FromStrings("__name__", "ready", "namespace", "shop", "pod", pod)},
				&sr{l: labels.FromStrings("__name__", "pod_labels", "namespace", "shop", "pod", pod, "app", app), v: 1})
		}
	}
	sec, next := 0, 60
	compared := 0
	for sec <= 45*60 {
		// A series whose first four minutes land at once, late (a target
		// with its own timestamps, a feed replayed).
		if sec == 20*60 {
			l := labels.FromStrings("__name__", "http_requests_total", "namespace", "shop", "app", "a", "pod", "late-0", "code", "200")
			for past := sec - 240; past <= sec; past += 5 {
				if _, err := store.Append(l, ms(past), float64(past)); err != nil {
					t.Fatal(err)
				}
			}
			all = append(all, &sr{l: l, v: float64(sec), rate: 1})
		}
		for _, s := range all {
			switch {
			case s.rate > 0:
				s.v += s.rate * 5 * (0.5 + r.Float64())
			case s.l.Get("__name__") == "ready":
				s.v = float64(r.IntN(2))
			}
			// A pod's series stop for a while, as a pod that restarts.
			if r.IntN(50) == 0 {
				continue
			}
			if _, err := store.Append(s.l, ms(sec), s.v); err != nil {
				t.Fatal(err)
			}
		}
		// Evaluated up to 10 s past the newest sample: samples older than
		// an evaluation arrive after it, as a scrape's land after its
		// timestamp.
		for sec+10 > next && next <= 45*60 {
			for _, q := range stepQueries {
				a, errA := kept.Query(context.Background(), q, at(next))
				b, errB := whole.Query(context.Background(), q, at(next))
				if fmt.Sprint(errA) != fmt.Sprint(errB) {
					t.Fatalf("at %ds, %s: errors %v and %v", next, q, errA, errB)
				}
				if d := sameResult(a, b); d != "" {
					t.Fatalf("at %ds, %s: kept steps and the subquery differ: %s", next, q, d)
				}
				compared++
			}
			next += 5 + 5*r.IntN(4)
		}
		sec += 5
	}
	ev, served := kept.stepCache.evaluated.Load(), kept.stepCache.served.Load()
	t.Logf("%d evaluations compared; steps evaluated %d, read from the cache %d", compared, ev, served)
	if served < 4*ev {
		t.Errorf("steps evaluated %d, read %d: the kept steps are hardly used", ev, served)
	}
}

// sameResult says how two results differ ("" when they do not).
func sameResult(a, b signals.Result) string {
	if a.Kind != b.Kind || len(a.Samples) != len(b.Samples) || a.Dropped != b.Dropped {
		return fmt.Sprintf("kind %v/%v, %d/%d samples, %d/%d dropped", a.Kind, b.Kind, len(a.Samples), len(b.Samples), a.Dropped, b.Dropped)
	}
	key := func(s signals.Sample) string { return fmt.Sprint(s.Labels) }
	as, bs := slices.Clone(a.Samples), slices.Clone(b.Samples)
	slices.SortFunc(as, func(x, y signals.Sample) int { return strings.Compare(key(x), key(y)) })
	slices.SortFunc(bs, func(x, y signals.Sample) int { return strings.Compare(key(x), key(y)) })
	same := func(x, y float64) bool { return x == y || (math.IsNaN(x) && math.IsNaN(y)) }
	for i := range as {
		x, y := as[i], bs[i]
		if key(x) != key(y) || !same(x.Value, y.Value) || len(x.Points) != len(y.Points) {
			return fmt.Sprintf("%v = %v (%d points) against %v = %v (%d points)", x.Labels, x.Value, len(x.Points), y.Labels, y.Value, len(y.Points))
		}
		for j := range x.Points {
			if !x.Points[j].T.Equal(y.Points[j].T) || !same(x.Points[j].V, y.Points[j].V) {
				return fmt.Sprintf("%v point %d: %v against %v", x.Labels, j, x.Points[j], y.Points[j])
			}
		}
	}
	return ""
}

// Queries at once on one source, at different times: the kept steps are
// shared under their locks (run with -race, as make test's race subset
// does), and the answers after still equal the subquery's.
func TestKeptStepsConcurrently(t *testing.T) {
	store := NewStore(0)
	src := NewSource(store)
	whole := NewSource(store)
	whole.noStepReuse = true
	l := labels.FromStrings("__name__", "http_requests_total", "namespace", "shop", "app", "a", "code", "200")
	for sec := 0; sec <= 20*60; sec += 5 {
		if _, err := store.Append(l, ms(sec), float64(sec)); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 4)
	for g := range 4 {
		go func() {
			for i := range 40 {
				if _, err := src.Query(context.Background(), stepQueries[g%2], at(20*60-i)); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range stepQueries[:2] {
		a, _ := src.Query(context.Background(), q, at(20*60))
		b, _ := whole.Query(context.Background(), q, at(20*60))
		if d := sameResult(a, b); d != "" {
			t.Fatalf("%s: %s", q, d)
		}
	}
	if src.stepCache.served.Load() == 0 {
		t.Error("no step was read from the cache")
	}
}
