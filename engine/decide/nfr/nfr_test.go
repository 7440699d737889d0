package nfr

import (
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/intent"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/noderes"
)

func f(v float64) *float64 { return &v }

func TestReplicasRecommendation(t *testing.T) {
	cases := []struct {
		name      string
		target    float64
		cpuPerPod spec.MilliCPU
		latency   time.Duration
		sig       Signals
		want      int64
		ok        bool
		why       string
	}{
		// The design's example: 400/310 × 1850/500 = 4.77 → 5, p99 above → 6.
		{"design example", 400, 500, 250 * time.Millisecond, Signals{RPS: f(310), CPUMilli: f(1850), P99: f(0.28)}, 6, true,
			"ceil((400/310) × (1850m/500m)) = 5, p99 280ms > 250ms: +1"},
		// An exact product must not round up: 400/200 × 1000/500 = 4.
		{"exact product", 400, 500, 0, Signals{RPS: f(200), CPUMilli: f(1000)}, 4, true, "ceil((400/200) × (1000m/500m)) = 4"},
		// 100/200 × 300/500 = 0.3 → 1.
		{"fraction", 100, 500, 0, Signals{RPS: f(200), CPUMilli: f(300)}, 1, true, "= 1"},
		// No CPU at all: 0 → floor 1.
		{"floor", 100, 500, 0, Signals{RPS: f(200), CPUMilli: f(0)}, 1, true, "= 0, floor 1"},
		// p99 exactly at the target is not above it.
		{"p99 at target", 400, 500, 250 * time.Millisecond, Signals{RPS: f(400), CPUMilli: f(1000), P99: f(0.25)}, 2, true, "p99 250ms ≤ 250ms"},
		{"p99 missing", 400, 500, 250 * time.Millisecond, Signals{RPS: f(400), CPUMilli: f(1000), Missing: map[string]string{"p99": "no series matched"}}, 2, true, "latency missing (no series matched), no bump"},
		{"cpuPerPod 250m", 400, 250, 0, Signals{RPS: f(310.5), CPUMilli: f(1850)}, 10, true, "ceil((400/310.5) × (1850m/250m)) = 10"},
		{"no traffic", 400, 500, 0, Signals{RPS: f(0.0001), CPUMilli: f(5)}, 0, false, "~0"},
		{"rps missing", 400, 500, 0, Signals{CPUMilli: f(5), Missing: map[string]string{"rps": "no series matched"}}, 0, false, "requests per second missing (no series matched)"},
		{"cpu missing", 400, 500, 0, Signals{RPS: f(5)}, 0, false, "CPU usage missing"},
	}
	for _, c := range cases {
		got, why, ok := ReplicasRecommendation(c.target, c.cpuPerPod, c.latency, c.sig)
		if got != c.want || ok != c.ok || !strings.Contains(why, c.why) {
			t.Errorf("%s: got %d %v %q; want %d %v containing %q", c.name, got, ok, why, c.want, c.ok, c.why)
		}
	}
}

func mem(headroom, factor float64, lo, hi spec.Bytes) spec.MemorySpec {
	return spec.MemorySpec{Headroom: headroom, LimitFactor: factor, Min: lo, Max: hi}
}

