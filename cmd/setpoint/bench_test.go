package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/cue/load"
	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/gate"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/engine/watch"
	"github.com/setpoint-dev/setpoint/providers"
)

// hooked records when the provider's Apply is called, and the engine's now.
type hooked struct {
	providers.Provider
	applied chan applyCall
}

type applyCall struct {
	wall, now time.Time
}

func (h hooked) Apply(ctx context.Context, req providers.ApplyRequest) providers.ApplyResponse {
	for _, c := range req.Changes {
		if c.Address == benchHPA {
			h.applied <- applyCall{wall: time.Now(), now: req.Now}
		}
	}
	return h.Provider.Apply(ctx, req)
}

var benchHPA = addrs.Object{Provider: "sim", Kind: "HorizontalPodAutoscaler", Namespace: "shop", Name: "checkout"}

// watchRig runs watch's loop on dir as the command does, with the sim
// provider's Apply hooked, on a clock of virtual time at the wall's rate.
type watchRig struct {
	w       *watch.Watcher
	ws      *workspace
	h       hooked
	origin  time.Time // virtual time at wallAt
	wallAt  time.Time
	cancel  func()
	stopped chan struct{}
}

func startWatch(b *testing.B, dir string, tick time.Duration) *watchRig {
	slog.SetDefault(slog.New(slog.DiscardHandler))
	l, err := load.New()
	if err != nil {
		b.Fatal(err)
	}
	w := &watch.Watcher{Dir: dir, Loader: l, Tick: tick, Debounce: 20 * time.Millisecond, Log: slog.Default()}
	w.Load()
	set := w.Set()
	ws, err := workspaceFrom(dir, []spec.Document{set.Env}, nil, simOptions{})
	if err != nil {
		b.Fatal(err)
	}
	r := &watchRig{w: w, ws: ws, origin: ws.now, stopped: make(chan struct{})}
	r.h = hooked{Provider: ws.eng.Providers["sim"], applied: make(chan applyCall, 16)}
	ws.eng.Providers["sim"] = r.h
	r.wallAt = time.Now()
	clk := watch.NewScaledClock(watch.RealClock{}, ws.now, 1)
	w.Clock = clk
	w.Queue = watch.NewQueue(clk)
	w.Reconcile = func(ctx context.Context, set watch.Set, keys []string, reason string) map[string]watch.Result {
		return reconcileKeys(ctx, ws, w.Queue, set, keys, reason, clk, time.Second, nil)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { w.Run(ctx); close(r.stopped) }()
	return r
}

func (r *watchRig) stop() {
	r.cancel()
	<-r.stopped
	r.ws.close()
}

// reset puts the world and the state back where the next cycle moves
// them again.
func (r *watchRig) reset(b *testing.B) {
	ctx := context.Background()
	min := addrs.MustPath("spec.minReplicas")
	r.ws.providers["sim"].Apply(ctx, providers.ApplyRequest{Now: r.ws.now, Changes: []providers.ObjectChange{{Address: benchHPA, Action: action.Update,
		Attributes: map[addrs.Path]values.Value{min: values.CountOf(2)}, Changed: []addrs.Path{min}, Manager: "kubectl-client-side-apply", Force: true}}})
	err := r.ws.withState(ctx, "bench", time.Second, func(st *state.State) error {
		for _, a := range st.Objects() {
			o, _ := st.Object(a)
			for p := range o.Attrs {
				path, err := addrs.ParsePath(p)
				if err != nil {
					return err
				}
				st.Delete(addrs.Attr{Object: a, Path: path})
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkWatchReaction measures the time from writing a spec file to the
// provider's Apply being called, for an edit that passes the gate at once
// (stability and cooldown 0s): the fsnotify event, the debounce (20 ms),
// reloading the file, the plan under the state lock, and the call.
func BenchmarkWatchReaction(b *testing.B) {
	dir := copySpecs(b, [3]string{"checkout.nfr.yaml", "stability: 3m, tolerance: 10%, cooldown: 2m,", "stability: 0s, tolerance: 10%, cooldown: 0s,"})
	r := startWatch(b, dir, time.Hour)
	defer r.stop()
	<-r.h.applied // the first reconcile applies at once
	path := filepath.Join(dir, "checkout.nfr.yaml")
	orig, _ := os.ReadFile(path)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		r.settle()
		r.reset(b)
		edited := strings.Replace(string(orig), "minRPS: 400", "minRPS: "+[]string{"401", "402"}[i%2], 1)
		b.StartTimer()
		start := time.Now()
		if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
			b.Fatal(err)
		}
		select {
		case c := <-r.h.applied:
			lat = append(lat, c.wall.Sub(start))
		case <-time.After(5 * time.Second):
			b.Fatal("no apply within 5 s of the edit")
		}
	}
	b.StopTimer()
	reportLatency(b, lat)
}

// settle drains the applies seen so far (the other specs' keys stay
// queued for their own windows, minutes away).
func (r *watchRig) settle() {
	for len(r.h.applied) > 0 {
		<-r.h.applied
	}
}

// BenchmarkWatchDue measures, on the wall clock, how late a change is
// applied after its stability window ends: the window (100 ms here) opens
// when a plan first sees the change, the reconcile asks to be requeued for
// its end, and the queue's timer fires then; the tick is 60 s, so only the
// requeue can be on time. One op is one window.
func BenchmarkWatchDue(b *testing.B) {
	dir := copySpecs(b, [3]string{"checkout.nfr.yaml", "stability: 3m, tolerance: 10%, cooldown: 2m,", "stability: 100ms, tolerance: 10%, cooldown: 0s,"})
	r := startWatch(b, dir, 60*time.Second)
	defer r.stop()
	<-r.h.applied // the first window, from the start
	late := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		r.settle()
		r.reset(b)
		b.StartTimer()
		r.w.Trigger("bench") // a world change: the plan opens a window
		var c applyCall
		select {
		case c = <-r.h.applied:
		case <-time.After(5 * time.Second):
			b.Fatal("no apply within 5 s")
		}
		opened := r.windowOpened(b)
		due := r.wallAt.Add(opened.Add(100 * time.Millisecond).Sub(r.origin))
		late = append(late, c.wall.Sub(due))
	}
	b.StopTimer()
	reportLatency(b, late)
}

// windowOpened reads when the applied change's stability window opened,
// from the state the policy persists.
func (r *watchRig) windowOpened(b *testing.B) time.Time {
	var opened time.Time
	err := r.ws.withState(context.Background(), "bench", time.Second, func(st *state.State) error {
		en, ok := st.Lookup(addrs.Attr{Object: benchHPA, Path: addrs.MustPath("spec.minReplicas")})
		if !ok {
			b.Fatal("no state for minReplicas")
		}
		var w gate.Window
		if err := json.Unmarshal(en.Policy["nfr"], &w); err != nil {
			b.Fatal(err)
		}
		opened = w.OpenedAt
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return opened
}

func reportLatency(b *testing.B, lat []time.Duration) {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
}
