package sim

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/cue/spec"
)

// TestReportHandComputed: one pod with one server (perPodRPS 8 × 125 ms),
// every request costing the mean (equal tokens), so each takes 125 ms.
// Second 0 has arrivals at 0, 62.5, 125 and 500 ms: they finish at 125,
// 250, 375 and 625 ms, so their latencies are 125, 187.5, 250 and 125 ms.
// Against a 200 ms target one of four is late: the nearest-rank p99 of
// four is the largest, 250 ms, over the target for every second whose
// trailing minute holds second 0 (0–59). One more arrival at 119 s is on
// time. The histogram (buckets with 0.2 added) puts the rank 3.96 in
// (0.2, 0.25] holding one request: 0.2 + 0.05 × 0.96 = 0.248, over too.
func TestReportHandComputed(t *testing.T) {
	csv := "TIMESTAMP,ContextTokens,GeneratedTokens\n" +
		"2023-01-01 00:00:00.0000000,100,0\n" +
		"2023-01-01 00:00:00.0625000,100,0\n" +
		"2023-01-01 00:00:00.1250000,100,0\n" +
		"2023-01-01 00:00:00.5000000,100,0\n" +
		"2023-01-01 00:01:59.0000000,100,0\n"
	tr := loadCSV(t, csv, TraceOptions{})
	wl := deployment("api", 1)
	wl.PerPodRPS, wl.ServiceTime = 8, spec.Duration(125*time.Millisecond)
	wl.Targets = []spec.Duration{spec.Duration(200 * time.Millisecond)}
	r := newRig(t, tr, wl)
	r.w.AdvanceTo(r.w.End())
	rep, ok := r.w.Report("shop", "api")
	if !ok {
		t.Fatal("no report")
	}
	if rep.Seconds != 120 || rep.Arrived != 5 || rep.Served != 5 || rep.Dropped != 0 || rep.Cold != 0 || rep.PodSeconds != 120 {
		t.Errorf("report %+v", rep)
	}
	if rep.Measured != 61 {
		t.Errorf("measured %d seconds, want 61 (0–59 and 119)", rep.Measured)
	}
	want := TargetReport{Target: 0.2, Late: 1, OverExact: 60, OverHist: 60}
	if len(rep.Targets) != 1 || rep.Targets[0] != want {
		t.Errorf("targets %+v, want %+v", rep.Targets, want)
	}
	if !slices.Contains(rep.Histogram, 0.2) {
		t.Errorf("the target is not a bucket: %v", rep.Histogram)
	}
	// Points every 5 s: the first closes second 4.
	if rep.Step != 5 || rep.Points.P99Exact[0] != 0.25 || math.Abs(rep.Points.P99[0]-0.248) > 1e-12 || rep.Points.RPS[0] != 4.0/5 || rep.Points.Ready[0] != 1 {
		t.Errorf("first point: step %d, p99 exact %v hist %v, rps %v, ready %v", rep.Step, rep.Points.P99Exact[0], rep.Points.P99[0], rep.Points.RPS[0], rep.Points.Ready[0])
	}
	if !math.IsNaN(rep.Points.P99Exact[15]) {
		t.Errorf("no request between 60 s and 119 s: p99 %v", rep.Points.P99Exact[15])
	}
	// The bucket is what a user's histogram_quantile reads.
	if v := r.value(t, `sum(http_request_duration_seconds_bucket{le="0.2"})`, 120); v != 4 {
		t.Errorf("bucket le=0.2: %v, want 4", v)
	}
}

// sojournTail is P(wait + service > t) in an M/M/c queue with service
// time s and arrival rate lambda: the mixture of no wait and an
// exponential wait of rate θ = c/s − λ with probability C.
func sojournTail(c int, s, lambda, t float64) float64 {
	C := erlangC(c, lambda*s)
	mu, th := 1/s, float64(c)/s-lambda
	return (1-C)*math.Exp(-mu*t) + C*(th*math.Exp(-mu*t)-mu*math.Exp(-th*t))/(th-mu)
}

// TestWorldIsMMcWithPoissonAndExponential: two pods of c = 5 (100 req/s ×
// 50 ms) take a Poisson 160 req/s with exponential service times: each is
// an M/M/5 at ρ = 0.8, and the share of requests over 100 ms and 200 ms
// must be Erlang C's (within 10%: a queue's latencies are correlated, so
// the binomial error understates the noise).
func TestWorldIsMMcWithPoissonAndExponential(t *testing.T) {
	wl := deployment("api", 2)
	wl.Targets = []spec.Duration{spec.Duration(100 * time.Millisecond), spec.Duration(200 * time.Millisecond)}
	w, err := NewWithTrace(spec.SimConfig{Seed: 1, Workloads: []spec.SimWorkload{wl}}, constTrace(160, 3000), Options{})
	if err != nil {
		t.Fatal(err)
	}
	w.AdvanceTo(w.End())
	rep, _ := w.Report("shop", "api")
	for _, tg := range rep.Targets {
		got := float64(tg.Late) / float64(rep.Served)
		want := sojournTail(5, 0.05, 80, tg.Target)
		if math.Abs(got-want) > 0.1*want {
			t.Errorf("P(T > %v): %.4f, want %.4f (M/M/5, ρ 0.8)", tg.Target, got, want)
		}
	}
	// P(T > 100 ms) is 0.2138 in M/M/5 at ρ 0.8, against e^(−2) = 0.1353
	// for the service alone: the test tells waiting from no waiting.
	if w := sojournTail(5, 0.05, 80, 0.1); math.Abs(w-0.2138) > 0.001 {
		t.Errorf("hand-computed tail %v", w)
	}
}

