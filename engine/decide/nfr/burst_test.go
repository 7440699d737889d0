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

// rep is k copies of v, and cat the rates given one after another.
func rep(v float64, k int) []float64 {
	out := make([]float64, k)
	for i := range out {
		out[i] = v
	}
	return out
}

func cat(parts ...[]float64) []float64 {
	var out []float64
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// TestBurstMemory: hand-computed memories. A pod serves 100 req/s as sized
// and 125 at full CPU, so 100 req/s needs 1 pod and 500 needs 5; steps are
// 15 s, the startup 15 s, and 1% of requests may be late.
func TestBurstMemory(t *testing.T) {
	in := func(rates ...float64) BurstInput {
		return BurstInput{Rates: rates, Step: 15 * time.Second, PodRate: 100, FullRate: 125, Startup: 15 * time.Second, LateShare: 0.01}
	}
	one := []float64{500}
	cases := []struct {
		name  string
		in    BurstInput
		pods  int
		kept  time.Duration
		since time.Duration
		why   string
	}{
		// Needs 5 1 1 1 1 5 1 1 1 1 5 1 1: level 5 in three one-step
		// episodes, two gaps of 4 steps (60 s > 15 s, the 1 pod in them
		// serving 125 < 500). μ = 60 s, d = 15 s, the mean rate 2,500/13 =
		// 192.31: x = 15 × 500 / 75 / (0.01 × 192.31) = 52.0, kept 60 ×
		// ln 52 = 237 s, cut to the history's 13 × 15 = 195 s; last needed
		// 2 steps ago.
		{"bursts back soon", in(cat(one, rep(100, 4), one, rep(100, 4), one, rep(100, 2))...), 5, 195 * time.Second, 30 * time.Second,
			"keep 5 pods (500 req/s) for 3m15s after it: it came back after 1m0s on average (2 gaps, episodes of 15s)"},
		// Needs 5, 1 × 4, 5, 1 × 20: one gap of 60 s; the mean 3,400/26 =
		// 130.77. Level 5: x = 100 / 1.3077 = 76.5, kept 60 × ln 76.5 =
		// 260 s; level 4 (400 req/s): 61.2, 247 s; 3: 45.9, 230 s; 2:
		// 30.6, 205 s. Last needed 20 steps, 300 s, ago: past every keep.
		{"gone for longer than kept", in(cat(one, rep(100, 4), one, rep(100, 20))...), 0, 0, 0, "none kept"},
		// Needs 6 5 5 5 6 5: the dip to 5 pods lasts 45 s, but 5 pods at
		// full CPU serve 625 ≥ 600: noise, not a gap; one episode.
		{"a dip the headroom covers", in(600, 500, 500, 500, 600, 500), 0, 0, 0, "none kept"},
		// A flash crowd: one episode of level 5, nothing to learn from.
		{"one burst", in(100, 500, 500, 500, 100, 100), 0, 0, 0, "none kept"},
		// The first case with a 1 ms startup: x = 0.001 × 500 / 75 /
		// 1.9231 = 0.0035 ≤ 1: meeting a burst cold costs nothing to speak
		// of.
		{"instant startup", func() BurstInput {
			b := in(cat(one, rep(100, 4), one, rep(100, 4), one, rep(100, 2))...)
			b.Startup = time.Millisecond
			return b
		}(), 0, 0, 0, "none kept"},
		{"no capacity", BurstInput{Rates: []float64{1, 2, 3}, Step: time.Second}, 0, 0, 0, "no pod capacity"},
	}
	for _, c := range cases {
		b := BurstMemory(c.in)
		if b.Pods != c.pods || b.Kept != c.kept || b.Since != c.since || !strings.Contains(b.Why, c.why) {
			t.Errorf("%s: %+v, want %d pods kept %s, %s ago, why %q", c.name, b, c.pods, c.kept, c.since, c.why)
		}
	}
}

// TestBurstMemoryBounds: whatever the history, the memory keeps at most
// the most any step needed, for at most the history's span, and only a
// level last needed within its keep.
func TestBurstMemoryBounds(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for range 300 {
		n := 1 + r.IntN(130)
		rates := make([]float64, n)
		top := 0
		for i := range rates {
			rates[i] = 50 + float64(r.IntN(2))*r.Float64()*900
			top = max(top, int(math.Ceil(rates[i]/100-1e-9)))
		}
		b := BurstMemory(BurstInput{Rates: rates, Step: 15 * time.Second, PodRate: 100, FullRate: 125, Startup: time.Duration(r.IntN(90)) * time.Second, LateShare: 0.01})
		if b.Pods > top || b.Pods < 0 || b.Since > b.Kept || b.Kept > time.Duration(n)*15*time.Second {
			t.Fatalf("rates %v: %+v (top %d)", rates, b, top)
		}
	}
}

// TestWayDown: the sizing of TestSLORecommendation (a peak of 350 req/s:
// a raw 350 ÷ (0.8097 × 125) = 3.458 pods, 4), at a mean of 330 req/s
// (1,440m of CPU: 4m a request and 120m idle). With a 30% tolerance a
// decrease lands on the count with 30% headroom on the mean, 330 × 1.3 =
// 429 req/s: ceil(4.24) = 5, and none happens while that count is what
// runs. The HPA's CPU target is the sized utilisation 0.8097 plus each of
// 4 pods' share of the 120m idle, 120 ÷ 4 ÷ 500 = 0.06: 87%; its
// scale-down window the stability, 60 s.
func TestWayDown(t *testing.T) {
	st := spec.Duration(40 * time.Millisecond)
	n := nfrSpec("Deployment")
	n.Spec.Policy = spec.PolicySLO
	n.Spec.Throughput.Floor = 0.5
	n.Spec.Latency.ServiceTime = &st
	n.Spec.Safety.Tolerance = 0.3
	n.Spec.Safety.Stability = spec.Duration(time.Minute)
	n.Spec.Enforcement.Memory = spec.ModeOff
	sig := Signals{RPS: f(330), CPUMilli: f(1440), Peak: f(350), P99: f(0.2), Fit: &Fit{Slope: 4, Intercept: 120, R2: 0.98, N: 30}, FitOK: true}
	hpa := func(min string) Input {
		h := object("HorizontalPodAutoscaler", true, map[addrs.Path]string{AttrMinReplicas: min, AttrTargetCPU: "70"})
		return Input{Spec: n, Target: object("Deployment", true, nil), HPA: h, Signals: sig}
	}
	for _, c := range []struct {
		tol       spec.Percent
		cur, want string
	}{{0.3, "7", "5"}, {0.3, "5", "5"}, {0.3, "4", "4"}, {0.3, "2", "4"},
		// With 60% the count with headroom is ceil(528 ÷ 101.2 = 5.22) =
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

// TestSLODecisionHistory: the need now is the most of the last startup's
// rates (30 s: the newest three 15 s points), and burst memory keeps a
// level that recurred. A pod serves 0.8097 × 125 = 101.2 req/s as sized:
// 300 req/s needs 3, the floor's 200 req/s 2, 500 req/s 5.
func TestSLODecisionHistory(t *testing.T) {
	st := spec.Duration(40 * time.Millisecond)
	n := nfrSpec("Deployment").Spec
	n.Policy = spec.PolicySLO
	n.Throughput.Floor = 0.5
	n.Latency.ServiceTime = &st
	for _, c := range []struct {
		name    string
		history []float64
		want    int64
		why     string
	}{
		{"a spike within the startup", cat(rep(100, 10), []float64{300, 100}), 3, "peak 300 req/s"},
		{"a spike before it", cat(rep(100, 9), []float64{300}, rep(100, 3)), 2, "floor 50% × 400 = 200 req/s"},
		// Level 5 three times, 60 s apart (TestBurstMemory's first case):
		// kept, 5 × 101.2 = 506 req/s.
		{"a burst that recurs", cat([]float64{500}, rep(100, 4), []float64{500}, rep(100, 4), []float64{500}, rep(100, 3)), 5, "burst memory 506 req/s"},
	} {
		sig := Signals{RPS: f(100), CPUMilli: f(520), P99: f(0.2), Fit: &Fit{Slope: 4, Intercept: 120, R2: 0.98, N: 30}, FitOK: true,
			History: c.history, HistoryStep: 15 * time.Second}
		r, ok := SLODecision(n, sig, false)
		if !ok || r.Replicas != c.want || !strings.Contains(r.Why, c.why) {
			t.Errorf("%s: %d %v %q, want %d and %q", c.name, r.Replicas, ok, r.Why, c.want, c.why)
		}
	}
}

// TestRising: the last minute's mean against the minute before's (four
// 15 s points each), over the tolerance, and the rate two minutes on.
func TestRising(t *testing.T) {
	r := func(a, b float64) []float64 {
		return []float64{50, a, a, a, a, b, b, b, b}
	}
	for _, c := range []struct {
		rates     []float64
		tol       float64
		projected float64
		want      string
	}{
		// 106 + 2 × (106 − 100) = 118.
		{r(100, 106), 0.05, 118, "the rate rose 6% in a minute (100 → 106 req/s)"},
		{r(100, 105), 0.05, 0, ""}, // exactly the tolerance: not over it
		{r(100, 90), 0.05, 0, ""},
		{r(0, 10), 0.05, 0, ""},                    // from nothing: no ratio to judge
		{[]float64{1, 1, 1, 1, 9, 9, 9}, 0, 0, ""}, // fewer than two minutes
	} {
		if p, got := rising(c.rates, 15*time.Second, c.tol); p != c.projected || got != c.want {
			t.Errorf("rising(%v, %v) = %v, %q; want %v, %q", c.rates, c.tol, p, got, c.projected, c.want)
		}
	}
	// A decrease on a rising rate lands no lower than the count the rate
	// two minutes on would need: from 7, with the last minute 20% above the
	// one before (250 → 300 req/s, 400 two minutes on), 400 × 1.05 = 420
	// req/s ÷ 101.2 a pod = 4.15: 5, where the mean 330 × 1.05 alone
	// would have asked ceil(3.42) = 4. At a count of 5 or below, nothing
	// is lowered.
	st := spec.Duration(40 * time.Millisecond)
	n := nfrSpec("Deployment")
	n.Spec.Policy, n.Spec.Throughput.Floor, n.Spec.Latency.ServiceTime = spec.PolicySLO, 0.5, &st
	n.Spec.Safety.Tolerance, n.Spec.Enforcement.Memory = 0.05, spec.ModeOff
	sig := Signals{RPS: f(330), CPUMilli: f(1440), P99: f(0.2), Fit: &Fit{Slope: 4, Intercept: 120, R2: 0.98, N: 30}, FitOK: true,
		History: []float64{250, 250, 250, 250, 300, 300, 300, 300}, HistoryStep: 15 * time.Second}
	for _, c := range []struct {
		cur, want string
		why       string
	}{
		{"7", "5", "; down to 5 only: the rate rose 20% in a minute (250 → 300 req/s): 5 for 400 req/s"},
		{"5", "5", "; 4 would do now, but the rate rose 20% in a minute (250 → 300 req/s): 5 for 400 req/s: 5 kept"},
	} {
		h := object("HorizontalPodAutoscaler", true, map[addrs.Path]string{AttrMinReplicas: c.cur})
		out := Decide(Input{Spec: n, Target: object("Deployment", true, nil), HPA: h, Signals: sig})
		if len(out.Intents) != 1 || out.Intents[0].Value.String() != c.want || !strings.HasSuffix(out.Intents[0].Rationale, c.why) {
			t.Errorf("a rising rate from %s: %+v, want %s ending %q", c.cur, out.Intents, c.want, c.why)
		}
	}
}

// TestNoLatencyTargetAutoscaled: with no latency target and an autoscaler
// of its own, the bound serves minRPS and no more. 6.4m a request: a pod
// serves 500 ÷ 6.4 = 78.1 req/s, 74.2 at the most utilisation sized for,
// 0.95: minRPS 50 needs ceil(0.674) = 1; without an autoscaler the
// measured 55 req/s at 0.7 (54.7 a pod) asks ceil(1.006) = 2.
func TestNoLatencyTargetAutoscaled(t *testing.T) {
	n := nfrSpec("KnativeService").Spec
	n.Policy, n.Latency, n.Throughput.MinRPS = spec.PolicySLO, nil, 50
	sig := Signals{RPS: f(55), CPUMilli: f(352)}
	for _, c := range []struct {
		autoscaled bool
		want       int64
		why        string
	}{
		{true, 1, "ceil(minRPS 50 req/s ÷ (ρ 0.95 × 78.1 req/s a pod)) = 1"},
		{false, 2, "ceil(mean 55 req/s ÷ (ρ 0.70 × 78.1 req/s a pod)) = 2"},
	} {
		r, ok := SLODecision(n, sig, c.autoscaled)
		if !ok || r.Replicas != c.want || !strings.Contains(r.Why, c.why) {
			t.Errorf("autoscaled %v: %d %q, want %d, %q", c.autoscaled, r.Replicas, r.Why, c.want, c.why)
		}
	}
}