func TestMemoryRecommendation(t *testing.T) {
	def := mem(1.2, 1.5, 64*spec.MiB, 4*spec.GiB)
	cases := []struct {
		name     string
		ws       float64
		m        spec.MemorySpec
		req, lim spec.Bytes
	}{
		// The reference's example, recomputed from its formula: 110Mi × 1.2
		// = 132Mi → 144Mi; 144Mi × 1.5 = 216Mi → 224Mi (the reference's
		// 216Mi/324Mi do not follow from it).
		{"reference example", 110 * float64(spec.MiB), def, 144 * spec.MiB, 224 * spec.MiB},
		// 12Mi is under the 64Mi floor; 96Mi under the 128Mi limit floor.
		{"floors", 10 * float64(spec.MiB), def, 64 * spec.MiB, 128 * spec.MiB},
		// 4800Mi is cut to 4Gi; the limit comes from the clamped request.
		{"request ceiling", 4000 * float64(spec.MiB), def, 4 * spec.GiB, 6 * spec.GiB},
		{"limit ceiling", 6000 * float64(spec.MiB), mem(1.2, 2.5, 64*spec.MiB, 4*spec.GiB), 4 * spec.GiB, 8 * spec.GiB},
		// The spec's min raises: 120Mi → 128Mi → 256Mi.
		{"spec min", 100 * float64(spec.MiB), mem(1.2, 1.5, 256*spec.MiB, 4*spec.GiB), 256 * spec.MiB, 384 * spec.MiB},
		// The spec's max cuts: 1200Mi → 1Gi; limit 1536Mi.
		{"spec max", 1000 * float64(spec.MiB), mem(1.2, 1.5, 64*spec.MiB, spec.GiB), spec.GiB, 1536 * spec.MiB},
		// A spec min below 64Mi does not lower the fixed floor.
		{"spec min below floor", 10 * float64(spec.MiB), mem(1.2, 1.5, 32*spec.MiB, 4*spec.GiB), 64 * spec.MiB, 128 * spec.MiB},
		// 200.5Mi × 1.2 = 240.6Mi → 256Mi; × 1.5 = 384Mi.
		{"fractional", 200.5 * float64(spec.MiB), def, 256 * spec.MiB, 384 * spec.MiB},
		// Headroom 1.0 on an exact multiple stays put.
		{"exact multiple", 160 * float64(spec.MiB), mem(1.0, 1.0, 64*spec.MiB, 4*spec.GiB), 160 * spec.MiB, 160 * spec.MiB},
	}
	for _, c := range cases {
		req, lim, reqWhy, _ := MemoryRecommendation(c.ws, c.m)
		if spec.Bytes(req) != c.req || spec.Bytes(lim) != c.lim {
			t.Errorf("%s: got %s/%s (%s), want %s/%s", c.name, spec.Bytes(req), spec.Bytes(lim), reqWhy, c.req, c.lim)
		}
	}
	_, _, why, limWhy := MemoryRecommendation(110*float64(spec.MiB), def)
	if why != "roundUp16Mi(110Mi × 1.2) = 144Mi" || limWhy != "roundUp16Mi(144Mi × 1.5) = 224Mi" {
		t.Errorf("rationale: %q / %q", why, limWhy)
	}
}

func TestSignificant(t *testing.T) {
	cases := []struct {
		cur, next spec.Bytes
		want      bool
	}{
		{256 * spec.MiB, 224 * spec.MiB, false}, // 32Mi, 12.5%
		{256 * spec.MiB, 192 * spec.MiB, true},  // 64Mi
		{100 * spec.MiB, 120 * spec.MiB, true},  // 20%
		{100 * spec.MiB, 116 * spec.MiB, false}, // 16%
		{4 * spec.GiB, 4*spec.GiB + 63*spec.MiB, false},
		{4 * spec.GiB, 4*spec.GiB + 64*spec.MiB, true},
	}
	for _, c := range cases {
		if got := Significant(int64(c.cur), int64(c.next)); got != c.want {
			t.Errorf("Significant(%s, %s) = %v", c.cur, c.next, got)
		}
	}
}

func nfrSpec(kind string) *spec.NFR {
	n := &spec.NFR{}
	n.Kind, n.Metadata.Name, n.Metadata.Namespace = "NFR", "checkout", "shop"
	n.Spec.Target = spec.Target{Kind: kind, Name: "checkout"}
	n.Spec.Throughput = &spec.Throughput{MinRPS: 400}
	// The targets and paths are what these tests check: the reference
	// formula's hand-computed 6 (TestSLORecommendation checks slo's).
	n.Spec.Policy = spec.PolicyReference
	n.Spec.CPUPerPod = 500
	n.Spec.Latency = &spec.Latency{P99: spec.Duration(250 * time.Millisecond)}
	n.Spec.Memory = mem(1.2, 1.5, 64*spec.MiB, 4*spec.GiB)
	n.Spec.Enforcement = spec.NFREnforcement{Replicas: spec.ModeEnforce, Memory: spec.ModeObserve}
	return n
}

