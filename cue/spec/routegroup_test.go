package spec_test

import (
	"math"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/cue/load"
	"github.com/setpoint-dev/setpoint/cue/spec"
)

// validRouteGroup is the spec-examples RouteGroup as the schema decodes it:
// every Check rule holds, so each case below breaks one.
func validRouteGroup() *spec.RouteGroup {
	r := &spec.RouteGroup{}
	r.Kind, r.Metadata.Name, r.Metadata.Namespace = "RouteGroup", "checkout-vip", "default"
	s := &r.Spec
	s.VIP = "127.100.0.1:8080/tcp"
	s.Backends = spec.RouteGroupBackends{Selector: map[string]string{"app": "checkout"}, Port: 9000}
	s.Metrics = spec.RouteGroupMetrics{Path: "/metrics", Queue: "backend_queue_depth", Latency: "backend_latency_p95_seconds", ErrorRate: "backend_error_ratio"}
	s.Table = spec.RouteGroupTable{Slots: 65537, Builder: spec.BuilderMaglev}
	s.Tick = spec.RouteGroupTick{Every: spec.Duration(200 * time.Millisecond), Jitter: 0.05}
	s.Filter.Alpha = 0.3
	s.Pressure = spec.RouteGroupPressure{
		Weights:      spec.RouteGroupWeights{Queue: 1, Latency: 1, Errors: 2},
		Refs:         spec.RouteGroupRefs{Queue: 10, Latency: spec.Duration(100 * time.Millisecond), ErrorRate: 0.01},
		ErrorClip:    10,
		ErrorPenalty: spec.RouteGroupErrorPenalty{Above: 0.05, Add: 5},
	}
	s.Saturation.Horizon = spec.Duration(2 * time.Second)
	s.Viscosity.MaxSlotsPerTick = 2000
	s.SkewGuard = spec.RouteGroupSkewGuard{Epsilon: 0.02, Shrink: 0.5, MinConnects: 100}
	s.Regimes = spec.RouteGroupRegimes{TransitionAbove: 1, CrisisAbove: 2, RecoveryTicks: 10}
	s.Admission = spec.RouteGroupAdmission{SoftShed: 0.2, HardBudget: "100/s"}
	s.Failsafe.After = spec.Duration(time.Second)
	s.Enforcement.Table = spec.ModeEnforce
	return r
}

func endpoints(s *spec.RouteGroupSpec, eps ...string) {
	s.Backends = spec.RouteGroupBackends{Endpoints: eps}
}

