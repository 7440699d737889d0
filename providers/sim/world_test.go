package sim

import (
	"context"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/cue/load"
	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	kindsnfr "github.com/setpoint-dev/setpoint/engine/kinds/nfr"
	"github.com/setpoint-dev/setpoint/engine/signals/embedded"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
)

var simStart = time.Date(2023, 11, 16, 18, 0, 0, 0, time.UTC)

func constTrace(rps float64, seconds int) *Trace {
	tr := &Trace{Start: simStart, Rate: make([]float64, seconds)}
	for i := range tr.Rate {
		tr.Rate[i] = rps
	}
	return tr
}

func pct(p float64) *spec.Percent { v := spec.Percent(p); return &v }

func deployment(name string, replicas int) spec.SimWorkload {
	return spec.SimWorkload{Kind: "Deployment", Namespace: "shop", Name: name, Replicas: replicas,
		PerPodRPS: 100, CPUPerRequest: 5, CPURequest: 500, Startup: spec.Duration(20 * time.Second),
		ServiceTime: spec.Duration(50 * time.Millisecond), Share: 1,
		Containers: []spec.SimContainer{{Name: "app", Request: 256 * spec.MiB, Limit: 512 * spec.MiB, WorkingSet: 100 * spec.MiB}}}
}

type rig struct {
	w   *World
	src *embedded.Source
	p   *Provider
}

func newRig(t *testing.T, tr *Trace, wls ...spec.SimWorkload) *rig {
	t.Helper()
	store := embedded.NewStore(0)
	w, err := NewWithTrace(spec.SimConfig{Seed: 1, Workloads: wls}, tr, Options{Sink: store})
	if err != nil {
		t.Fatal(err)
	}
	return &rig{w: w, src: embedded.NewSource(store), p: &Provider{World: w}}
}

func (r *rig) at(sec int) time.Time { return r.w.Start().Add(time.Duration(sec) * time.Second) }

func (r *rig) value(t *testing.T, expr string, sec int) float64 {
	t.Helper()
	r.w.AdvanceTo(r.at(sec))
	res, err := r.src.Query(context.Background(), expr, r.at(sec))
	if err != nil {
		t.Fatal(err)
	}
	v, err := res.Value()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func (r *rig) read(t *testing.T, kind, name string, sec int) providers.Object {
	t.Helper()
	resp := r.p.Read(context.Background(), providers.ReadRequest{Now: r.at(sec), Addresses: []providers.Address{addr(kind, name)}})
	return resp.Objects[0]
}

// apply applies changes at sec and returns their results.
func (r *rig) apply(t *testing.T, sec int, cs ...providers.ObjectChange) []providers.ObjectResult {
	t.Helper()
	resp := r.p.Apply(context.Background(), providers.ApplyRequest{Now: r.at(sec), Changes: cs})
	if len(resp.Results) != len(cs) {
		t.Fatalf("%d results for %d changes", len(resp.Results), len(cs))
	}
	return resp.Results
}

func addr(kind, name string) providers.Address {
	return providers.Address{Provider: "sim", Kind: kind, Namespace: "shop", Name: name}
}

func count(n int64) values.Value { return values.CountOf(n) }
func mib(n int64) values.Value   { return values.BytesOf(n << 20) }

// attrs builds an attribute map from path, value pairs.
func attrs(kv ...any) map[addrs.Path]values.Value {
	m := map[addrs.Path]values.Value{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(addrs.Path)] = kv[i+1].(values.Value)
	}
	return m
}

// change is an update by manager moving every attribute it holds.
func change(a providers.Address, manager string, force bool, kv ...any) providers.ObjectChange {
	at := attrs(kv...)
	var changed []addrs.Path
	for p := range at {
		changed = append(changed, p)
	}
	slices.SortFunc(changed, comparePaths)
	return providers.ObjectChange{Address: a, Action: action.Update, Attributes: at, Changed: changed, Manager: manager, Force: force}
}