func object(kind string, exists bool, attrs map[addrs.Path]string) providers.Object {
	typed := map[addrs.Path]values.Value{}
	for p, v := range attrs {
		t := values.Count
		if Dimension(p) == Memory {
			t = values.Bytes
		}
		x, err := values.Parse(t, v)
		if err != nil {
			panic(err)
		}
		typed[p] = x
	}
	return providers.Object{Address: providers.Address{Provider: "sim", Kind: kind, Namespace: "shop", Name: "checkout"}, Exists: exists, Attributes: typed}
}

var sig = Signals{RPS: f(310), CPUMilli: f(1850), P99: f(0.28), WorkingSet: map[string]float64{"function": 110 * float64(spec.MiB)}}

func podTemplate() map[addrs.Path]string {
	return map[addrs.Path]string{AttrReplicas: "2", ContainerAttr("function", "requests"): "256Mi", ContainerAttr("function", "limits"): "512Mi"}
}

func find(out Output, attr addrs.Path) *intent.Intent {
	for i := range out.Intents {
		if out.Intents[i].Attr.Path == attr && out.Intents[i].Kind != intent.UpperBound {
			return &out.Intents[i]
		}
	}
	return nil
}

func TestDecideTargets(t *testing.T) {
	// With an HPA: a lower bound on minReplicas, capped by its maxReplicas.
	out := Decide(Input{Spec: nfrSpec("Deployment"), Target: object("Deployment", true, podTemplate()),
		HPA: object("HorizontalPodAutoscaler", true, map[addrs.Path]string{AttrMinReplicas: "2", AttrMaxReplicas: "50"}), Signals: sig})
	it := find(out, AttrMinReplicas)
	if it == nil || it.Kind != intent.LowerBound || it.Value != values.CountOf(6) || it.Attr.Object.Kind != "HorizontalPodAutoscaler" {
		t.Fatalf("HPA path: %+v", out)
	}
	if len(out.Intents) != 4 || out.Intents[0].Kind != intent.UpperBound || out.Intents[0].Value != values.CountOf(50) {
		t.Fatalf("want the HPA max as an upper bound and two memory intents: %+v", out.Intents)
	}
	// Memory: 256Mi → 144Mi and 512Mi → 224Mi, both significant.
	if r := find(out, ContainerAttr("function", "requests")); r == nil || r.Value != values.BytesOf(144*MiB) || r.Group != "memory/function" || r.Kind != intent.Exact {
		t.Fatalf("request: %+v", r)
	}
	if r := find(out, ContainerAttr("function", "limits")); r == nil || r.Value != values.BytesOf(224*MiB) {
		t.Fatalf("limit: %+v", r)
	}
	// Without an HPA: spec.replicas of the Deployment.
	out = Decide(Input{Spec: nfrSpec("Deployment"), Target: object("Deployment", true, podTemplate()), HPA: object("HorizontalPodAutoscaler", false, nil), Signals: sig})
	if it := find(out, AttrReplicas); it == nil || it.Value != values.CountOf(6) || it.Create != nil {
		t.Fatalf("Deployment path: %+v", out.Intents)
	}
	// Asked to create one: an HPA with min = the bound and the spec's max.
	s := nfrSpec("Deployment")
	s.Spec.Autoscaler = &spec.Autoscaler{Create: true, MaxReplicas: 20}
	out = Decide(Input{Spec: s, Target: object("Deployment", true, podTemplate()), HPA: object("HorizontalPodAutoscaler", false, nil), Signals: sig})
	if it := find(out, AttrMinReplicas); it == nil || it.Create == nil || it.Create.Attributes[AttrMaxReplicas] != values.CountOf(20) || it.Create.Attributes[AttrMinReplicas] != values.CountOf(6) {
		t.Fatalf("create path: %+v", out.Intents)
	}
	// Knative: the min-scale annotation.
	out = Decide(Input{Spec: nfrSpec("KnativeService"), Target: object("KnativeService", true, podTemplate()), Signals: sig})
	if it := find(out, AttrMinScale); it == nil || it.Value != values.CountOf(6) || it.Attr.Object.Kind != "KnativeService" {
		t.Fatalf("Knative path: %+v", out.Intents)
	}
}