// TestRouteGroupCheck: each rule of Check, on a spec that breaks only it
// (want is the one error, "" none: the values at a rule's edge that pass).
func TestRouteGroupCheck(t *testing.T) {
	ms := func(d time.Duration) spec.Duration { return spec.Duration(d * time.Millisecond) }
	cases := []struct {
		name      string
		change    func(s *spec.RouteGroupSpec)
		path, msg string
		related   string
	}{
		{"valid", func(*spec.RouteGroupSpec) {}, "", "", ""},
		// The VIP.
		{"vip udp", func(s *spec.RouteGroupSpec) { s.VIP = "127.100.0.1:53/udp" }, "", "", ""},
		{"vip address", func(s *spec.RouteGroupSpec) { s.VIP = "127.100.0.256:8080/tcp" },
			"spec.vip", `invalid VIP "127.100.0.256:8080/tcp": 127.100.0.256 is not an IPv4 address`, ""},
		{"vip IPv6", func(s *spec.RouteGroupSpec) { s.VIP = "::1:8080/tcp" },
			"spec.vip", `invalid VIP "::1:8080/tcp": ::1 is not an IPv4 address`, ""},
		{"vip port 0", func(s *spec.RouteGroupSpec) { s.VIP = "127.100.0.1:0/tcp" },
			"spec.vip", `invalid VIP "127.100.0.1:0/tcp": port 0 is out of range`, ""},
		{"vip port 65536", func(s *spec.RouteGroupSpec) { s.VIP = "127.100.0.1:65536/tcp" },
			"spec.vip", `invalid VIP "127.100.0.1:65536/tcp": port 65536 is out of range`, ""},
		{"vip without protocol", func(s *spec.RouteGroupSpec) { s.VIP = "127.100.0.1:8080" },
			"spec.vip", `invalid VIP "127.100.0.1:8080": it does not end in /tcp or /udp`, ""},
		{"vip sctp", func(s *spec.RouteGroupSpec) { s.VIP = "127.100.0.1:8080/sctp" },
			"spec.vip", `invalid VIP "127.100.0.1:8080/sctp": it does not end in /tcp or /udp`, ""},
		// The backends.
		{"endpoints", func(s *spec.RouteGroupSpec) { endpoints(s, "127.0.0.1:9001", "127.0.0.1:9002", "127.0.0.2:9001") }, "", "", ""},
		{"no backends", func(s *spec.RouteGroupSpec) { s.Backends = spec.RouteGroupBackends{} },
			"spec.backends", "no backends", ""},
		{"selector and endpoints", func(s *spec.RouteGroupSpec) { s.Backends.Endpoints = []string{"127.0.0.1:9001"} },
			"spec.backends.endpoints", "endpoints beside a selector", ""},
		{"selector without a port", func(s *spec.RouteGroupSpec) { s.Backends.Port = 0 },
			"spec.backends.port", "a selector without a port", ""},
		{"endpoints with a port", func(s *spec.RouteGroupSpec) { endpoints(s, "127.0.0.1:9001"); s.Backends.Port = 9000 },
			"spec.backends.port", "a port beside endpoints", ""},
		{"endpoints with a namespace", func(s *spec.RouteGroupSpec) { endpoints(s, "127.0.0.1:9001"); s.Backends.Namespace = "shop" },
			"spec.backends.namespace", "a namespace beside endpoints", ""},
		{"endpoint port", func(s *spec.RouteGroupSpec) { endpoints(s, "127.0.0.1:9001", "127.0.0.1:70000") },
			"spec.backends.endpoints.1", `invalid endpoint "127.0.0.1:70000": port 70000 is out of range`, ""},
		{"endpoint address", func(s *spec.RouteGroupSpec) { endpoints(s, "127.0.0.01:9001") },
			"spec.backends.endpoints.0", `invalid endpoint "127.0.0.01:9001": 127.0.0.01 is not an IPv4 address`, ""},
		{"endpoint without a port", func(s *spec.RouteGroupSpec) { endpoints(s, "127.0.0.1") },
			"spec.backends.endpoints.0", `invalid endpoint "127.0.0.1": no port`, ""},
		{"endpoint without an address", func(s *spec.RouteGroupSpec) { endpoints(s, ":9001") },
			"spec.backends.endpoints.0", `invalid endpoint ":9001": no address`, ""},
		{"endpoint twice", func(s *spec.RouteGroupSpec) { endpoints(s, "127.0.0.1:9001", "127.0.0.2:9001", "127.0.0.1:9001") },
			"spec.backends.endpoints.2", "a second endpoint 127.0.0.1:9001", "spec.backends.endpoints.0"},
		{"endpoint twice once normalised", func(s *spec.RouteGroupSpec) { endpoints(s, "127.0.0.1:9001", "127.0.0.1:09001") },
			"spec.backends.endpoints.1", "127.0.0.1:09001 is a second endpoint 127.0.0.1:9001", "spec.backends.endpoints.0"},
		// The table.
		{"3 slots", func(s *spec.RouteGroupSpec) { s.Table.Slots = 3 }, "", "", ""},
		{"131071 slots", func(s *spec.RouteGroupSpec) { s.Table.Slots = 131071 }, "", "", ""},
		{"65536 slots", func(s *spec.RouteGroupSpec) { s.Table.Slots = 65536 },
			"spec.table.slots", "65536 is not prime: 65521 or 65537", ""},
		{"4 slots", func(s *spec.RouteGroupSpec) { s.Table.Slots = 4 },
			"spec.table.slots", "4 is not prime: 3 or 5", ""},
		{"131070 slots", func(s *spec.RouteGroupSpec) { s.Table.Slots = 131070 },
			"spec.table.slots", "131070 is not prime: 131063 or 131071", ""},
		{"2 slots", func(s *spec.RouteGroupSpec) { s.Table.Slots = 2 },
			"spec.table.slots", "2 slots is out of range", ""},
		{"131101 slots", func(s *spec.RouteGroupSpec) { s.Table.Slots = 131101 },
			"spec.table.slots", "131101 slots is out of range", ""},
		// The tick.
		// The failsafe's least: a tick ± 5%, a scrape (0.8 of a tick, at most
		// 2s) and one tick more. 10ms: 10.5 + 8 + 10 = 28.5ms.
		{"tick 10ms", func(s *spec.RouteGroupSpec) { s.Tick.Every = ms(10); s.Failsafe.After = ms(29) }, "", "", ""},
		// 10s: 10.5 + 2 + 10 = 22.5s.
		{"tick 10s", func(s *spec.RouteGroupSpec) { s.Tick.Every = ms(10000); s.Failsafe.After = ms(22500) }, "", "", ""},
		{"tick 10s failsafe short", func(s *spec.RouteGroupSpec) { s.Tick.Every = ms(10000); s.Failsafe.After = ms(22499) },
			"spec.failsafe.after", "failsafe after 22.499s could trip while the loop is healthy: a tick of 10s ± 5%, a scrape and one tick more take 22.5s", ""},
		{"tick 9ms", func(s *spec.RouteGroupSpec) { s.Tick.Every = ms(9) },
			"spec.tick.every", "tick 9ms is out of range", ""},
		{"tick 11s", func(s *spec.RouteGroupSpec) { s.Tick.Every = ms(11000); s.Failsafe.After = ms(30000) },
			"spec.tick.every", "tick 11s is out of range", ""},
		{"jitter 50%", func(s *spec.RouteGroupSpec) { s.Tick.Jitter = 0.5 }, "", "", ""},
		{"jitter 51%", func(s *spec.RouteGroupSpec) { s.Tick.Jitter = 0.51 },
			"spec.tick.jitter", "jitter 51% is out of range", ""},
		// Pressure.
		{"one weight", func(s *spec.RouteGroupSpec) { s.Pressure.Weights = spec.RouteGroupWeights{Errors: 0.1} }, "", "", ""},
		{"no weight", func(s *spec.RouteGroupSpec) { s.Pressure.Weights = spec.RouteGroupWeights{} },
			"spec.pressure.weights", "every pressure weight is 0", ""},
		{"latency reference 0", func(s *spec.RouteGroupSpec) { s.Pressure.Refs.Latency = 0 },
			"spec.pressure.refs.latency", "latency reference 0s is out of range", ""},
		{"error rate reference 0", func(s *spec.RouteGroupSpec) { s.Pressure.Refs.ErrorRate = 0 },
			"spec.pressure.refs.errorRate", "error rate reference 0% is out of range", ""},
		// Regimes.
		{"crisis just above transition", func(s *spec.RouteGroupSpec) { s.Regimes.CrisisAbove = 1.01 }, "", "", ""},
		{"crisis at transition", func(s *spec.RouteGroupSpec) { s.Regimes.CrisisAbove = 1 },
			"spec.regimes.crisisAbove", "crisisAbove 1 is not above transitionAbove 1", ""},
		{"crisis below transition", func(s *spec.RouteGroupSpec) { s.Regimes.TransitionAbove = 2.5 },
			"spec.regimes.crisisAbove", "crisisAbove 2 is not above transitionAbove 2.5", ""},
		// Failsafe.
		// 200ms: 210 + 160 + 200 = 570ms.
		{"failsafe at its least", func(s *spec.RouteGroupSpec) { s.Failsafe.After = ms(570) }, "", "", ""},
		{"failsafe under its least", func(s *spec.RouteGroupSpec) { s.Failsafe.After = ms(569) },
			"spec.failsafe.after", "failsafe after 569ms could trip while the loop is healthy: a tick of 200ms ± 5%, a scrape and one tick more take 570ms", ""},
		// 50% jitter: 300 + 160 + 200 = 660ms.
		{"failsafe under its least with jitter", func(s *spec.RouteGroupSpec) { s.Tick.Jitter = 0.5; s.Failsafe.After = ms(659) },
			"spec.failsafe.after", "failsafe after 659ms could trip while the loop is healthy: a tick of 200ms ± 50%, a scrape and one tick more take 660ms", ""},
		// Admission.
		{"budget per minute", func(s *spec.RouteGroupSpec) { s.Admission.HardBudget = "0.5/m" }, "", "", ""},
		{"budget 0", func(s *spec.RouteGroupSpec) { s.Admission.HardBudget = "0/s" },
			"spec.admission.hardBudget", `hard budget "0/s" admits nothing`, ""},
		{"budget 0.0 per minute", func(s *spec.RouteGroupSpec) { s.Admission.HardBudget = "0.0/m" },
			"spec.admission.hardBudget", `hard budget "0.0/m" admits nothing`, ""},
		{"budget at its bound", func(s *spec.RouteGroupSpec) { s.Admission.HardBudget = "10000000/s" }, "", "", ""},
		{"budget over its bound", func(s *spec.RouteGroupSpec) { s.Admission.HardBudget = "600000060/m" },
			"spec.admission.hardBudget", "hard budget 600000060/m is 1.0000001e+07 connects per second", ""},
		{"budget per hour", func(s *spec.RouteGroupSpec) { s.Admission.HardBudget = "100/h" },
			"spec.admission.hardBudget", `invalid hard budget "100/h"`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := validRouteGroup()
			c.change(&r.Spec)
			errs := r.Check()
			if c.path == "" {
				if len(errs) > 0 {
					t.Fatalf("want no errors, got %+v", errs)
				}
				return
			}
			if len(errs) != 1 {
				t.Fatalf("want one error at %s, got %+v", c.path, errs)
			}
			e := errs[0]
			if e.Path != c.path || e.Message != c.msg || e.Related != c.related || e.Expected == "" {
				t.Errorf("got %+v\nwant path %s, message %q, related %q and an expectation", e, c.path, c.msg, c.related)
			}
		})
	}
}

