//go:build linux

package ebpf

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/decide/routegroup"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/internal/bpftest"
	"github.com/setpoint-dev/setpoint/internal/testutil"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/route"
)

// backend is a loopback HTTP server whose /work takes delay, and whose
// /metrics says its p95 latency over the last second and its requests in
// flight, as a real service would.
type backend struct {
	addr     netip.AddrPort
	delay    atomic.Int64 // ns
	inflight atomic.Int64
	mu       sync.Mutex
	recent   []sample
}

type sample struct {
	at time.Time
	d  time.Duration
}

func (b *backend) p95() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	cut := time.Now().Add(-time.Second)
	keep := b.recent[:0]
	for _, s := range b.recent {
		if s.at.After(cut) {
			keep = append(keep, s)
		}
	}
	b.recent = keep
	if len(keep) == 0 {
		return 0
	}
	ds := make([]time.Duration, len(keep))
	for i, s := range keep {
		ds[i] = s.d
	}
	slices.Sort(ds)
	return ds[len(ds)*95/100].Seconds()
}

func startBackend(t *testing.T) *backend {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{addr: l.Addr().(*net.TCPAddr).AddrPort()}
	mux := http.NewServeMux()
	mux.HandleFunc("/work", func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		b.inflight.Add(1)
		time.Sleep(time.Duration(b.delay.Load()))
		b.inflight.Add(-1)
		b.mu.Lock()
		b.recent = append(b.recent, sample{time.Now(), time.Since(start)})
		b.mu.Unlock()
	})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "# TYPE backend_latency_p95_seconds gauge\nbackend_latency_p95_seconds %g\n", b.p95())
		fmt.Fprintf(w, "# TYPE backend_queue_depth gauge\nbackend_queue_depth %d\n", b.inflight.Load())
		fmt.Fprintf(w, "# TYPE backend_error_ratio gauge\nbackend_error_ratio 0\n")
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return b
}

func testConfig(endpoints []string) route.Config {
	return route.Config{
		VIP: "127.100.0.1:8080", Proto: "tcp", Endpoints: endpoints,
		Metrics: route.Metrics{Path: "/metrics", Queue: "backend_queue_depth", Latency: "backend_latency_p95_seconds", ErrorRate: "backend_error_ratio"},
		Builder: routegroup.BuildMaglev, Every: 100 * time.Millisecond, Jitter: 0.05, Failsafe: time.Second, Table: route.TableEnforce,
		Params: routegroup.Params{
			Slots: 65537, Alpha: 0.5, WQueue: 1, WLatency: 1, WErrors: 2, QueueRef: 10, LatencyRef: 0.1, ErrorRef: 0.01, ErrorClip: 10,
			PenaltyAbove: 0.05, PenaltyAdd: 5, Horizon: 2 * time.Second, MaxSlotsPerTick: 5000,
			SkewEpsilon: 0.02, SkewShrink: 0.5, MinConnects: 100, TransitionAbove: 1, CrisisAbove: 2, RecoveryTicks: 10,
			SoftShed: 0.2, HardBudget: 100,
		},
	}
}

var rg = addrs.Object{Provider: Name, Kind: route.Kind, Namespace: "shop", Name: "checkout-vip"}

func change(t *testing.T, c route.Config, act action.Action) providers.ObjectChange {
	raw, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	v, err := values.StructuredOf(raw)
	if err != nil {
		t.Fatal(err)
	}
	return providers.ObjectChange{Address: rg, Action: act, Attributes: map[addrs.Path]values.Value{route.AttrConfig: v}}
}