func TestDecideUserValueAndPins(t *testing.T) {
	// The user had 8: the bound is max(8, 6).
	out := Decide(Input{Spec: nfrSpec("Deployment"), Target: object("Deployment", true, podTemplate()), Signals: sig, UserValue: map[addrs.Path]values.Value{AttrReplicas: values.CountOf(8)}})
	if it := find(out, AttrReplicas); it == nil || it.Value != values.CountOf(8) || it.Recommended != values.CountOf(6) || !strings.Contains(it.Rationale, "the user's value 8") {
		t.Fatalf("user value: %+v", it)
	}
	// A pinned request is not recommended; the limit follows the pin.
	s := nfrSpec("Deployment")
	pin := 300 * spec.MiB
	s.Spec.Memory.Request = &pin
	tpl := podTemplate()
	tpl[ContainerAttr("function", "limits")] = "1Gi"
	out = Decide(Input{Spec: s, Target: object("Deployment", true, tpl), Signals: sig})
	if find(out, ContainerAttr("function", "requests")) != nil {
		t.Fatal("a pinned request must not be recommended")
	}
	if it := find(out, ContainerAttr("function", "limits")); it == nil || it.Value != values.BytesOf(464*MiB) {
		t.Fatalf("limit from the pin: 300Mi × 1.5 = 450Mi → 464Mi; got %+v", it)
	}
	// Both pinned: nothing, and a note says so.
	lim := 600 * spec.MiB
	s.Spec.Memory.Limit = &lim
	out = Decide(Input{Spec: s, Target: object("Deployment", true, podTemplate()), Signals: sig})
	if find(out, ContainerAttr("function", "limits")) != nil || len(out.Notes) != 1 || !strings.Contains(out.Notes[0].Text, "pinned") {
		t.Fatalf("pinned: %+v", out)
	}
}

func TestDecideHoldsWithoutData(t *testing.T) {
	s := nfrSpec("Deployment")
	out := Decide(Input{Spec: s, Target: object("Deployment", true, podTemplate()),
		Signals: Signals{RPS: f(300), Missing: map[string]string{"cpu": "no series matched", "workingSet/function": "2 samples were NaN or Inf"}}})
	if len(out.Intents) != 0 || len(out.Notes) != 2 {
		t.Fatalf("missing data must hold every decision: %+v", out)
	}
	if !strings.Contains(out.Notes[1].Text, "NaN or Inf") {
		t.Fatalf("notes: %+v", out.Notes)
	}
	// Off means no intents at all.
	s.Spec.Enforcement = spec.NFREnforcement{Replicas: spec.ModeOff, Memory: spec.ModeOff}
	if out := Decide(Input{Spec: s, Target: object("Deployment", true, podTemplate()), Signals: sig}); len(out.Intents)+len(out.Notes) != 0 {
		t.Fatalf("off: %+v", out)
	}
	// Memory within the threshold: a note, no intent.
	small := sig
	small.WorkingSet = map[string]float64{"function": 200 * float64(spec.MiB)} // → 240 → 256Mi = current
	s.Spec.Enforcement.Memory = spec.ModeObserve
	out = Decide(Input{Spec: s, Target: object("Deployment", true, podTemplate()), Signals: small})
	if find(out, ContainerAttr("function", "requests")) != nil || !strings.Contains(out.Notes[0].Text, "within 20%/64Mi") {
		t.Fatalf("threshold: %+v", out)
	}
}

