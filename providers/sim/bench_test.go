package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/cue/load"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/signals/embedded"
)

var benchUntil time.Duration

// BenchmarkFullTrace100Workloads replays the whole shipped trace through 100
// workloads (a third with HPAs, a third Knative) into the embedded store.
// The goal: ≥ 600 virtual seconds per wall second.
func BenchmarkFullTrace100Workloads(b *testing.B) {
	tr, err := LoadTrace("../../specs/traces/azure-llm-conv-2023.csv", TraceOptions{RateScale: 80, Until: benchUntil})
	if err != nil {
		b.Fatal(err)
	}
	var wls []spec.SimWorkload
	for i := 0; i < 100; i++ {
		wl := deployment(fmt.Sprintf("svc-%d", i), 2)
		wl.Namespace = fmt.Sprintf("ns-%d", i%10)
		wl.Share = 0.01
		wl.PerPodRPS = 2
		switch i % 3 {
		case 1:
			wl.HPA = &spec.SimHPA{Min: 1, Max: 20, TargetCPU: pct(0.7)}
			wl.CPUPerRequest = 200
		case 2:
			wl.Kind = "KnativeService"
			wl.Knative = &spec.SimKnative{TargetConcurrency: 1}
		}
		wls = append(wls, wl)
	}
	var series int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		store := embedded.NewStore(0)
		w, err := NewWithTrace(spec.SimConfig{Seed: 1, RateScale: 80, Workloads: wls}, tr, Options{Sink: store})
		if err != nil {
			b.Fatal(err)
		}
		w.AdvanceTo(w.End())
		series = store.Stats().Series
	}
	virtual := tr.Duration().Seconds() * float64(b.N)
	b.ReportMetric(virtual/b.Elapsed().Seconds(), "virtual-s/s")
	b.ReportMetric(float64(series), "live-series")
}

// BenchmarkShippedWorld runs the demo's world (specs/: three workloads,
// the shipped trace superposed 80 times, every request simulated) to the
// trace's end without metrics: the cost of one baseline replay.
func BenchmarkShippedWorld(b *testing.B) {
	env := loadEnv(b, "../../specs")
	cfg, err := Config(env)
	if err != nil {
		b.Fatal(err)
	}
	var requests float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w, err := New(cfg, Options{BaseDir: "../../specs"})
		if err != nil {
			b.Fatal(err)
		}
		w.AdvanceTo(w.End())
		for _, wl := range cfg.Workloads {
			t, _ := w.Totals(wl.Namespace, wl.Name)
			requests += t.Arrived
		}
	}
	b.ReportMetric(requests/b.Elapsed().Seconds(), "requests/s")
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/replay")
}

func loadEnv(tb testing.TB, dir string) *spec.Environment {
	tb.Helper()
	l, err := load.New()
	if err != nil {
		tb.Fatal(err)
	}
	res := l.LoadDir(dir)
	env := res.Environment()
	if env == nil || len(res.Diags) > 0 {
		tb.Fatalf("%s: %v", dir, res.Diags)
	}
	return env
}

// BenchmarkOracleShipped searches the hindsight bound of the demo's
// checkout over the shipped trace (58 minutes, 1.1M requests): the greedy
// schedule, the constant one and the reactive replays.
func BenchmarkOracleShipped(b *testing.B) {
	tr, err := LoadTrace("../../specs/traces/azure-llm-conv-2023.csv", TraceOptions{RateScale: 80})
	if err != nil {
		b.Fatal(err)
	}
	c := spec.SimWorkload{Kind: KindDeployment, Namespace: "shop", Name: "checkout", Replicas: 2, PerPodRPS: 120,
		CPUPerRequest: 4, CPURequest: 500, Startup: spec.Duration(20 * time.Second), ServiceTime: spec.Duration(40 * time.Millisecond),
		Share: 0.7, Targets: []spec.Duration{spec.Duration(250 * time.Millisecond)}}
	cfg := spec.SimConfig{RateScale: 80, Seed: 1, Workloads: []spec.SimWorkload{c}}
	for b.Loop() {
		o, ok, err := FindOracle(cfg, tr, Options{}, "shop", "checkout", 250*time.Millisecond, 200, 0)
		if err != nil || !ok {
			b.Fatal(err, ok)
		}
		b.ReportMetric(o.ReplicaHours(), "oracle-replica-h")
	}
}