// TestMetricsAtHalfUtilisation: 2 pods × 100 req/s serving a Poisson 100
// req/s with exponential service times (S = 50 ms, c = 5 per pod), so each
// pod is an M/M/5 at ρ = 0.5. Every figure is read back through PromQL and
// checked within five standard deviations of its expectation.
func TestMetricsAtHalfUtilisation(t *testing.T) {
	r := newRig(t, constTrace(100, 600), deployment("api", 2))
	// A minute of a Poisson 100/s: 6,000 ± 77.
	if v := r.value(t, `sum(rate(http_requests_total{code="200"}[1m]))`, 300); !approx(v, 100, 5*math.Sqrt(6000)/60) {
		t.Errorf("served rate %v, want 100", v)
	}
	if v := r.value(t, `sum(rate(http_requests_total{code="503"}[1m]))`, 300); v != 0 {
		t.Errorf("dropped rate %v, want 0", v)
	}
	// Mean latency: S + E[W] = 50 ms + C(5, 2.5)/(c/S − λ) = 50 + 130.2/50
	// ms; C(5, 2.5) = 0.1304 (Erlang C).
	want := 0.05 + erlangC(5, 2.5)/(100-50)
	mean := r.value(t, `sum(rate(http_request_duration_seconds_sum[5m])) / sum(rate(http_request_duration_seconds_count[5m]))`, 600)
	if !approx(mean, want, 0.004) {
		t.Errorf("mean latency %v, want %v", mean, want)
	}
	// CPU: 50 req/s per pod × 5m × a mean cost of 1, + 2m idle = 0.252
	// cores a pod.
	if v := r.value(t, `sum(rate(container_cpu_usage_seconds_total{namespace="shop"}[5m]))`, 600); !approx(v, 2*0.252, 0.02) {
		t.Errorf("cpu %v, want 0.504", v)
	}
	// CPU joined to the workload through kube_pod_labels, as the engine's
	// default queries do.
	join := `sum by (label_app) (rate(container_cpu_usage_seconds_total[5m]) * on(namespace, pod) group_left(label_app) kube_pod_labels)`
	if v := r.value(t, join, 600); !approx(v, 0.504, 0.02) {
		t.Errorf("joined cpu %v", v)
	}
	ws := r.value(t, `avg(avg_over_time(container_memory_working_set_bytes{container="app"}[5m]))`, 600)
	if ws < 99*float64(spec.MiB) || ws > 101*float64(spec.MiB) {
		t.Errorf("working set %v, want ~100Mi", ws)
	}
	if v := r.value(t, `sum(kube_pod_container_resource_requests{resource="memory", container="app"})`, 600); v != float64(512*spec.MiB) {
		t.Errorf("memory requests %v, want 2 × 256Mi", v)
	}
	tot, _ := r.w.Totals("shop", "api")
	if !approx(tot.Arrived, 60000, 5*math.Sqrt(60000)) || tot.Served != tot.Arrived || tot.Dropped != 0 {
		t.Errorf("totals %+v", tot)
	}
}

