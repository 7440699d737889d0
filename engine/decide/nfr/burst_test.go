package nfr

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/values"
)

// TestBurstMemory: hand-computed replays. A pod serves 100 req/s as sized
// and 125 at full CPU, so 100 req/s needs 1 pod and 500 needs 5; steps are
// 15 s and the startup 15 s, one step: the pods at step i are the most any
// step of [i−1−w, i−1] needed.
func TestBurstMemory(t *testing.T) {
	in := func(rates ...float64) BurstInput {
		return BurstInput{Rates: rates, Step: 15 * time.Second, PodRate: 100, FullRate: 125, Startup: 15 * time.Second, LateShare: 0.01}
	}
	cases := []struct {
		name   string
		in     BurstInput
		window time.Duration
		late   float64
		why    string
	}{
		// Needs 1 1 5 1 1 5 1. Steps 1–6 count: 1,400 requests, 14 may be
		// late. The burst at step 2 is late whatever is kept (nothing
		// before it needed 5): 500. The one at step 5 is late unless step 2
		// is in the window of step 5's pods, [4−w, 4]: w ≥ 2. So late(0) =
		// late(1) = 1,000, late(2..5) = 500 > 14: the shortest window that
		// makes as few late as the longest, 2 steps.
		{"a burst back soon", in(100, 100, 500, 100, 100, 500, 100), 30 * time.Second, 500.0 / 1400, "bursts no memory foretold make 35.7% late"},
		// Needs 5 1 1 1 5 1. Steps 1–5: 900 requests, 9 may be late. The
		// burst at step 4 is late unless step 0 is in [3−w, 3]: w ≥ 3;
		// then nothing is late, within the allowance.
		{"within the allowance", in(500, 100, 100, 100, 500, 100), 45 * time.Second, 0, "keep 45s: the shortest memory that keeps late requests at 0.00% ≤ 1% over the last 1m30s"},
		// Steady: nothing is ever late, no memory.
		{"steady", in(100, 110, 90, 100, 120, 100), 0, 0, "no burst in the last 1m30s came back sooner than 15s"},
		// Under the full rate is not late: 120 ≤ 125 needs no memory of
		// the 500 before it.
		{"headroom", in(500, 100, 120, 120), 0, 0, "no memory"},
		// Two steps are fewer than the startup and one more: keep all.
		{"too short", in(500, 100), 30 * time.Second, 0, "2 rate samples, too few to weigh"},
	}
	for _, c := range cases {
		b := BurstMemory(c.in)
		if b.Window != c.window || math.Abs(b.Late-c.late) > 1e-9 || !strings.Contains(b.Why, c.why) {
			t.Errorf("%s: %+v, want window %s, late %.4f, why %q", c.name, b, c.window, c.late, c.why)
		}
	}
	if b := BurstMemory(BurstInput{Rates: []float64{1, 2, 3}, Step: time.Second}); b.Window != 0 || !strings.Contains(b.Why, "no pod capacity") {
		t.Errorf("no capacity: %+v", b)
	}
}

// TestBurstMemoryLateFalls: a longer window never makes more requests
// late, which the bisection relies on; and the window chosen is the
// shortest within the allowance.
func TestBurstMemoryLateFalls(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for range 200 {
		n := 5 + r.IntN(60)
		rates := make([]float64, n)
		for i := range rates {
			rates[i] = 50 + 100*float64(r.IntN(2))*r.Float64()*8
		}
		d := 1 + r.IntN(3)
		need := make([]int, n)
		for i, v := range rates {
			need[i] = int(math.Ceil(v/100 - 1e-9))
		}
		prev := math.Inf(1)
		for w := 0; w <= n; w++ {
			l := replayLate(rates, need, d, w, 125)
			if l > prev+1e-9 {
				t.Fatalf("rates %v, d %d: late(%d) = %v > late(%d) = %v", rates, d, w, l, w-1, prev)
			}
			prev = l
		}
		in := BurstInput{Rates: rates, Step: time.Second, PodRate: 100, FullRate: 125, Startup: time.Duration(d) * time.Second, LateShare: 0.01}
		b := BurstMemory(in)
		if n < d+2 {
			continue
		}
		w := int(b.Window / time.Second)
		var total float64
		for _, v := range rates[d:] {
			total += v
		}
		allowed := math.Max(0.01*total, replayLate(rates, need, d, n-1-d, 125))
		if replayLate(rates, need, d, w, 125) > allowed+1e-9 || w > 0 && replayLate(rates, need, d, w-1, 125) <= allowed+1e-9 {
			t.Fatalf("rates %v, d %d: window %d is not the shortest within %v", rates, d, w, allowed)
		}
	}
}