func configured(t *testing.T) *Provider {
	cg := bpftest.Cgroup(t)
	p := New()
	cfg, _ := json.Marshal(Config{Cgroup: cg})
	if d := p.Configure(context.Background(), providers.ConfigureRequest{Config: cfg}); len(d) > 0 {
		t.Fatalf("configure: %v", d)
	}
	t.Cleanup(func() {
		if err := p.Shutdown(); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return p
}

func apply(t *testing.T, p *Provider, c providers.ObjectChange) string {
	t.Helper()
	r := p.Apply(context.Background(), providers.ApplyRequest{Changes: []providers.ObjectChange{c}})
	return r.Results[0].Err
}

func field(t *testing.T, p *Provider) (route.Field, int64, string) {
	t.Helper()
	r := p.Read(context.Background(), providers.ReadRequest{Addresses: []addrs.Object{rg}})
	o := r.Objects[0]
	if !o.Exists {
		t.Fatal("the group is not there")
	}
	// The ownership mark: a config setpoint created is recognised as its
	// own after an apply cut off before it was recorded.
	if m := o.Managers[route.AttrConfig]; m != "setpoint" {
		t.Fatalf("the config is reported as managed by %q, want setpoint", m)
	}
	var f route.Field
	if v, ok := o.Attributes[route.AttrField]; ok {
		if err := json.Unmarshal(v.JSON(), &f); err != nil {
			t.Fatal(err)
		}
	}
	return f, o.Attributes[route.AttrTick].Int(), o.Attributes[route.AttrRegime].Str()
}

func slotsOf(f route.Field, name string) int {
	i := slices.Index(f.Names, name)
	if i < 0 {
		return -1
	}
	return f.Slots[i]
}

// load sends requests through the VIP, a new connection each, until the
// test ends.
func load(t *testing.T, workers int) {
	var stop atomic.Bool
	var wg sync.WaitGroup
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if resp, err := client.Get("http://127.100.0.1:8080/work"); err == nil {
					resp.Body.Close()
				}
			}
		}()
	}
	t.Cleanup(func() { stop.Store(true); wg.Wait() })
}

// A backend that turns slow loses share within 10 ticks of its pressure
// reaching transitionAbove (within the damping's hold of turning slow),
// and regains it
// once it recovers; the regime stays laminar throughout (no flapping into
// admission control for one slow backend of three).
func TestDegradedBackendLosesShareAndRegainsIt(t *testing.T) {
	p := configured(t)
	bs := []*backend{startBackend(t), startBackend(t), startBackend(t)}
	var eps []string
	for _, b := range bs {
		eps = append(eps, b.addr.String())
	}
	if err := apply(t, p, change(t, testConfig(eps), action.Create)); err != "" {
		t.Fatal(err)
	}
	load(t, 4)
	slow := bs[1].addr.String()
	even := 65537 / 3
	testutil.Eventually(t, 20*time.Second, "an even split with load flowing", func() bool {
		f, tick, _ := field(t, p)
		s := slotsOf(f, slow)
		return tick > 5 && s > even*9/10 && s < even*11/10
	})
	_, t0, _ := field(t, p)
	bs[1].delay.Store(int64(60 * time.Millisecond))
	// The bound is on the field's reaction, counted from the first tick
	// the slow backend's pressure reaches the config's transitionAbove
	// (1): below it the damping holds a loss that reverses a move of the
	// last 10 s (a blip and a slow degradation's first ticks look alike:
	// engine/decide/routegroup's TestMustShedRightAfterAGain), and how
	// soon the real requests show the delay depends on how busy the
	// machine is.
	seen := int64(-1)
	testutil.Eventually(t, 20*time.Second, "the slow backend to lose share", func() bool {
		f, tick, _ := field(t, p)
		if i := slices.Index(f.Names, slow); seen < 0 && tick > t0 && i >= 0 && i < len(f.Pressure) && f.Pressure[i] >= 1 {
			seen = tick
		}
		return slotsOf(f, slow) < even*8/10
	})
	f, t1, regime := field(t, p)
	if seen < 0 {
		t.Logf("slow backend at %d slots after %d ticks (from %d), its pressure below transitionAbove", slotsOf(f, slow), t1-t0, even)
	} else {
		t.Logf("slow backend at %d slots after %d ticks (from %d), %d ticks after its pressure reached transitionAbove", slotsOf(f, slow), t1-t0, even, t1-seen)
	}
	if seen >= 0 && t1-seen > 10 {
		t.Errorf("the slow backend lost share only %d ticks after its pressure reached transitionAbove, want within 10", t1-seen)
	}
	if t1-t0 > 50 {
		t.Errorf("the slow backend lost share only %d ticks after it turned slow, want within a damping hold (50)", t1-t0)
	}
	if regime != string(routegroup.Laminar) {
		t.Errorf("regime %s with one slow backend of three", regime)
	}
	// Its connects follow the table: the program's counters move away too.
	bs[1].delay.Store(0)
	testutil.Eventually(t, 30*time.Second, "the recovered backend to regain share", func() bool {
		f, _, _ := field(t, p)
		return slotsOf(f, slow) > even*9/10
	})
}