// TestUtilisation compares p99 at 0.5, 0.95 and 1.2 of capacity: it climbs,
// and past 1 requests queue up to MaxWait and the excess is refused.
func TestUtilisation(t *testing.T) {
	var p99s []float64
	for _, rps := range []float64{100, 190, 240} {
		r := newRig(t, constTrace(rps, 600), deployment("api", 2))
		p99s = append(p99s, r.value(t, `histogram_quantile(0.99, sum by (le) (rate(http_request_duration_seconds_bucket[1m])))`, 120))
		tot, _ := r.w.Totals("shop", "api")
		if rps < 200 && tot.Dropped != 0 {
			t.Errorf("%v rps: nothing should be refused: %+v", rps, tot)
		}
		if rps > 200 {
			// 40 req/s over capacity: once the queues hold 10 s of work,
			// what exceeds capacity is refused (±5 sd of a Poisson minute).
			if v := r.value(t, `sum(rate(http_requests_total{code="503"}[1m]))`, 120); !approx(v, 40, 5*math.Sqrt(240*60)/60) {
				t.Errorf("503 rate %v, want 40", v)
			}
		}
		if tot.Arrived != tot.Served+tot.Backlog+tot.Dropped {
			t.Errorf("%v rps: requests lost: %+v", rps, tot)
		}
	}
	if !(p99s[0] < p99s[1] && p99s[1] < p99s[2]) {
		t.Errorf("p99 should climb with utilisation: %v", p99s)
	}
	// At 1.2 the queues hold up to 10 s of waiting: p99 is in the last
	// finite bucket, (5 s, 10 s].
	if p99s[2] < 5 {
		t.Errorf("saturated p99 %v, want > 5 s", p99s[2])
	}
}

// erlangC is P(wait) in an M/M/c queue with offered load a, by the Erlang B
// recursion.
func erlangC(c int, a float64) float64 {
	b := 1.0
	for k := 1; k <= c; k++ {
		b = a * b / (float64(k) + a*b)
	}
	return float64(c) * b / (float64(c) - a*(1-b))
}

// TestHPAOnCPU: 300 req/s on 2 pods, 5m CPU each at a 500m request and a 70%
// target: util = (150 × 0.005 + 0.002)/0.5 = 150.4% → ×2.149 → 5 pods at the
// first sync with traffic (15 s); they are ready 20 s later and the ratio
// falls to 0.863 (ceil(5 × 0.863) = 5): stable.
func TestHPAOnCPU(t *testing.T) {
	wl := deployment("checkout", 2)
	wl.PerPodRPS = 200
	wl.HPA = &spec.SimHPA{Min: 2, Max: 50, TargetCPU: pct(0.7)}
	r := newRig(t, constTrace(300, 600), wl)
	checks := []struct {
		sec             int
		replicas, ready int64
	}{{14, 2, 2}, {16, 5, 2}, {34, 5, 2}, {35, 5, 5}, {120, 5, 5}}
	for _, c := range checks {
		d := r.read(t, "Deployment", "checkout", c.sec)
		if d.Attributes[AttrReplicas] != count(c.replicas) || d.Attributes[AttrReadyReplicas] != count(c.ready) {
			t.Errorf("at %ds: replicas %s ready %s, want %d %d", c.sec, d.Attributes[AttrReplicas], d.Attributes[AttrReadyReplicas], c.replicas, c.ready)
		}
	}
	h := r.read(t, "HorizontalPodAutoscaler", "checkout", 120)
	if h.Attributes[AttrMinReplicas] != count(2) || h.Managers[AttrMinReplicas] != DefaultManager || h.Labels["app"] != "checkout" {
		t.Errorf("hpa %+v", h)
	}
	// setpoint raises minReplicas, taking it from kubectl: the HPA honours
	// it at its next sync.
	if res := r.apply(t, 120, change(h.Address, "setpoint", true, AttrMinReplicas, count(8))); res[0].Err != "" || res[0].After[AttrMinReplicas] != count(8) {
		t.Fatalf("%+v", res[0])
	}
	h2 := r.read(t, "HorizontalPodAutoscaler", "checkout", 135)
	if h2.Managers[AttrMinReplicas] != "setpoint" || h2.Generation != h.Generation+1 {
		t.Errorf("after apply: %+v", h2)
	}
	if d := r.read(t, "Deployment", "checkout", 136); d.Attributes[AttrReplicas] != count(8) {
		t.Errorf("replicas %s, want 8", d.Attributes[AttrReplicas])
	}
	// The load falls away: the HPA scales down only after its 300 s window.
	r2 := newRig(t, &Trace{Start: simStart, Rate: append(constTrace(300, 120).Rate, constTrace(10, 900).Rate...)}, wl)
	if d := r2.read(t, "Deployment", "checkout", 400); d.Attributes[AttrReplicas] != count(5) {
		t.Errorf("scaled down inside the stabilisation window: %s", d.Attributes[AttrReplicas])
	}
	if d := r2.read(t, "Deployment", "checkout", 600); d.Attributes[AttrReplicas] != count(2) {
		t.Errorf("at 600 s want min 2, got %s", d.Attributes[AttrReplicas])
	}
}