// TestSLORecommendation: hand-computed sizings. The fit says 4m a request
// and 120m idle (mean 1320m / 300 req/s = 4.4m); a pod serves 500m ÷ 4m =
// 125 req/s at 100%; with a 40 ms service time it serves c = 5 at once;
// the highest utilisation of an M/M/5 with S = 40 ms whose p99 is within
// 250 ms is 0.8097 (slo_test.go); the peak 350 req/s is the largest rate,
// so 350 / (0.8097 × 125) = 3.458 → 4, and a p99 of 500 ms (twice the
// target) multiplies by 1 + 0.5 ln 2 = 1.347: 4.657 → 5.
func TestSLORecommendation(t *testing.T) {
	st := spec.Duration(40 * time.Millisecond)
	base := func() spec.NFRSpec {
		n := nfrSpec("Deployment").Spec
		n.Policy = spec.PolicySLO
		n.Throughput.Floor = 0.5
		n.Latency.ServiceTime = &st
		return n
	}
	fit := &Fit{Slope: 4, Intercept: 120, R2: 0.98, N: 30}
	sig := func(rps, cpu, peak, p99 float64) Signals {
		return Signals{RPS: f(rps), CPUMilli: f(cpu), Peak: f(peak), P99: f(p99), Fit: fit, FitOK: true}
	}
	cases := []struct {
		name string
		spec func() spec.NFRSpec
		sig  Signals
		want int64
		why  []string
	}{
		{"peak, within target", base, sig(300, 1320, 350, 0.2), 4,
			[]string{"ceil(peak 350 req/s ÷ (ρ 0.81 × 125 req/s a pod)) = 4", "500m ÷ marginal 4m/req (fit over 30 points, R² 0.98, idle 120m removed)", "ρ: p99 ≤ 250ms in M/M/5 with service time 40ms (given)", "p99 200ms ≤ 250ms"}},
		{"feedback", base, sig(300, 1320, 350, 0.5), 5, []string{"p99 500ms > 250ms: ×1.35 = 5"}},
		// Quiet traffic: the floor, 50% × 400 = 200 req/s: 200/(0.8097 ×
		// 125) = 1.98 → 2.
		{"floor", base, sig(100, 520, 120, 0.1), 2, []string{"floor 50% × 400 = 200 req/s", "= 2"}},
		// No service time given nor measured: utilisation 0.7, 350/(0.7 ×
		// 125) = 4.
		{"no service time", func() spec.NFRSpec { n := base(); n.Latency.ServiceTime = nil; return n }, sig(300, 1320, 350, 0.2), 4, []string{"service time missing: ρ 0.70"}},
		// Measured: 40 ms estimated is the same sizing.
		{"estimated service time", func() spec.NFRSpec { n := base(); n.Latency.ServiceTime = nil; return n },
			func() Signals { s := sig(300, 1320, 350, 0.2); s.ServiceTime = f(0.04); return s }(), 4, []string{"service time 40ms (lowest mean latency over 30m)"}},
		// A 150 ms target is below the service's own p99 (40 ms × ln 100 =
		// 184 ms): said, and sized at 0.7 (350/87.5 = 4), the measured
		// 200 ms over it adding 1 + 0.5 ln(4/3) = 1.14: 4.58 → 5.
		{"infeasible", func() spec.NFRSpec { n := base(); n.Latency.P99 = spec.Duration(150 * time.Millisecond); return n }, sig(300, 1320, 350, 0.2), 5, []string{"cannot be met at any load", "ρ 0.70", "×1.14 = 5"}},
		// Without a fit, the mean cost 4.4m: a pod 113.6 req/s, 350 /
		// (0.8097 × 113.6) = 3.8 → 4 — and the reason the fit is not used.
		{"no fit", base, Signals{RPS: f(300), CPUMilli: f(1320), Peak: f(350), P99: f(0.2)}, 4, []string{"mean cost 4.4m/req"}},
		// The model's count, ceil(350 / (0.81 × 125)) = ceil(3.46) = 4,
		// served the whole window (4 ready at the fewest): the 500 ms p99
		// judges it, 1 + 0.5 ln 2 = 1.35, 3.46 × 1.35 = 4.66 → 5.
		{"feedback, the model's count served", base, func() Signals { s := sig(300, 1320, 350, 0.5); s.ReadyMin = f(4); return s }(), 5, []string{"×1.35 = 5"}},
		// Only 3 ready at some point of the window: the miss is too few
		// pods, not the model; it stays at 4.
		{"feedback unjudged", base, func() Signals { s := sig(300, 1320, 350, 0.5); s.ReadyMin = f(3); return s }(), 4,
			[]string{"p99 500ms > 250ms with 3 pods ready in its last two minutes, fewer than the model's 4: no feedback"}},
		// More ready than the model asks: judged, as with exactly 4.
		{"feedback, more pods served", base, func() Signals { s := sig(300, 1320, 350, 0.5); s.ReadyMin = f(6); return s }(), 5, []string{"×1.35 = 5"}},
		// Under target, too few ready: nothing to judge, nothing said.
		{"within target, few ready", base, func() Signals { s := sig(300, 1320, 350, 0.2); s.ReadyMin = f(2); return s }(), 4, []string{"p99 200ms ≤ 250ms"}},
	}
	// What a case must not say: the unjudged and the within-target
	// counts carry no feedback factor.
	not := map[string][]string{
		"feedback unjudged":          {": ×"},
		"within target, few ready":   {": ×", "no feedback"},
		"feedback, more pods served": {"no feedback"},
	}
	for _, c := range cases {
		got, why, ok := SLORecommendation(c.spec(), c.sig)
		if !ok || got != c.want {
			t.Errorf("%s: %d (%v) %q, want %d", c.name, got, ok, why, c.want)
			continue
		}
		for _, w := range c.why {
			if !strings.Contains(why, w) {
				t.Errorf("%s: %q lacks %q", c.name, why, w)
			}
		}
		for _, w := range not[c.name] {
			if strings.Contains(why, w) {
				t.Errorf("%s: %q says %q", c.name, why, w)
			}
		}
	}
	if _, why, ok := SLORecommendation(base(), Signals{RPS: f(0), CPUMilli: f(5)}); ok || !strings.Contains(why, "~0") {
		t.Errorf("no traffic: %v %q", ok, why)
	}
}