func TestRecent(t *testing.T) {
	rates := []float64{1, 5, 2, 3}
	for _, c := range []struct {
		window time.Duration
		want   float64
	}{{20 * time.Second, 5}, {10 * time.Second, 3}, {0, 3}, {time.Hour, 5}} {
		if got := Recent(rates, 10*time.Second, c.window); got != c.want {
			t.Errorf("Recent(%s) = %v, want %v", c.window, got, c.want)
		}
	}
	if !math.IsNaN(Recent(nil, time.Second, time.Minute)) {
		t.Error("no rates: want NaN")
	}
}

// TestWayDown: the sizing of TestSLORecommendation (350 req/s: a raw 3.458
// pods, 4) with a 30% tolerance: a decrease lands on the count with 30%
// headroom on the rate, ceil(3.458 × 1.3 = 4.496) = 5, and none happens
// while that count is what runs. The HPA's CPU target is the sized
// utilisation 0.8097 plus each of 4 pods' share of the 120m idle, 120 ÷ 4
// ÷ 500 = 0.06: 87%; its scale-down window the stability, 60 s.
func TestWayDown(t *testing.T) {
	st := spec.Duration(40 * time.Millisecond)
	n := nfrSpec("Deployment")
	n.Spec.Policy = spec.PolicySLO
	n.Spec.Throughput.Floor = 0.5
	n.Spec.Latency.ServiceTime = &st
	n.Spec.Safety.Tolerance = 0.3
	n.Spec.Safety.Stability = spec.Duration(time.Minute)
	n.Spec.Enforcement.Memory = spec.ModeOff
	sig := Signals{RPS: f(300), CPUMilli: f(1320), Peak: f(350), P99: f(0.2), Fit: &Fit{Slope: 4, Intercept: 120, R2: 0.98, N: 30}, FitOK: true}
	hpa := func(min string) Input {
		h := object("HorizontalPodAutoscaler", true, map[addrs.Path]string{AttrMinReplicas: min, AttrTargetCPU: "70"})
		return Input{Spec: n, Target: object("Deployment", true, nil), HPA: h, Signals: sig}
	}
	for _, c := range []struct {
		tol       spec.Percent
		cur, want string
	}{{0.3, "7", "5"}, {0.3, "5", "5"}, {0.3, "4", "4"}, {0.3, "2", "4"},
		// With 60% the count with headroom is ceil(3.458 × 1.6 = 5.53) =
		// 6, above the 5 that runs: kept, never raised by the way down.
		{0.6, "5", "5"}} {
		n.Spec.Safety.Tolerance = c.tol
		out := Decide(hpa(c.cur))
		got := ""
		for _, it := range out.Intents {
			if it.Attr.Path == AttrMinReplicas {
				got = it.Value.String()
			}
		}
		if got != c.want {
			t.Errorf("minReplicas %s: %s, want %s (%+v)", c.cur, got, c.want, out.Intents)
		}
	}
	n.Spec.Safety.Tolerance = 0.3
	// Owning the floor only: no other field of the HPA is written.
	for _, it := range Decide(hpa("7")).Intents {
		if it.Dimension == Autoscaler {
			t.Errorf("owns floor: %s written", it.Attr.Path)
		}
	}
	n.Spec.Autoscaler = &spec.Autoscaler{Owns: spec.OwnsCount}
	want := map[addrs.Path]values.Value{AttrTargetCPU: values.CountOf(87), AttrScaleDownWindow: values.CountOf(60)}
	got := map[addrs.Path]values.Value{}
	for _, it := range Decide(hpa("7")).Intents {
		if it.Dimension == Autoscaler {
			got[it.Attr.Path] = it.Value
		}
	}
	if len(got) != 2 || got[AttrTargetCPU] != want[AttrTargetCPU] || got[AttrScaleDownWindow] != want[AttrScaleDownWindow] {
		t.Errorf("owns count: %v, want %v", got, want)
	}
}