// TestKnativeScalesFromAndToZero: traffic for 60 s then none.
func TestKnativeScalesFromAndToZero(t *testing.T) {
	tr := &Trace{Start: simStart, Rate: make([]float64, 400)}
	for i := 100; i < 160; i++ {
		tr.Rate[i] = 50
	}
	wl := deployment("fib", 0)
	wl.Kind = "KnativeService"
	wl.Namespace = "shop"
	wl.Startup = spec.Duration(5 * time.Second)
	wl.Knative = &spec.SimKnative{TargetConcurrency: 1}
	r := newRig(t, tr, wl)
	if d := r.read(t, "KnativeService", "fib", 99); d.Attributes[AttrReadyReplicas] != count(0) {
		t.Fatalf("should start at zero: %+v", d.Attributes)
	}
	if d := r.read(t, "KnativeService", "fib", 110); d.Attributes[AttrReadyReplicas] == count(0) {
		t.Fatalf("should have woken: %+v", d.Attributes)
	}
	tot, _ := r.w.Totals("shop", "fib")
	if tot.Dropped != 0 || tot.Served == 0 {
		t.Fatalf("the cold start should buffer, not drop: %+v", tot)
	}
	if d := r.read(t, "KnativeService", "fib", 200); d.Attributes[AttrReadyReplicas] == count(0) {
		t.Fatalf("scaled to zero less than 60 s after the last request")
	}
	if d := r.read(t, "KnativeService", "fib", 260); d.Attributes[AttrReadyReplicas] != count(0) {
		t.Fatalf("should be back at zero: %+v", d.Attributes)
	}
	// min-scale keeps it warm.
	if res := r.apply(t, 260, change(addr("KnativeService", "fib"), "setpoint", true, AttrMinScale, count(2))); res[0].Err != "" {
		t.Fatal(res[0].Err)
	}
	if d := r.read(t, "KnativeService", "fib", 300); d.Attributes[AttrReadyReplicas] != count(2) {
		t.Fatalf("min-scale 2 not honoured: %+v", d.Attributes)
	}
}

// TestApplyPersistsAndReplays: the changes that took effect are saved,
// those refused are not, and a new world from the state file reaches the
// same state at the same time.
func TestApplyPersistsAndReplays(t *testing.T) {
	state := filepath.Join(t.TempDir(), "sim.json")
	r := newRig(t, constTrace(150, 900), deployment("inventory", 1))
	r.p.StatePath = state
	a := addr("Deployment", "inventory")
	res := r.apply(t, 60,
		change(a, "setpoint", true, AttrReplicas, count(3), ContainerAttr("app", "requests"), mib(192)),
		change(a, "setpoint", true, ContainerAttr("nope", "requests"), mib(192)),
		change(a, "setpoint", true, AttrReadyReplicas, count(9)),
		change(addr("Deployment", "ghost"), "setpoint", true, AttrReplicas, count(1)),
		// Applying what the object already has moves nothing: not recorded.
		change(a, "setpoint", false, AttrReplicas, count(3)),
	)
	errs := []string{}
	for _, res := range res {
		errs = append(errs, res.Err)
	}
	if errs[0] != "" || !strings.Contains(errs[1], "no such container") || !strings.Contains(errs[2], "status") || errs[3] != "no such object" || errs[4] != "" {
		t.Fatalf("results: %q", errs)
	}
	changes, err := LoadChanges(state)
	if err != nil || len(changes) != 1 || changes[0].At != 60 || len(changes[0].Attributes) != 2 || changes[0].Address != a || !changes[0].Force {
		t.Fatalf("state: %+v %v", changes, err)
	}
	live := r.read(t, "Deployment", "inventory", 300)
	if live.Attributes[AttrReplicas] != count(3) || live.Attributes[AttrReadyReplicas] != count(3) || live.Attributes[ContainerAttr("app", "requests")] != mib(192) {
		t.Fatalf("live %+v", live.Attributes)
	}
	replayed := replay(t, state, constTrace(150, 900), r.at(300), []spec.SimWorkload{deployment("inventory", 1)}, a)[0]
	sameObject(t, live, replayed)
	a1, _ := r.w.Totals("shop", "inventory")
	b1, _ := replayed.world.Totals("shop", "inventory")
	if a1 != b1 {
		t.Errorf("totals differ: live %+v replayed %+v", a1, b1)
	}
	// The memory change rolled the pods: new names, same count.
	pods := r.value(t, `count(kube_pod_labels{label_app="inventory"})`, 300)
	if pods != 3 {
		t.Errorf("pods after the rollout: %v", pods)
	}
}

