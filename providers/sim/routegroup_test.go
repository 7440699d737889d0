package sim

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/decide/routegroup"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/route"
)

const (
	vip     = "127.100.0.1:8080"
	backA   = "127.0.0.1:9001"
	backB   = "127.0.0.1:9002" // the one that degrades
	backC   = "127.0.0.1:9003"
	slots   = 65537
	evenOf3 = slots / 3.0
)

// routeConf is a RouteGroup spec's config at the schema's defaults, over
// endpoints.
func routeConf(table string, endpoints ...string) route.Config {
	return route.Config{VIP: vip, Proto: "tcp", Endpoints: endpoints,
		Metrics: route.Metrics{Path: "/metrics", Queue: "backend_queue_depth", Latency: "backend_latency_p95_seconds", ErrorRate: "backend_error_ratio"},
		Builder: routegroup.BuildMaglev, Every: 200 * time.Millisecond, Jitter: 0.05, Failsafe: time.Second, Table: table,
		Params: routegroup.Params{Slots: slots, Alpha: 0.3, WQueue: 1, WLatency: 1, WErrors: 2, QueueRef: 10, LatencyRef: 0.1, ErrorRef: 0.01,
			ErrorClip: 10, PenaltyAbove: 0.05, PenaltyAdd: 5, Horizon: 2 * time.Second, MaxSlotsPerTick: 2000, SkewEpsilon: 0.02, SkewShrink: 0.5,
			MinConnects: 100, TransitionAbove: 1, CrisisAbove: 2, RecoveryTicks: 10, SoftShed: 0.2, HardBudget: 100}}
}