// A container whose request equals its limit (Guaranteed, for memory)
// keeps them equal, at the request: 110Mi × 1.2 → 144Mi for both.
func TestGuaranteedKeepsRequestEqualLimit(t *testing.T) {
	tmpl := podTemplate()
	tmpl[ContainerAttr("function", "limits")] = "256Mi"
	out := Decide(Input{Spec: nfrSpec("Deployment"), Target: object("Deployment", true, tmpl), Signals: sig})
	r, l := find(out, ContainerAttr("function", "requests")), find(out, ContainerAttr("function", "limits"))
	if r == nil || l == nil || r.Value != values.BytesOf(144*MiB) || l.Value != values.BytesOf(144*MiB) || !strings.Contains(l.Rationale, "Guaranteed") {
		t.Fatalf("request %+v, limit %+v", r, l)
	}
	// Unequal now: the limit factor applies (224Mi).
	out = Decide(Input{Spec: nfrSpec("Deployment"), Target: object("Deployment", true, podTemplate()), Signals: sig})
	if l := find(out, ContainerAttr("function", "limits")); l == nil || l.Value != values.BytesOf(224*MiB) {
		t.Fatalf("burstable limit: %+v", l)
	}
}

// memory.apply: node: the limit only, to the node agent's object, never
// the pod template, and never under the template's request.
func TestNodeAppliedMemory(t *testing.T) {
	n := nfrSpec("Deployment")
	n.Spec.Memory.Apply = spec.MemoryNode
	nodeAddr := addrs.Object{Provider: "nri", Kind: noderes.MemoryKind, Namespace: "shop", Name: "checkout"}
	node := providers.Object{Address: nodeAddr}
	tmpl := podTemplate()
	tmpl[ContainerAttr("function", "requests")] = "128Mi"
	out := Decide(Input{Spec: n, Target: object("Deployment", true, tmpl), Node: node, Signals: sig})
	if find(out, ContainerAttr("function", "requests")) != nil || find(out, ContainerAttr("function", "limits")) != nil {
		t.Fatal("memory.apply: node changed the pod template")
	}
	// 110Mi × 1.2 → 144Mi; × 1.5 → 224Mi, created on the node's object.
	it := find(out, noderes.MemoryAttr("function"))
	if it == nil || it.Attr.Object != nodeAddr || it.Value != values.BytesOf(224*MiB) || it.Create == nil {
		t.Fatalf("node limit: %+v", it)
	}
	// A request above the recommendation is the floor.
	tmpl[ContainerAttr("function", "requests")] = "300Mi"
	out = Decide(Input{Spec: n, Target: object("Deployment", true, tmpl), Node: node, Signals: sig})
	if it := find(out, noderes.MemoryAttr("function")); it == nil || it.Value != values.BytesOf(300*MiB) {
		t.Fatalf("node limit under a 300Mi request: %+v", it)
	}
	// Within 20% of what the node has: no change.
	node.Exists = true
	node.Attributes = map[addrs.Path]values.Value{noderes.MemoryAttr("function"): values.BytesOf(232 * MiB)}
	tmpl[ContainerAttr("function", "requests")] = "128Mi"
	out = Decide(Input{Spec: n, Target: object("Deployment", true, tmpl), Node: node, Signals: sig})
	if it := find(out, noderes.MemoryAttr("function")); it != nil {
		t.Fatalf("a 224Mi recommendation against 232Mi changed: %+v", it)
	}
	// No node agent: a note, nothing else.
	out = Decide(Input{Spec: n, Target: object("Deployment", true, tmpl), Signals: sig})
	if find(out, noderes.MemoryAttr("function")) != nil || len(out.Notes) == 0 {
		t.Fatalf("without a node agent: %+v", out.Intents)
	}
}