type replayedObject struct {
	providers.Object
	world *World
}

// replay builds a new world from the state file and reads addresses at now.
func replay(t *testing.T, state string, tr *Trace, now time.Time, wls []spec.SimWorkload, as ...providers.Address) []replayedObject {
	t.Helper()
	changes, err := LoadChanges(state)
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWithTrace(spec.SimConfig{Seed: 1, Workloads: wls}, tr, Options{Sink: embedded.NewStore(0), Changes: changes})
	if err != nil {
		t.Fatal(err)
	}
	var out []replayedObject
	for _, o := range (&Provider{World: w}).Read(context.Background(), providers.ReadRequest{Now: now, Addresses: as}).Objects {
		out = append(out, replayedObject{o, w})
	}
	return out
}

// sameObject compares everything a read returns.
func sameObject(t *testing.T, live providers.Object, replayed replayedObject) {
	t.Helper()
	if live.Exists != replayed.Exists || live.Generation != replayed.Generation {
		t.Errorf("%s: exists/generation: live %v %d, replayed %v %d", live.Address, live.Exists, live.Generation, replayed.Exists, replayed.Generation)
	}
	if !maps.Equal(live.Attributes, replayed.Attributes) {
		t.Errorf("%s: attributes: live %v, replayed %v", live.Address, live.Attributes, replayed.Attributes)
	}
	if !maps.Equal(live.Managers, replayed.Managers) {
		t.Errorf("%s: managers: live %v, replayed %v", live.Address, live.Managers, replayed.Managers)
	}
	if !maps.Equal(live.Labels, replayed.Labels) || !maps.Equal(live.Annotations, replayed.Annotations) {
		t.Errorf("%s: labels/annotations differ", live.Address)
	}
}