// Observe mode computes and reports the field but writes no table: the
// VIP is not rewritten.
func TestObserveWritesNoTable(t *testing.T) {
	p := configured(t)
	b := startBackend(t)
	c := testConfig([]string{b.addr.String()})
	c.Table = route.TableObserve
	if err := apply(t, p, change(t, c, action.Create)); err != "" {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "two ticks", func() bool { _, tick, _ := field(t, p); return tick >= 2 })
	f, _, _ := field(t, p)
	if slotsOf(f, b.addr.String()) != 65537 {
		t.Errorf("observe: field %+v, want all slots computed for the one backend", f)
	}
	if _, err := bpftest.Connect(netip.MustParseAddrPort(c.VIP)); err == nil {
		t.Error("observe: a connect to the VIP was routed")
	}
	vip := netip.MustParseAddrPort(c.VIP)
	routed := func() bool { peer, err := bpftest.Connect(vip); return err == nil && peer == b.addr }
	set := func(table string, want bool) {
		t.Helper()
		c.Table = table
		if err := apply(t, p, change(t, c, action.Update)); err != "" {
			t.Fatal(err)
		}
		testutil.Eventually(t, 10*time.Second, fmt.Sprintf("table %s: routed %v", table, want), func() bool { return routed() == want })
	}
	// Enforcing routes it, observe stops, enforcing again routes it again
	// (the backends' ids were kept written).
	set(route.TableEnforce, true)
	set(route.TableObserve, false)
	set(route.TableEnforce, true)
	// A deleted spec releases the config: the agent stops routing.
	rel := providers.ObjectChange{Address: rg, Action: action.Update, Released: []addrs.Path{route.AttrConfig}}
	if err := apply(t, p, rel); err != "" {
		t.Fatal(err)
	}
	if routed() {
		t.Error("after the config was released: a connect to the VIP was routed")
	}
	if r := p.Read(context.Background(), providers.ReadRequest{Addresses: []addrs.Object{rg}}); r.Objects[0].Exists {
		t.Error("a released group is still there")
	}
}

func TestBadConfigsAreRefused(t *testing.T) {
	p := configured(t)
	good := testConfig([]string{"127.0.0.1:9001", "127.0.0.1:9002"})
	for _, c := range []struct {
		name string
		mut  func(*route.Config)
		want string
	}{
		{"VIP outside loopback", func(c *route.Config) { c.VIP = "10.0.0.1:80" }, "outside what this agent may route"},
		{"backend outside loopback", func(c *route.Config) { c.Endpoints[1] = "192.168.1.1:80" }, "outside what this agent may route to"},
		{"no backends", func(c *route.Config) { c.Endpoints = nil }, "no backends"},
		{"table not prime", func(c *route.Config) { c.Params.Slots = 65536 }, "must be prime"},
		{"negative weight", func(c *route.Config) { c.Params.WLatency = -1 }, "pressure weight latency"},
		{"negative ref", func(c *route.Config) { c.Params.QueueRef = -1 }, "pressure reference queue"},
		{"larger than the maps", func(c *route.Config) { c.Params.Slots = 131071 }, "at most 65537"},
		{"UDP", func(c *route.Config) { c.Proto = "udp" }, "routes TCP only"},
		{"backend port 0", func(c *route.Config) { c.Endpoints[0] = "127.0.0.1:0" }, "port 0 is no port"},
		{"burst past the bucket", func(c *route.Config) { c.Burst = routegroup.MaxBurst + 1 }, "admission burst"},
		{"failsafe that trips on a healthy loop", func(c *route.Config) { c.Failsafe = 2 * c.Every }, "failsafe after"},
	} {
		cfg := good
		cfg.Endpoints = slices.Clone(good.Endpoints)
		c.mut(&cfg)
		ch := change(t, cfg, action.Create)
		plan := p.PlanChange(context.Background(), providers.PlanChangeRequest{Changes: []providers.ObjectChange{ch}})
		if !strings.Contains(plan.Results[0].Err, c.want) {
			t.Errorf("%s: plan says %q, want %q", c.name, plan.Results[0].Err, c.want)
		}
		if err := apply(t, p, ch); !strings.Contains(err, c.want) {
			t.Errorf("%s: apply says %q, want %q", c.name, err, c.want)
		}
	}
	if r := p.Read(context.Background(), providers.ReadRequest{Addresses: []addrs.Object{rg}}); r.Objects[0].Exists {
		t.Error("a refused config left a group behind")
	}
}