// TestServersFirstComeFirstServed: with two servers, requests start as a
// server frees, in arrival order, and one that would start after its
// deadline is refused without holding a server.
func TestServersFirstComeFirstServed(t *testing.T) {
	h := newServers(2)
	var got []float64
	for _, at := range []float64{0, 0, 0, 0.5} {
		f, ok := h.take(at, 1, at+MaxWait)
		if !ok {
			t.Fatal("refused")
		}
		got = append(got, f)
	}
	if want := []float64{1, 1, 2, 2}; !slices.Equal(got, want) {
		t.Errorf("finishes %v, want %v", got, want)
	}
	if _, ok := h.take(0.5, 1, 1.5); ok {
		t.Error("a request that can start only at 2 s was served with a 1.5 s deadline")
	}
	if f, _ := h.take(0.5, 1, 10); f != 3 {
		t.Errorf("the refused request held a server: next finishes at %v, want 3", f)
	}
}

// TestNth agrees with sorting on random data.
func TestNth(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 1; n < 200; n += 7 {
		a := make([]float32, n)
		for i := range a {
			a[i] = float32(rng.IntN(20))
		}
		s := slices.Clone(a)
		slices.Sort(s)
		for k := 0; k < n; k++ {
			if got := nth(slices.Clone(a), k); got != s[k] {
				t.Fatalf("n %d k %d: %v, want %v", n, k, got, s[k])
			}
		}
	}
}

func TestRank(t *testing.T) {
	for n, want := range map[int64]int64{1: 1, 4: 4, 100: 99, 101: 100, 1000: 990} {
		if got := rank(n); got != want {
			t.Errorf("rank(%d) = %d, want %d", n, got, want)
		}
	}
}

// TestWorkloadDrawsAreItsOwn: a workload's requests depend on the seed and
// its name, not on which other workloads the config lists before it.
func TestWorkloadDrawsAreItsOwn(t *testing.T) {
	run := func(wls ...spec.SimWorkload) Report {
		w, err := NewWithTrace(spec.SimConfig{Seed: 3, Workloads: wls}, constTrace(50, 300), Options{})
		if err != nil {
			t.Fatal(err)
		}
		w.AdvanceTo(w.End())
		r, _ := w.Report("shop", "api")
		return r
	}
	alone, after := run(deployment("api", 1)), run(deployment("other", 1), deployment("api", 1))
	if alone.Arrived == 0 || alone.Arrived != after.Arrived || alone.Points.P99Exact[10] != after.Points.P99Exact[10] {
		t.Errorf("api alone %d arrivals, after another workload %d", alone.Arrived, after.Arrived)
	}
}

// TestRebuildReplaysTheLoadedTrace: a rebuild (a concurrent run's changes
// read back) replays the traces the world loaded, not the files as they
// are now.
func TestRebuildReplaysTheLoadedTrace(t *testing.T) {
	dir := t.TempDir()
	csv, _ := arrivalCSV(120)
	if err := os.WriteFile(filepath.Join(dir, "own.csv"), []byte(csv), 0o644); err != nil {
		t.Fatal(err)
	}
	wl := deployment("api", 1)
	wl.Trace = "own.csv"
	cfg := spec.SimConfig{Seed: 1, Workloads: []spec.SimWorkload{wl}}
	AbsPaths(&cfg, dir)
	w, err := NewWithTrace(cfg, constTrace(1, 120), Options{})
	if err != nil {
		t.Fatal(err)
	}
	w.AdvanceTo(w.Start().Add(100 * time.Second))
	before, _ := w.Report("shop", "api")
	if err := os.Remove(filepath.Join(dir, "own.csv")); err != nil {
		t.Fatal(err)
	}
	nw, err := w.rebuilt(nil)
	if err != nil {
		t.Fatalf("rebuild read the file again: %v", err)
	}
	after, _ := nw.Report("shop", "api")
	if before.Arrived == 0 || after.Arrived != before.Arrived {
		t.Errorf("arrivals %d before the rebuild, %d after", before.Arrived, after.Arrived)
	}
}