// TestFullTraceReplay runs specs/ over the whole shipped trace and checks
// every request is accounted for: in = served + queued + dropped.
func TestFullTraceReplay(t *testing.T) {
	l, err := load.New()
	if err != nil {
		t.Fatal(err)
	}
	res := l.LoadDir("../../specs")
	env := res.Environment()
	if env == nil || len(res.Diags) > 0 {
		t.Fatalf("specs: %v", res.Diags)
	}
	cfg, err := Config(env)
	if err != nil {
		t.Fatal(err)
	}
	store := embedded.NewStore(0)
	w, err := New(cfg, Options{BaseDir: "../../specs", Sink: store})
	if err != nil {
		t.Fatal(err)
	}
	w.AdvanceTo(w.End())
	var traceTotal float64
	for _, v := range w.Trace().Rate {
		traceTotal += v
	}
	// Every arrival row × rateScale.
	raw, err := os.ReadFile(filepath.Join("../../specs", cfg.Trace))
	if err != nil {
		t.Fatal(err)
	}
	rows := strings.Count(string(raw), "\n2023-")
	if !approx(traceTotal, float64(rows)*cfg.RateScale, 1e-6) || rows < 19000 {
		t.Fatalf("trace total %v, want %d rows × %v", traceTotal, rows, cfg.RateScale)
	}
	var sum float64
	for _, wl := range cfg.Workloads {
		tot, _ := w.Totals(wl.Namespace, wl.Name)
		// Each request of the superposed trace goes to a workload with
		// the probability of its share, or of its own thinning when it
		// replays the trace on its own: a binomial count.
		p := wl.Share
		if wl.Thin != nil {
			p = *wl.Thin
		}
		sd := math.Sqrt(traceTotal * p * (1 - p))
		if !approx(tot.Arrived, traceTotal*p, 5*sd+1) {
			t.Errorf("%s: arrived %v, want %v ± %.0f", wl.Name, tot.Arrived, traceTotal*p, 5*sd+1)
		}
		if tot.Arrived != tot.Served+tot.Backlog+tot.Dropped {
			t.Errorf("%s: %v in, %v served + %v queued + %v dropped", wl.Name, tot.Arrived, tot.Served, tot.Backlog, tot.Dropped)
		}
		if wl.Thin == nil {
			sum += tot.Arrived
		}
	}
	if !approx(sum, traceTotal, 5*math.Sqrt(traceTotal)) {
		t.Errorf("shares should cover the trace: %v of %v", sum, traceTotal)
	}
	// A route group replays its own share of the trace; never configured,
	// it routes every request, evenly.
	for _, g := range cfg.RouteGroups {
		r, _ := w.RouteReport(g.Namespace, g.Name)
		sd := math.Sqrt(traceTotal * g.Share * (1 - g.Share))
		var routed int64
		for _, ph := range r.Phases {
			routed += ph.Requests
		}
		if !approx(float64(r.Arrived), traceTotal*g.Share, 5*sd+1) || routed != r.Arrived || r.ConfiguredAt != -1 {
			t.Errorf("route group %s: arrived %d (routed %d), want %v ± %.0f", g.Name, r.Arrived, routed, traceTotal*g.Share, 5*sd+1)
		}
	}
	if st := store.Stats(); st.MaxT-st.MinT > (30 * time.Minute).Milliseconds() {
		t.Errorf("the store outgrew its retention: %+v", st)
	}
}

func approx(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// TestReadyMinSignal: the world's readiness series, read as the NFR kind
// reads it (the fewest ready pods over two minutes), counts only pods
// that are ready: 3 from the start; raised to 5 at 2m (startup 20 s), the
// fewest over the window stays 3 until the window has only seconds with
// 5 ready; through a rolling update, 5.
func TestReadyMinSignal(t *testing.T) {
	r := newRig(t, constTrace(200, 600), deployment("checkout", 3))
	q := kindsnfr.QueryReadyMin
	if v := r.value(t, q, 115); v != 3 {
		t.Fatalf("at 1m55s: %v ready at the fewest, want 3", v)
	}
	r.w.wls[0].deploy.attrs[AttrReplicas] = values.CountOf(5)
	if v := r.value(t, q, 200); v != 3 {
		t.Fatalf("at 3m20s: %v, want 3 (the new pods were starting within the window)", v)
	}
	if v := r.value(t, q, 300); v != 5 {
		t.Fatalf("at 5m: %v, want 5", v)
	}
	// A rolling update replaces every pod, a new one ready before an old
	// one goes: 5 were ready at every moment, and the signal says so.
	r.w.wls[0].template.templateGen++
	for _, sec := range []int{330, 400, 480} {
		if v := r.value(t, q, sec); v != 5 {
			t.Fatalf("at %ds, rolling: %v, want 5", sec, v)
		}
	}
}
