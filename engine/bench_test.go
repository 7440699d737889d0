package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine"
	_ "github.com/setpoint-dev/setpoint/engine/kinds/nfr"
	"github.com/setpoint-dev/setpoint/engine/signals/embedded"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/sim"
)

// BenchmarkPlan10k plans 10,000 NFR workloads (Deployments with HPAs, one
// container each) against the sim world two minutes into a constant trace:
// observe (one batch read), the grouped signal queries, decide, combine,
// gate. The goal is ≤ 3 s wall and ≤ 200 MB.
func BenchmarkPlan10k(b *testing.B) {
	const n = 10000
	tr := &sim.Trace{Start: time.Unix(0, 0).UTC(), Rate: make([]float64, 3600)}
	for i := range tr.Rate {
		tr.Rate[i] = 20000
	}
	cfg := spec.SimConfig{Seed: 1}
	var nfrs []spec.Document
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("svc-%d", i)
		ns := fmt.Sprintf("ns-%d", i%100)
		cfg.Workloads = append(cfg.Workloads, spec.SimWorkload{Kind: "Deployment", Namespace: ns, Name: name, Replicas: 1,
			HPA: &spec.SimHPA{Min: 1, Max: 10, TargetRPS: 1000}, PerPodRPS: 100, CPUPerRequest: 5, CPURequest: 500,
			Startup: spec.Duration(10 * time.Second), ServiceTime: spec.Duration(50 * time.Millisecond), Share: 1.0 / n,
			Containers: []spec.SimContainer{{Name: "app", Request: 256 * spec.MiB, Limit: 512 * spec.MiB, WorkingSet: 100 * spec.MiB}}})
		s := &spec.NFR{}
		s.Kind, s.Metadata.Name, s.Metadata.Namespace = "NFR", name, ns
		s.Spec.Target = spec.Target{Kind: "Deployment", Name: name}
		s.Spec.Throughput = &spec.Throughput{MinRPS: 4}
		s.Spec.CPUPerPod = 500
		s.Spec.Latency = &spec.Latency{P99: spec.Duration(250 * time.Millisecond)}
		s.Spec.Memory = spec.MemorySpec{Headroom: 1.2, LimitFactor: 1.5, Min: 64 * spec.MiB, Max: 4 * spec.GiB, Window: spec.Duration(30 * time.Minute)}
		s.Spec.Enforcement = spec.NFREnforcement{Replicas: spec.ModeEnforce, Memory: spec.ModeObserve}
		s.Spec.Safety = spec.Safety{Stability: spec.Duration(3 * time.Minute), Tolerance: 0.1, Cooldown: spec.Duration(2 * time.Minute), MaxReplicaStep: 0.3, MaxMemoryStep: 0.25}
		nfrs = append(nfrs, s)
	}
	store := embedded.NewStore(0)
	w, err := sim.NewWithTrace(cfg, tr, sim.Options{Sink: store})
	if err != nil {
		b.Fatal(err)
	}
	env := &spec.Environment{}
	env.Spec.Providers = []spec.Provider{{Name: "sim"}}
	e := &engine.Engine{Env: env, Specs: nfrs, Providers: map[string]providers.Provider{"sim": &sim.Provider{World: w}}, Signals: embedded.NewSource(store)}
	now := tr.Start.Add(2 * time.Minute)
	started := time.Now()
	w.AdvanceTo(now)
	b.ReportMetric(time.Since(started).Seconds(), "world-replay-s")
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	// The state on disk, as plan runs it: lock, load, plan, save the shards
	// that changed. The first plan adopts every attribute and opens every
	// window (every shard written); the ones measured find them open.
	ctx := context.Background()
	be := state.NewFile(filepath.Join(b.TempDir(), "state.json"))
	st, err := be.Load(ctx)
	if err != nil {
		b.Fatal(err)
	}
	e.Plan(ctx, now, st, nil)
	if _, err := be.Save(ctx, st); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var changes, held, notes, written int
	var loadT, planT, saveT time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		unlock, err := be.Lock(ctx, "bench", false)
		if err != nil {
			b.Fatal(err)
		}
		st, err := be.Load(ctx)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		p := e.Plan(ctx, now.Add(time.Duration(i+1)*time.Second), st, nil)
		t2 := time.Now()
		stats, err := be.Save(ctx, st)
		if err != nil {
			b.Fatal(err)
		}
		unlock()
		t3 := time.Now()
		loadT, planT, saveT = loadT+t1.Sub(t0), planT+t2.Sub(t1), saveT+t3.Sub(t2)
		changes, held, notes, written = len(p.Changes), len(p.Held), len(p.Notes), stats.Written
	}
	b.StopTimer()
	b.ReportMetric(loadT.Seconds()*1000/float64(b.N), "load-ms")
	b.ReportMetric(planT.Seconds()*1000/float64(b.N), "plan-ms")
	b.ReportMetric(saveT.Seconds()*1000/float64(b.N), "save-ms")
	b.ReportMetric(float64(written), "shards-written")
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapInuse)/(1<<20), "heap-MB")
	if f := os.Getenv("HEAPPROF"); f != "" {
		runtime.GC()
		fh, _ := os.Create(f)
		pprof.WriteHeapProfile(fh)
		fh.Close()
		runtime.KeepAlive(w)
	}
	b.ReportMetric(float64(held+changes), "changes")
	if held+changes < n || notes > n {
		b.Fatalf("want a decision per workload: %d changes, %d held, %d notes", changes, held, notes)
	}
}