// A backlog: a pod booked a p99's worth ahead drains within a startup
// only if its share of the rate leaves it that much spare, so the count
// asked for is rate ÷ (pod's full rate × (1 − p99 ÷ startup)), the
// share at least half a pod. The model's count is ceil(700 ÷ (0.8097 ×
// 125)) = ceil(6.92) = 7 (the 10 s p99 unjudged: 2 pods ready).
func TestBacklogDrain(t *testing.T) {
	st := spec.Duration(40 * time.Millisecond)
	base := func(startup time.Duration) spec.NFRSpec {
		n := nfrSpec("Deployment").Spec
		n.Policy = spec.PolicySLO
		n.Throughput.Floor = 0.5
		n.Throughput.Startup = spec.Duration(startup)
		n.Latency.ServiceTime = &st
		return n
	}
	fit := &Fit{Slope: 4, Intercept: 120, R2: 0.98, N: 30}
	sig := func(p99, ready float64) Signals {
		return Signals{RPS: f(300), CPUMilli: f(1320), Peak: f(700), P99: f(p99), ReadyMin: f(ready), Fit: fit, FitOK: true}
	}
	cases := []struct {
		name      string
		startup   time.Duration
		sig       Signals
		up, down  int64
		why, not_ string
	}{
		// W = 10.04 − 0.04 = 10 s; 1 − 10/30 = 2/3: 700 ÷ (125 × 2/3) =
		// 8.4 → 9.
		{"10s behind, 30s startup", 30 * time.Second, sig(10.04, 2), 9, 7, "backlog: p99 10.04s, 10s of it queueing: ceil(700 req/s ÷ (125 req/s a pod × (1 − 10s ÷ startup 30s))) = 9", ""},
		// 1 − 8/20 = 0.6: 700 ÷ 75 = 9.3 → 10.
		{"8s behind, 20s startup", 20 * time.Second, sig(8.04, 2), 10, 7, "(1 − 8s ÷ startup 20s))) = 10", ""},
		// 1 − 20/30 = 1/3, raised to the half: 700 ÷ 62.5 = 11.2 → 12
		// (17 unbounded).
		{"20s behind: at most twice", 30 * time.Second, sig(20.04, 2), 12, 7, "(1 − 20s ÷ startup 30s), at most twice the full-CPU count)) = 12", ""},
		// Within target, on a 0.5 s startup: 1 − 0.16/0.5 would ask for
		// ceil(700 ÷ 85) = 9 were the p99 not within its target.
		{"within target, short startup", 500 * time.Millisecond, sig(0.2, 7), 7, 7, "p99 200ms ≤ 250ms", "backlog"},
		// 1 − 0.5/30: 700 ÷ 122.9 = 5.7 → 6, under the model's 7: no
		// backlog to speak of.
		{"a p99 over target is not a backlog", 30 * time.Second, sig(0.5, 2), 7, 7, "no feedback", "backlog"},
		// Within target: nothing.
		{"within target", 30 * time.Second, sig(0.2, 7), 7, 7, "p99 200ms ≤ 250ms", "backlog"},
	}
	for _, c := range cases {
		r, ok := SLODecision(base(c.startup), c.sig, false)
		if !ok || r.Replicas != c.up || r.Down != c.down {
			t.Errorf("%s: %d, down %d (%v) %q; want %d, down %d", c.name, r.Replicas, r.Down, ok, r.Why, c.up, c.down)
			continue
		}
		if !strings.Contains(r.Why, c.why) {
			t.Errorf("%s: %q lacks %q", c.name, r.Why, c.why)
		}
		if c.not_ != "" && strings.Contains(r.Why, c.not_) {
			t.Errorf("%s: %q says %q", c.name, r.Why, c.not_)
		}
	}
}