func configValue(t *testing.T, c route.Config) values.Value {
	t.Helper()
	raw, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	v, err := values.StructuredOf(raw)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

var groupAddr = providers.Address{Provider: "sim", Kind: KindRouteGroup, Namespace: "shop", Name: "checkout-vip"}

func configChange(t *testing.T, act action.Action, c route.Config) providers.ObjectChange {
	return providers.ObjectChange{Address: groupAddr, Action: act, Manager: "setpoint", Changed: []addrs.Path{route.AttrConfig},
		Attributes: map[addrs.Path]values.Value{route.AttrConfig: configValue(t, c)}}
}

// threeBackends is a group of three backends of 300 req/s each; B is
// five times slower, fails 3% of its requests and has half its capacity
// from 120 s to 300 s.
func threeBackends() spec.SimRouteGroup {
	errs := spec.Percent(0.03)
	b := func(addr string) spec.SimBackend {
		return spec.SimBackend{Address: addr, Capacity: 300, Latency: spec.Duration(20 * time.Millisecond)}
	}
	g := spec.SimRouteGroup{Namespace: "shop", Name: "checkout-vip", VIP: vip, Share: 1, Backends: []spec.SimBackend{b(backA), b(backB), b(backC)}}
	g.Backends[1].Degrade = []spec.SimDegrade{{From: spec.Duration(120 * time.Second), Until: spec.Duration(300 * time.Second), Latency: 5, Capacity: 0.5, ErrorRate: &errs}}
	return g
}

func groupProvider(t *testing.T, tr *Trace, state string, gs ...spec.SimRouteGroup) *Provider {
	t.Helper()
	p, err := NewProvider(spec.SimConfig{Seed: 1, RouteGroups: gs}, tr, state, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func at(p *Provider, sec int) time.Time { return p.World.Start().Add(time.Duration(sec) * time.Second) }

func applyAt(t *testing.T, p *Provider, sec int, c providers.ObjectChange) providers.ObjectResult {
	t.Helper()
	resp := p.Apply(context.Background(), providers.ApplyRequest{Now: at(p, sec), Changes: []providers.ObjectChange{c}})
	if len(resp.Results) != 1 {
		t.Fatalf("%d results", len(resp.Results))
	}
	return resp.Results[0]
}

func readGroup(t *testing.T, p *Provider, sec int) providers.Object {
	t.Helper()
	return p.Read(context.Background(), providers.ReadRequest{Now: at(p, sec), Addresses: []providers.Address{groupAddr}}).Objects[0]
}

func fieldOf(t *testing.T, o providers.Object) route.Field {
	t.Helper()
	var f route.Field
	v, ok := o.Attributes[route.AttrField]
	if !ok {
		t.Fatalf("%s: no field in %v", o.Address, o.Attributes)
	}
	if err := json.Unmarshal(v.JSON(), &f); err != nil {
		t.Fatal(err)
	}
	return f
}

func slotsOf(f route.Field, name string) int {
	for i, n := range f.Names {
		if n == name {
			return f.Slots[i]
		}
	}
	return -1
}

func routeReport(t *testing.T, p *Provider, sec int) RouteReport {
	t.Helper()
	a := groupAddr
	a.Kind = KindRouteReport
	o := p.Read(context.Background(), providers.ReadRequest{Now: at(p, sec), Addresses: []providers.Address{a}}).Objects[0]
	r, err := DecodeRouteReport(o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestDegradedBackendLosesItsShareAndGetsItBack: 300 req/s over three
// backends whose table is enforced from 10 s. When B degrades at 120 s,
// its slots fall below 60% of an even share within 10 ticks, and its
// share of the requests during the window below 10%; after the window
// (and its error ratio's minute) it is back to an even share. Each
// backend's slot count turns once each way at most, never within a
// minute of its last turn.
func TestDegradedBackendLosesItsShareAndGetsItBack(t *testing.T) {
	p := groupProvider(t, constTrace(300, 600), "", threeBackends())
	if o := readGroup(t, p, 10); o.Exists {
		t.Fatalf("configured before any apply: %+v", o)
	}
	if r := applyAt(t, p, 10, configChange(t, action.Create, routeConf(route.TableEnforce, backA, backB, backC))); r.Err != "" {
		t.Fatal(r.Err)
	}
	before := readGroup(t, p, 120)
	if !before.Exists || before.Attributes[route.AttrRegime].String() != string(routegroup.Laminar) {
		t.Fatalf("before the degrade: %+v", before)
	}
	if b := slotsOf(fieldOf(t, before), backB); math.Abs(float64(b)-evenOf3) > 0.02*slots {
		t.Errorf("B has %d slots before it degrades, want about %.0f", b, evenOf3)
	}
	tick0 := before.Attributes[route.AttrTick].Int()
	during := readGroup(t, p, 122)
	if n := during.Attributes[route.AttrTick].Int() - tick0; n > 11 {
		t.Fatalf("%d ticks in 2 s of 200 ms ± 5%%", n)
	}
	if b := slotsOf(fieldOf(t, during), backB); float64(b) >= 0.6*evenOf3 {
		t.Errorf("B has %d slots 10 ticks into its degrade, want under %.0f", b, 0.6*evenOf3)
	}
	if b := slotsOf(fieldOf(t, readGroup(t, p, 400)), backB); math.Abs(float64(b)-evenOf3) > 0.05*slots {
		t.Errorf("B has %d slots 100 s after its degrade, want about %.0f", b, evenOf3)
	}
	r := routeReport(t, p, 600)
	if len(r.Phases) != 3 || r.Phases[0].From != 10 || r.Phases[1].From != 120 || r.Phases[2].From != 300 || r.Phases[2].Until != 600 {
		t.Fatalf("phases %+v", r.Phases)
	}
	for i, b := range r.Backends {
		before, during, after := b.Share[0], b.Share[1], b.Share[2]
		if math.Abs(before-1.0/3) > 0.02 {
			t.Errorf("%s: share %.3f before, want 1/3", b.Address, before)
		}
		switch i {
		case 1:
			if during > 0.1 || after < 0.28 {
				t.Errorf("%s: share %.3f during, %.3f after: want under 0.1, then back near 1/3", b.Address, during, after)
			}
		default:
			if during < 0.45 {
				t.Errorf("%s: share %.3f during: want the degraded backend's share taken up", b.Address, during)
			}
		}
		if b.Reversals > 2 || b.Flaps != 0 {
			t.Errorf("%s: %d reversals, %d flaps: want the slot count to turn at most once each way, never within %s of the last turn", b.Address, b.Reversals, b.Flaps, flapWithin)
		}
	}
	if r.Ticks < 5*589 || r.Flips == 0 || r.SlotsMoved < slots/6 || r.Table != route.TableEnforce || r.ConfiguredAt != 10 {
		t.Errorf("field: %+v", r)
	}
	// Every request is routed, shed or refused.
	var routed int64
	for _, ph := range r.Phases {
		routed += ph.Requests
	}
	unconfigured := r.Arrived - routed - r.Shed - r.Refused
	if unconfigured < 2000 || unconfigured > 4000 {
		t.Errorf("%d requests before the config (10 s at 300 req/s), of %d arrived, %d routed after", unconfigured, r.Arrived, routed)
	}
}

// TestObserveLeavesTheSplitEven: with the table observed, requests split
// evenly over the backends whatever the field says; the field still runs
// and is reported, and no table is ever flipped.
func TestObserveLeavesTheSplitEven(t *testing.T) {
	p := groupProvider(t, constTrace(300, 400), "", threeBackends())
	if r := applyAt(t, p, 10, configChange(t, action.Create, routeConf(route.TableObserve, backA, backB, backC))); r.Err != "" {
		t.Fatal(r.Err)
	}
	o := readGroup(t, p, 200)
	if b := slotsOf(fieldOf(t, o), backB); float64(b) >= 0.6*evenOf3 {
		t.Errorf("the observed field gives B %d slots during its degrade, want under %.0f", b, 0.6*evenOf3)
	}
	if o.Attributes[route.AttrEpoch].Int() != 0 || o.Attributes[route.AttrSkew].String() != "unknown" {
		t.Errorf("observing flipped a table or counted connects: %v", o.Attributes)
	}
	r := routeReport(t, p, 400)
	for _, b := range r.Backends {
		for k, s := range b.Share {
			// 54,000 requests in the shortest phase: a binomial share's
			// standard deviation is 0.002.
			if math.Abs(s-1.0/3) > 0.015 {
				t.Errorf("%s: share %.3f %s, want 1/3", b.Address, s, r.Phases[k].Name)
			}
		}
	}
	if r.Flips != 0 || r.Ticks == 0 || r.Table != route.TableObserve {
		t.Errorf("field: %d flips, %d ticks, table %q", r.Flips, r.Ticks, r.Table)
	}
}

// TestRouteConfigRefused: a config for no group of the world, on another
// VIP, naming a backend the group does not have, or with attributes a
// RouteGroup has not, is refused by PlanChange and Apply alike, with what
// is wrong; nothing is configured.
func TestRouteConfigRefused(t *testing.T) {
	other := spec.SimRouteGroup{Namespace: "shop", Name: "search-vip", VIP: "127.100.0.2:53", Share: 1,
		Backends: []spec.SimBackend{{Address: "127.0.0.2:9001", Capacity: 100}}}
	onVIP := func(v string) route.Config { c := routeConf(route.TableEnforce, backA, backB); c.VIP = v; return c }
	elsewhere := configChange(t, action.Create, routeConf(route.TableEnforce, backA))
	elsewhere.Address.Name = "payments-vip"
	extra := configChange(t, action.Create, routeConf(route.TableEnforce, backA))
	extra.Attributes[route.AttrRegime] = values.StringOf("laminar")
	bad := configChange(t, action.Create, routeConf(route.TableEnforce, backA))
	bad.Attributes[route.AttrConfig] = values.StringOf("{}")
	tooSmall := routeConf(route.TableEnforce, backA)
	tooSmall.Params.Slots = 100
	for _, c := range []struct {
		name   string
		change providers.ObjectChange
		want   string
	}{
		{"a VIP not in the sim world", configChange(t, action.Create, onVIP("127.100.0.9:8080")),
			"VIP 127.100.0.9:8080 is not in the sim world: sim route group shop/checkout-vip is on 127.100.0.1:8080"},
		{"another group's VIP", configChange(t, action.Create, onVIP("127.100.0.2:53")),
			"VIP 127.100.0.2:53 is sim route group shop/search-vip's, not shop/checkout-vip's (on 127.100.0.1:8080)"},
		{"an unknown backend", configChange(t, action.Create, routeConf(route.TableEnforce, backA, "127.0.0.1:9999")),
			"backend 127.0.0.1:9999 is not one of sim route group shop/checkout-vip's backends (127.0.0.1:9001, 127.0.0.1:9002, 127.0.0.1:9003)"},
		{"no such group", elsewhere,
			"no sim route group shop/payments-vip: the sim world's route groups are shop/checkout-vip on 127.100.0.1:8080, shop/search-vip on 127.100.0.2:53"},
		{"a status attribute", extra, "status.regime: a RouteGroup takes only config (the rest is what its loop reports)"},
		{"a config that is no config", bad, "config: want the route group's structured config"},
		{"a config the loop cannot run", configChange(t, action.Create, tooSmall), "config: table of 100 slots: the size must be prime"},
		{"an update before any config", configChange(t, action.Update, routeConf(route.TableEnforce, backA)),
			"no such object: route group shop/checkout-vip has no config yet (create it)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := groupProvider(t, constTrace(10, 100), "", threeBackends(), other)
			pr := p.PlanChange(context.Background(), providers.PlanChangeRequest{Now: at(p, 5), Changes: []providers.ObjectChange{c.change}})
			if len(pr.Results) != 1 || pr.Results[0].Err != c.want {
				t.Errorf("PlanChange: %+v\nwant %q", pr.Results, c.want)
			}
			if r := applyAt(t, p, 5, c.change); r.Err != c.want || r.After != nil {
				t.Errorf("Apply: %q\nwant %q", r.Err, c.want)
			}
			if o := readGroup(t, p, 10); o.Exists || len(p.World.changes) != 0 {
				t.Errorf("configured after a refused change: %+v", o)
			}
		})
	}
}

// TestRouteGroupReplaysDeterministically: a group configured, observed,
// enforced again and released, with every change kept in the sim state
// file; a second provider replaying the file reports the same object and
// the same report, as does a third world given the same changes.
func TestRouteGroupReplaysDeterministically(t *testing.T) {
	state := filepath.Join(t.TempDir(), "sim-state.json")
	tr := constTrace(300, 600)
	p := groupProvider(t, tr, state, threeBackends())
	for _, c := range []struct {
		sec    int
		change providers.ObjectChange
	}{
		{10, configChange(t, action.Create, routeConf(route.TableEnforce, backA, backB, backC))},
		{150, configChange(t, action.Update, routeConf(route.TableObserve, backA, backB, backC))},
		{200, configChange(t, action.Update, routeConf(route.TableEnforce, backA, backB))},
	} {
		if r := applyAt(t, p, c.sec, c.change); r.Err != "" {
			t.Fatalf("at %d s: %s", c.sec, r.Err)
		}
	}
	live := readGroup(t, p, 450)
	if !live.Exists || slotsOf(fieldOf(t, live), backC) != -1 {
		t.Fatalf("after enforcing over A and B: %+v", live)
	}
	release := providers.ObjectChange{Address: groupAddr, Action: action.Update, Manager: "setpoint", Released: []addrs.Path{route.AttrConfig}}
	if r := applyAt(t, p, 450, release); r.Err != "" {
		t.Fatal(r.Err)
	}
	if o := readGroup(t, p, 500); o.Exists {
		t.Fatalf("released, still configured: %+v", o)
	}
	want := routeReport(t, p, 600)
	// After the window (300 s to the release at 450 s) the table names A
	// and B only: C gets nothing.
	if c := want.Backends[2].Share[2]; c != 0 {
		t.Errorf("C took %.3f of the requests while the table named only A and B", c)
	}
	replayed := groupProvider(t, tr, state, threeBackends())
	if got := routeReport(t, replayed, 600); !reflect.DeepEqual(got, want) {
		t.Errorf("the replayed world's report differs:\n%+v\nwant\n%+v", got, want)
	}
	changes, err := LoadChanges(state)
	if err != nil || len(changes) != 4 {
		t.Fatalf("%d changes kept: %v", len(changes), err)
	}
	w, err := NewWithTrace(spec.SimConfig{Seed: 1, RouteGroups: []spec.SimRouteGroup{threeBackends()}}, tr, Options{Changes: changes})
	if err != nil {
		t.Fatal(err)
	}
	third := &Provider{World: w}
	if got := routeReport(t, third, 600); !reflect.DeepEqual(got, want) {
		t.Errorf("a world given the same changes reports otherwise:\n%+v\nwant\n%+v", got, want)
	}
	// Read in the middle of the run, a replay at that second agrees too.
	mid := groupProvider(t, tr, state, threeBackends())
	again := groupProvider(t, tr, state, threeBackends())
	if a, b := readGroup(t, mid, 300), readGroup(t, again, 300); !reflect.DeepEqual(a, b) || !a.Exists {
		t.Errorf("replays differ at 300 s:\n%+v\n%+v", a, b)
	}
}

// TestAdmissionInCrisis: one backend of 50 req/s under 200 req/s has
// nowhere to send its traffic: its queue fills, the group goes to crisis,
// and hard admission refuses what the 100/s budget does not admit. Every
// request is routed, shed or refused.
func TestAdmissionInCrisis(t *testing.T) {
	g := spec.SimRouteGroup{Namespace: "shop", Name: "checkout-vip", VIP: vip, Share: 1,
		Backends: []spec.SimBackend{{Address: backA, Capacity: 50, Latency: spec.Duration(20 * time.Millisecond)}}}
	p := groupProvider(t, constTrace(200, 120), "", g)
	if r := applyAt(t, p, 0, configChange(t, action.Create, routeConf(route.TableEnforce, backA))); r.Err != "" {
		t.Fatal(r.Err)
	}
	if o := readGroup(t, p, 60); o.Attributes[route.AttrAdmission].String() != string(routegroup.Hard) || o.Attributes[route.AttrRegime].String() != string(routegroup.Crisis) {
		t.Fatalf("one overloaded backend: %v", o.Attributes)
	}
	r := routeReport(t, p, 120)
	var routed int64
	for _, ph := range r.Phases {
		routed += ph.Requests
	}
	if routed+r.Shed+r.Refused != r.Arrived {
		t.Errorf("%d arrived, %d routed + %d shed + %d refused", r.Arrived, routed, r.Shed, r.Refused)
	}
	// In crisis at most the budget gets through: 100 of 200 req/s.
	if r.Refused < 4000 || r.ScaleHints == 0 || r.RegimeTicks[string(routegroup.Crisis)] == 0 {
		t.Errorf("refused %d, %d ticks with a scale hint, regimes %v", r.Refused, r.ScaleHints, r.RegimeTicks)
	}
}

// TestBackendQueueHandComputed: the fluid queue and the gauges, step by
// step.
func TestBackendQueueHandComputed(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	b := &simBackend{cfg: spec.SimBackend{Capacity: 100, Latency: spec.Duration(20 * time.Millisecond)}, win: make([]struct{ req, fail int }, 60),
		windows: []degrade{{from: 10, until: 20, latency: 5, capacity: 0.1, errRate: 1}}}
	// 30 requests in 0.2 s at 100/s: 20 served, 10 wait 0.1 s.
	b.arrived = 30
	if fail := b.advance(0, 0.2, rng); fail != 0 || b.queue != 10 || !approx(b.latency(0), 0.02+0.1, 1e-12) {
		t.Fatalf("fail %d, queue %d, latency %g: want 0, 10, 0.12", fail, b.queue, b.latency(0))
	}
	// 0.05 s more: 5 of them served.
	b.arrived = 0
	if fail := b.advance(0, 0.05, rng); fail != 0 || b.queue != 5 || !approx(b.latency(0), 0.07, 1e-12) || b.errorRatio() != 0 {
		t.Fatalf("fail %d, queue %d, latency %g, errors %g: want 0, 5, 0.07, 0", fail, b.queue, b.latency(0), b.errorRatio())
	}
	// Degraded: 10/s, every request failing. 150 more in a second: 10
	// served (and failed), 145 waiting of which 100 fit in 10 s; 45 fail
	// waiting.
	b.arrived = 150
	if fail := b.advance(10, 1, rng); fail != 55 || b.queue != 100 {
		t.Fatalf("fail %d, queue %d: want 55, 100", fail, b.queue)
	}
	// p95 = 20 ms × 5 + the wait of 100 at 10/s, at most 10 s.
	if !approx(b.latency(10), 0.1+MaxWait, 1e-12) || !approx(b.errorRatio(), 55.0/80, 1e-12) {
		t.Errorf("latency %g, errors %g: want 10.1, 55/80", b.latency(10), b.errorRatio())
	}
	// The window forgets a second once it comes round again.
	b.win[70%len(b.win)] = struct{ req, fail int }{}
	if !approx(b.errorRatio(), 0, 1e-12) {
		t.Errorf("errors %g after second 10 left the window", b.errorRatio())
	}
}

// TestZigzagCountsTurns: swings of at least the band count; a turn
// within flapWithin of the last one is a flap.
func TestZigzagCountsTurns(t *testing.T) {
	var z zigzag
	s := time.Second
	for _, step := range []struct {
		c         int
		at        time.Duration
		rev, flap int
	}{
		{100, 0, 0, 0},
		{105, 1 * s, 0, 0}, // within the band: not moving yet
		{112, 2 * s, 0, 0}, // up
		{120, 3 * s, 0, 0}, // further up
		{112, 4 * s, 0, 0}, // back 8 of 10: no turn
		{110, 5 * s, 1, 0}, // back 10: a turn, the first
		{130, 200 * s, 2, 0},
		{119, 230 * s, 3, 1}, // 30 s after the last turn: a flap
	} {
		z.add(step.c, step.at, 10)
		if z.reversals != step.rev || z.flaps != step.flap {
			t.Fatalf("after %d at %s: %d reversals, %d flaps; want %d, %d", step.c, step.at, z.reversals, z.flaps, step.rev, step.flap)
		}
	}
}

// TestRouteGroupConfigErrors: what the world refuses to build.
func TestRouteGroupConfigErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*spec.SimRouteGroup)
		want string
	}{
		{"a VIP without a port", func(g *spec.SimRouteGroup) { g.VIP = "127.100.0.1" }, `VIP "127.100.0.1"`},
		{"a backend twice", func(g *spec.SimRouteGroup) { g.Backends[2].Address = backA }, "backend 127.0.0.1:9001 twice"},
		{"no capacity", func(g *spec.SimRouteGroup) { g.Backends[0].Capacity = 0 }, "capacity 0"},
		{"a window ending before it starts", func(g *spec.SimRouteGroup) {
			g.Backends[1].Degrade[0].Until = g.Backends[1].Degrade[0].From
		}, "degrade from 2m0s until 2m0s"},
		{"an error window too long", func(g *spec.SimRouteGroup) { g.ErrorWindow = spec.Duration(time.Hour) }, "errorWindow 1h0m0s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := threeBackends()
			c.edit(&g)
			_, err := NewWithTrace(spec.SimConfig{Seed: 1, RouteGroups: []spec.SimRouteGroup{g}}, constTrace(1, 10), Options{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v, want %q", err, c.want)
			}
		})
	}
	g := threeBackends()
	h := threeBackends()
	h.Name = "other"
	if _, err := NewWithTrace(spec.SimConfig{Seed: 1, RouteGroups: []spec.SimRouteGroup{g, h}}, constTrace(1, 10), Options{}); err == nil || !strings.Contains(err.Error(), "both on VIP 127.100.0.1:8080") {
		t.Errorf("two groups on one VIP: %v", err)
	}
}