func TestBudgetPerSecond(t *testing.T) {
	for in, want := range map[string]float64{"100/s": 100, "6000/m": 100, "0.5/s": 0.5, "90/m": 1.5, "007/s": 7} {
		s := spec.RouteGroupSpec{Admission: spec.RouteGroupAdmission{HardBudget: in}}
		if got, err := s.BudgetPerSecond(); err != nil || got != want {
			t.Errorf("BudgetPerSecond(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	huge := "1" + strings.Repeat("0", 400) + "/s"
	for in, want := range map[string]string{
		"0/s":    `hard budget "0/s" admits nothing`,
		"":       `invalid hard budget ""`,
		"100":    `invalid hard budget "100"`,
		"/s":     `invalid hard budget "/s"`,
		"100/h":  `invalid hard budget "100/h"`,
		"1e3/s":  `invalid hard budget "1e3/s"`,
		"-1/s":   `invalid hard budget "-1/s"`,
		"+1/s":   `invalid hard budget "+1/s"`,
		"1_0/s":  `invalid hard budget "1_0/s"`,
		"Inf/s":  `invalid hard budget "Inf/s"`,
		"1..2/s": `invalid hard budget "1..2/s"`,
		huge:     `hard budget "` + huge + `" is too large`,
	} {
		s := spec.RouteGroupSpec{Admission: spec.RouteGroupAdmission{HardBudget: in}}
		got, err := s.BudgetPerSecond()
		if err == nil || err.Error() != want || got != 0 {
			t.Errorf("BudgetPerSecond(%q) = %v, %v; want the error %s", in, got, err, want)
		}
	}
}

func TestVIPAddr(t *testing.T) {
	for in, want := range map[string]struct {
		addr  string
		proto string
	}{
		"127.100.0.1:8080/tcp": {"127.100.0.1:8080", "tcp"},
		"10.0.0.1:53/udp":      {"10.0.0.1:53", "udp"},
		"127.0.0.1:08080/tcp":  {"127.0.0.1:8080", "tcp"},
	} {
		ap, proto, err := spec.RouteGroupSpec{VIP: in}.VIPAddr()
		if err != nil || ap != netip.MustParseAddrPort(want.addr) || proto != want.proto {
			t.Errorf("VIPAddr(%q) = %v, %q, %v; want %s, %s", in, ap, proto, err, want.addr, want.proto)
		}
	}
	for _, in := range []string{"", "/tcp", "127.0.0.1/tcp", "127.0.0.1:80/TCP", "[::1]:80/tcp", "::ffff:127.0.0.1:80/tcp", "127.0.0.1:80:81/tcp", "127.0.0.1:-1/tcp", "127.0.0.1:/tcp"} {
		if ap, proto, err := (spec.RouteGroupSpec{VIP: in}).VIPAddr(); err == nil {
			t.Errorf("VIPAddr(%q) = %v, %q; want an error", in, ap, proto)
		}
	}
}

// TestRouteGroupExamples loads the spec-examples RouteGroup (adapted: a
// selector needs a port) and one of fixed endpoints with everything else
// defaulted, checking what the schema fills in.
func TestRouteGroupExamples(t *testing.T) {
	l, err := load.New()
	if err != nil {
		t.Fatal(err)
	}
	var docs []*spec.RouteGroup
	if ds := l.LoadFile("../../testdata/valid/full-routegroup.yaml", func(d spec.Document) { docs = append(docs, d.(*spec.RouteGroup)) }); len(ds) > 0 {
		t.Fatal(ds)
	}
	if len(docs) != 2 {
		t.Fatalf("want 2 RouteGroups, got %d", len(docs))
	}
	full, short := docs[0].Spec, docs[1].Spec
	want := validRouteGroup().Spec
	want.Target.Provider = "ebpf"
	want.Backends.Namespace = "shop"
	want.Metrics.Port = 9090
	want.Saturation.QueueLimit = 200
	want.Admission.Burst = 50
	if spec.Digest(&spec.RouteGroup{Spec: full}) != spec.Digest(&spec.RouteGroup{Spec: want}) {
		t.Errorf("the full example decodes as\n%+v\nwant\n%+v", full, want)
	}
	// Defaults: the example's values, but for what the spec sets.
	want = validRouteGroup().Spec
	want.VIP = "127.100.0.2:53/udp"
	want.Backends = spec.RouteGroupBackends{Endpoints: []string{"127.0.0.1:9001", "127.0.0.1:9002", "127.0.0.2:9001"}}
	want.Table = spec.RouteGroupTable{Slots: 251, Builder: spec.BuilderReplicate}
	want.Admission.HardBudget = "6000/m"
	want.Enforcement.Table = spec.ModeObserve
	if spec.Digest(&spec.RouteGroup{Spec: short}) != spec.Digest(&spec.RouteGroup{Spec: want}) {
		t.Errorf("the minimal example decodes as\n%+v\nwant\n%+v", short, want)
	}
	if docs[1].Metadata.Namespace != "default" {
		t.Errorf("namespace %q", docs[1].Metadata.Namespace)
	}
	for i, s := range []spec.RouteGroupSpec{full, short} {
		if b, err := s.BudgetPerSecond(); err != nil || math.Abs(b-100) > 1e-9 {
			t.Errorf("example %d: budget %v, %v; want 100/s", i, b, err)
		}
	}
	if ap, proto, err := short.VIPAddr(); err != nil || ap.String() != "127.100.0.2:53" || proto != "udp" {
		t.Errorf("VIP %v %q %v", ap, proto, err)
	}
}