func TestConfigureRefusesWhatIsMissing(t *testing.T) {
	bpftest.RequireRoot(t)
	for _, c := range []struct {
		cfg  string
		want string
	}{
		{`{}`, "cgroup is required"},
		{`{"cgroup": "/proc"}`, "not a cgroup2 directory"},
		{`{"cgroup": "/nonexistent"}`, "no such file"},
		{`{"cgroup": "/sys/fs/cgroup", "allow": ["::1/128"]}`, "IPv4 prefix"},
	} {
		d := New().Configure(context.Background(), providers.ConfigureRequest{Config: []byte(c.cfg)})
		if len(d) == 0 || !strings.Contains(d[0].Message, c.want) {
			t.Errorf("config %s: %v, want %q", c.cfg, d, c.want)
		}
	}
}

// Backends replaced under a connect storm: an id is freed only after the
// flip that stops naming it, so no connect finds a table entry whose
// backend is gone (the program would count it missed and leave the VIP
// unrewritten).
func TestReplacedBackendsNeverLeaveAHole(t *testing.T) {
	p := configured(t)
	a, b, c := startBackend(t), startBackend(t), startBackend(t)
	cfg := testConfig([]string{a.addr.String(), b.addr.String()})
	cfg.Every = 20 * time.Millisecond
	cfg.Failsafe = time.Second
	if err := apply(t, p, change(t, cfg, action.Create)); err != "" {
		t.Fatal(err)
	}
	vip := netip.MustParseAddrPort(cfg.VIP)
	testutil.Eventually(t, 10*time.Second, "the VIP routed", func() bool { _, err := bpftest.Connect(vip); return err == nil })
	var stop atomic.Bool
	var failed atomic.Int64
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if _, err := bpftest.Connect(vip); err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	g := func() *group { p.mu.Lock(); defer p.mu.Unlock(); return p.groups[rg] }
	for i := range 20 {
		other := b
		if i%2 == 0 {
			other = c
		}
		cfg.Endpoints = []string{a.addr.String(), other.addr.String()}
		if err := apply(t, p, change(t, cfg, action.Update)); err != "" {
			t.Fatal(err)
		}
		// Wait for a table that names the new backend.
		testutil.Eventually(t, 10*time.Second, "the new backend published", func() bool {
			gr := g()
			gr.mu.Lock()
			defer gr.mu.Unlock()
			return slices.Contains(gr.published, other.addr.String())
		})
	}
	stop.Store(true)
	wg.Wait()
	st, err := p.dp.Stats(g().idx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Missed != 0 || failed.Load() != 0 {
		t.Errorf("%d connects missed a backend, %d failed, over %d routed", st.Missed, failed.Load(), st.Routed)
	}
	if st.Routed < 100 {
		t.Fatalf("only %d connects routed: the storm checked too little", st.Routed)
	}
}

// pinnedAgent is an agent on a pin directory in a cgroup of its own.
func pinnedAgent(t *testing.T, cg, pins string) *Provider {
	t.Helper()
	p := New()
	cfg, _ := json.Marshal(Config{Cgroup: cg, PinDir: pins})
	if d := p.Configure(context.Background(), providers.ConfigureRequest{Config: cfg}); len(d) > 0 {
		t.Fatalf("configure: %v", d)
	}
	return p
}

// reaches says whether a connect to the VIP reaches one of backends.
func reaches(vip string, backends ...*backend) bool {
	peer, err := bpftest.Connect(netip.MustParseAddrPort(vip))
	if err != nil {
		return false
	}
	for _, b := range backends {
		if peer == b.addr {
			return true
		}
	}
	return false
}

// A plan starts the agent too: it must neither take over the pinned
// dataplane a running agent holds nor detach it when it exits. A second
// agent's apply is refused while the first holds the pins.
func TestAPlanningAgentLeavesTheRunningOneAlone(t *testing.T) {
	cg := bpftest.Cgroup(t)
	pins := bpftest.BPFFS(t) + "/setpoint"
	b := startBackend(t)
	running := pinnedAgent(t, cg, pins)
	t.Cleanup(func() { running.Shutdown() })
	cfg := testConfig([]string{b.addr.String()})
	if err := apply(t, running, change(t, cfg, action.Create)); err != "" {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "the VIP reaches its backend", func() bool { return reaches(cfg.VIP, b) })

	planning := pinnedAgent(t, cg, pins)
	if r := planning.PlanChange(context.Background(), providers.PlanChangeRequest{Changes: []providers.ObjectChange{change(t, cfg, action.Update)}}); r.Results[0].Err != "" {
		t.Fatalf("plan: %s", r.Results[0].Err)
	}
	planning.Read(context.Background(), providers.ReadRequest{Addresses: []addrs.Object{rg}})
	if err := apply(t, planning, change(t, cfg, action.Update)); !strings.Contains(err, "pin directory is in use") {
		t.Errorf("a second agent's apply on held pins: %q, want the pin directory in use", err)
	}
	if err := planning.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if !reaches(cfg.VIP, b) {
		t.Fatal("the planning agent's exit detached the running agent's dataplane")
	}
	if _, _, regime := field(t, running); regime == "" {
		t.Fatal("the running agent's loop stopped")
	}
}

// A crashed agent's VIP, resumed from the pins, keeps its group: a new
// VIP never lands in the tables it still routes by, the agent says no
// config claims it, and its own config takes it back.
func TestResumedVIPKeepsItsGroup(t *testing.T) {
	cg := bpftest.Cgroup(t)
	pins := bpftest.BPFFS(t) + "/setpoint"
	a, other := startBackend(t), startBackend(t)
	first := pinnedAgent(t, cg, pins)
	cfg := testConfig([]string{a.addr.String()})
	if err := apply(t, first, change(t, cfg, action.Create)); err != "" {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "the VIP reaches its backend", func() bool { return reaches(cfg.VIP, a) })
	// What a killed agent leaves: loops gone, pins in place.
	if err := first.Leave(); err != nil {
		t.Fatal(err)
	}

	second := pinnedAgent(t, cg, pins)
	t.Cleanup(func() { second.Shutdown() })
	otherCfg := testConfig([]string{other.addr.String()})
	otherCfg.VIP = "127.100.0.2:8080"
	otherRG := addrs.Object{Provider: Name, Kind: route.Kind, Namespace: "shop", Name: "other"}
	ch := change(t, otherCfg, action.Create)
	ch.Address = otherRG
	if err := apply(t, second, ch); err != "" {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "the new VIP reaches its backend", func() bool { return reaches(otherCfg.VIP, other) })
	// The old VIP still reaches its own backend only (the failsafe's even
	// split over it), never the new group's.
	for range 20 {
		if !reaches(cfg.VIP, a) {
			t.Fatal("the resumed VIP was routed elsewhere once a new group started")
		}
	}
	r := second.Read(context.Background(), providers.ReadRequest{Addresses: []addrs.Object{rg}})
	if r.Objects[0].Exists || len(r.Diagnostics) != 1 || !strings.Contains(r.Diagnostics[0].Message, "no config claims it") {
		t.Fatalf("before its config comes back: exists %v, diagnostics %v", r.Objects[0].Exists, r.Diagnostics)
	}
	if err := apply(t, second, change(t, cfg, action.Create)); err != "" {
		t.Fatal(err)
	}
	if r := second.Read(context.Background(), providers.ReadRequest{Addresses: []addrs.Object{rg}}); len(r.Diagnostics) != 0 {
		t.Fatalf("after its config came back: %v", r.Diagnostics)
	}
	testutil.Eventually(t, 5*time.Second, "both VIPs reach their backends", func() bool { return reaches(cfg.VIP, a) && reaches(otherCfg.VIP, other) })
}

// Releasing a config stops routing: the plan must say so.
func TestReleaseIsWarnedOfInThePlan(t *testing.T) {
	p := configured(t)
	ch := providers.ObjectChange{Address: rg, Action: action.Update, Released: []addrs.Path{route.AttrConfig}}
	r := p.PlanChange(context.Background(), providers.PlanChangeRequest{Changes: []providers.ObjectChange{ch}})
	if r.Results[0].Err != "" || len(r.Diagnostics) != 1 || r.Diagnostics[0].Severity != providers.Warning ||
		r.Diagnostics[0].Address == nil || *r.Diagnostics[0].Address != rg || !strings.Contains(r.Diagnostics[0].Message, "no longer rewritten") {
		t.Fatalf("plan of a release: %+v", r)
	}
}

// A tick that cannot write its table says so in Read and in an Event,
// and the error clears when the loop recovers.
func TestLoopErrorsShowInRead(t *testing.T) {
	p := configured(t)
	b := startBackend(t)
	if err := apply(t, p, change(t, testConfig([]string{b.addr.String()}), action.Create)); err != "" {
		t.Fatal(err)
	}
	p.mu.Lock()
	g := p.groups[rg]
	p.mu.Unlock()
	// The loop's next good tick clears an injected failure, and a busy
	// machine may run it between the injection and the Read: the property
	// is that a Read while the failure stands reports it, so inject again
	// until one Read lands before the tick (a handful of tries at most).
	var r providers.ReadResponse
	for try := 0; try < 50; try++ {
		g.mu.Lock()
		g.fail(time.Now(), fmt.Errorf("writing the route table: %w", fmt.Errorf("map full")))
		g.mu.Unlock()
		r = p.Read(context.Background(), providers.ReadRequest{Addresses: []addrs.Object{rg}})
		if len(r.Diagnostics) > 0 {
			break
		}
	}
	if len(r.Diagnostics) != 1 || !strings.Contains(r.Diagnostics[0].Message, "map full") || *r.Diagnostics[0].Address != rg {
		t.Fatalf("read: %v", r.Diagnostics)
	}
	testutil.Eventually(t, 5*time.Second, "an event of the failure", func() bool {
		select {
		case e := <-p.events:
			return strings.Contains(e.Reason, "map full")
		default:
			return false
		}
	})
	// The next good tick clears it.
	testutil.Eventually(t, 5*time.Second, "the error clears", func() bool {
		return len(p.Read(context.Background(), providers.ReadRequest{Addresses: []addrs.Object{rg}}).Diagnostics) == 0
	})
}

// Applies racing each other and the shutdown leave no loop running and
// nothing routed (run with -race).
func TestConcurrentAppliesAndShutdown(t *testing.T) {
	cg := bpftest.Cgroup(t)
	b := startBackend(t)
	p := New()
	cfgJSON, _ := json.Marshal(Config{Cgroup: cg})
	if d := p.Configure(context.Background(), providers.ConfigureRequest{Config: cfgJSON}); len(d) > 0 {
		t.Fatal(d)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := testConfig([]string{b.addr.String()})
			c.Params.MaxSlotsPerTick = 1000 + i
			p.Apply(context.Background(), providers.ApplyRequest{Changes: []providers.ObjectChange{change(t, c, action.Update)}})
		}()
	}
	wg.Add(1)
	go func() { defer wg.Done(); p.Shutdown() }()
	wg.Wait()
	if err := p.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if len(p.groups) != 0 {
		t.Fatalf("%d groups left after the shutdown", len(p.groups))
	}
	if err := apply(t, p, change(t, testConfig([]string{b.addr.String()}), action.Create)); !strings.Contains(err, "shutting down") {
		t.Fatalf("an apply after the shutdown: %q", err)
	}
	if _, err := bpftest.Connect(netip.MustParseAddrPort("127.100.0.1:8080")); err == nil {
		t.Fatal("the VIP is still routed after the shutdown")
	}
}
