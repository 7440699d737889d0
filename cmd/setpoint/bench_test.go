package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/cue/load"
	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/engine/watch"
	"github.com/setpoint-dev/setpoint/providers"
)

// hooked records when the provider's Apply is called.
type hooked struct {
	providers.Provider
	applied chan time.Time
}

func (h hooked) Apply(ctx context.Context, req providers.ApplyRequest) providers.ApplyResponse {
	h.applied <- time.Now()
	return h.Provider.Apply(ctx, req)
}

// BenchmarkWatchReaction measures the time from writing a spec file to the
// provider's Apply being called, for an edit that passes the gate at once
// (stability and cooldown 0s): the fsnotify event, the debounce (20 ms),
// reloading the file, the plan under the state lock, and the call.
func BenchmarkWatchReaction(b *testing.B) {
	dir := copySpecs(b, [3]string{"checkout.nfr.yaml", "safety: {stability: 3m, tolerance: 10%, cooldown: 2m,", "safety: {stability: 0s, tolerance: 10%, cooldown: 0s,"})
	slog.SetDefault(slog.New(slog.DiscardHandler))
	l, err := load.New()
	if err != nil {
		b.Fatal(err)
	}
	w := &watch.Watcher{Dir: dir, Loader: l, Tick: time.Hour, Debounce: 20 * time.Millisecond, Log: slog.Default()}
	w.Load()
	set := w.Set()
	ws, err := workspaceFrom(dir, []spec.Document{set.Env}, nil, simOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer ws.close()
	h := hooked{Provider: ws.eng.Providers["sim"], applied: make(chan time.Time, 16)}
	ws.eng.Providers["sim"] = h
	w.Reconcile = func(ctx context.Context, set watch.Set, touched []spec.Document, reason string) {
		reconcileOnce(ctx, ws, set, touched, reason, ws.now, time.Second)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	defer func() { cancel(); <-done }()
	go func() { w.Run(ctx); close(done) }()
	<-h.applied // the first reconcile applies at once
	hpa := providers.Address{Provider: "sim", Kind: "HorizontalPodAutoscaler", Namespace: "shop", Name: "checkout"}
	path := filepath.Join(dir, "checkout.nfr.yaml")
	orig, _ := os.ReadFile(path)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		// Put the world back where the edit will move it again.
		time.Sleep(30 * time.Millisecond)
		for len(h.applied) > 0 {
			<-h.applied
		}
		ws.providers["sim"].Apply(ctx, providers.ApplyRequest{Now: ws.now, Changes: []providers.Change{{Address: hpa, Attribute: "spec.minReplicas", Value: "2", Manager: "kubectl-client-side-apply"}}})
		lock, _ := state.Acquire(ctx, ws.statePath, "bench", true)
		state.Save(ws.statePath, state.New())
		lock.Release()
		edited := strings.Replace(string(orig), "minRPS: 400", "minRPS: "+[]string{"401", "402"}[i%2], 1)
		b.StartTimer()
		start := time.Now()
		if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
			b.Fatal(err)
		}
		select {
		case at := <-h.applied:
			lat = append(lat, at.Sub(start))
		case <-time.After(5 * time.Second):
			b.Fatal("no apply within 5 s of the edit")
		}
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
