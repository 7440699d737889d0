//go:build linux

package ebpf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/bpf/dataplane"
	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/internal/bpftest"
	"github.com/setpoint-dev/setpoint/internal/testutil"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/route"
)

// agentWith is a configured agent with its own cgroup and cfg's other
// fields; Shutdown at the end unless left is set.
func agentWith(t *testing.T, cfg Config) *Provider {
	t.Helper()
	if cfg.Cgroup == "" {
		cfg.Cgroup = bpftest.Cgroup(t)
	}
	p := New()
	raw, _ := json.Marshal(cfg)
	if d := p.Configure(context.Background(), providers.ConfigureRequest{Config: raw}); len(d) > 0 {
		t.Fatalf("configure: %v", d)
	}
	t.Cleanup(func() { _ = p.Shutdown() })
	return p
}

func changeAt(t *testing.T, a addrs.Object, c route.Config, act action.Action) providers.ObjectChange {
	ch := change(t, c, act)
	ch.Address = a
	return ch
}

func groupAt(p *Provider, a addrs.Object) *group {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.groups[a]
}

func readDiags(p *Provider, a ...addrs.Object) []providers.Diagnostic {
	return p.Read(context.Background(), providers.ReadRequest{Addresses: a}).Diagnostics
}

func exists(p *Provider, a addrs.Object) bool {
	return p.Read(context.Background(), providers.ReadRequest{Addresses: []addrs.Object{a}}).Objects[0].Exists
}

// endpoints are n loopback backends nobody serves (their scrapes fail at
// once, so they weigh the same), from base on.
func endpoints(base, n int) []string {
	out := make([]string, n)
	for i := range out {
		k := base + i
		out[i] = fmt.Sprintf("127.1.%d.%d:9", k/250, 1+k%250)
	}
	return out
}

// A group holds as many ids as a set may name backends, so a set
// replaced (one backend of a full set, or all of them at once) needs more
// ids than are free while the departed keep theirs. The loop must get
// through it, never leave a table naming a departed backend in place,
// and end with the ids of the new set only.
func TestReviewIDsOfAReplacedSetAreFreedThroughAnInterimTable(t *testing.T) {
	p := agentWith(t, Config{})
	cfg := testConfig(endpoints(0, dataplane.MaxBackends))
	cfg.Params.Slots = 4099 // prime; a small table keeps the ticks short
	cfg.Every, cfg.Failsafe = 200*time.Millisecond, 2*time.Second
	if err := apply(t, p, change(t, cfg, action.Create)); err != "" {
		t.Fatal(err)
	}
	settled := func(want []string) func() bool {
		want = slices.Sorted(slices.Values(want))
		return func() bool {
			g := groupAt(p, rg)
			g.mu.Lock()
			defer g.mu.Unlock()
			return g.installed && g.err == "" && slices.Equal(g.published, want) && len(g.ids) == len(want)
		}
	}
	testutil.Eventually(t, 20*time.Second, "the full set published", settled(cfg.Endpoints))

	check := func(want []string) {
		t.Helper()
		g := groupAt(p, rg)
		act, err := p.dp.Active(g.idx)
		if err != nil {
			t.Fatal(err)
		}
		bs, err := p.dp.Backends(g.idx)
		if err != nil {
			t.Fatal(err)
		}
		in := map[string]bool{}
		for _, e := range want {
			in[e] = true
		}
		for id, ap := range bs {
			if !in[ap.String()] {
				t.Fatalf("id %d still names %s, a departed backend", id, ap)
			}
		}
		for slot, id := range act {
			if _, ok := bs[id]; !ok {
				t.Fatalf("slot %d names id %d, which has no backend", slot, id)
			}
		}
		if len(bs) != len(want) {
			t.Fatalf("%d backends in the kernel, want %d", len(bs), len(want))
		}
	}

	// One backend of the full set replaced.
	one := slices.Clone(cfg.Endpoints)
	one[17] = endpoints(5000, 1)[0]
	cfg.Endpoints = one
	if err := apply(t, p, change(t, cfg, action.Update)); err != "" {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, "one backend replaced in a full set", settled(one))
	check(one)

	// The whole set replaced at once.
	all := endpoints(2000, dataplane.MaxBackends)
	cfg.Endpoints = all
	if err := apply(t, p, change(t, cfg, action.Update)); err != "" {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, "the whole set replaced", settled(all))
	check(all)
	if d := readDiags(p, rg); len(d) != 0 {
		t.Fatalf("after the replacements: %v", d)
	}
}

// The interim tables alone, without the loop: each flip leaves every slot
// on an id with a backend, and the last one names the new set only.
func TestReviewProjectAcrossAFullSwap(t *testing.T) {
	p := agentWith(t, Config{})
	cfg := testConfig(endpoints(0, dataplane.MaxBackends))
	cfg.Params.Slots = 4099
	cfg.Table = route.TableObserve // the loop writes nothing: the test projects
	if err := apply(t, p, change(t, cfg, action.Create)); err != "" {
		t.Fatal(err)
	}
	g := groupAt(p, rg)
	p.applyMu.Lock()
	g.halt()
	p.applyMu.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	decide := func(names []string) {
		t.Helper()
		d := g.last
		d.Names = slices.Sorted(slices.Values(names))
		d.Slots = make([]int, len(names))
		for i := range d.Slots {
			d.Slots[i] = cfg.Params.Slots / len(names)
		}
		d.Slots[0] += cfg.Params.Slots - cfg.Params.Slots/len(names)*len(names)
		if _, err := g.project(d); err != nil {
			t.Fatal(err)
		}
		bs, _ := p.dp.Backends(g.idx)
		if len(bs) != len(names) || !slices.Equal(g.published, d.Names) {
			t.Fatalf("%d backends written, %d published, want %d", len(bs), len(g.published), len(names))
		}
	}
	decide(endpoints(0, dataplane.MaxBackends))
	decide(endpoints(3000, dataplane.MaxBackends))
	decide(append(endpoints(3000, 600), endpoints(6000, 424)...))
}

// Leave lets go of the dataplane only once the loops are stopped: a tick
// never reads a dataplane being let go of (run with -race; without it a
// tick in count or project could dereference nil).
func TestReviewLeaveStopsTheLoopsFirst(t *testing.T) {
	b := startBackend(t)
	for i := range 5 {
		p := New()
		raw, _ := json.Marshal(Config{Cgroup: bpftest.Cgroup(t)})
		if d := p.Configure(context.Background(), providers.ConfigureRequest{Config: raw}); len(d) > 0 {
			t.Fatal(d)
		}
		cfg := testConfig([]string{b.addr.String()})
		cfg.Every = 10 * time.Millisecond
		if err := apply(t, p, change(t, cfg, action.Create)); err != "" {
			t.Fatal(err)
		}
		testutil.Eventually(t, 5*time.Second, "a few ticks", func() bool { _, tick, _ := field(t, p); return tick > int64(3+i) })
		// The loop keeps ticking every 10 ms, unsynchronised with the test
		// after the last Read: Leave races the ticks in flight.
		if err := p.Leave(); err != nil {
			t.Fatal(err)
		}
	}
}

// Read while a group is reconfigured: inherit writes the new group's
// state under its lock (run with -race).
func TestReviewReadDuringReconfiguration(t *testing.T) {
	p := agentWith(t, Config{})
	b := startBackend(t)
	cfg := testConfig([]string{b.addr.String()})
	if err := apply(t, p, change(t, cfg, action.Create)); err != "" {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			p.Read(context.Background(), providers.ReadRequest{Addresses: []addrs.Object{rg}})
		}
	}()
	for i := range 10 {
		cfg.Params.MaxSlotsPerTick = 1000 + i
		if err := apply(t, p, change(t, cfg, action.Update)); err != "" {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
}

// Two agents' worth of pins: A and B routed by a first agent with two
// groups, which then dies (Leave: loops gone, pins in place).
func crashedWithTwoGroups(t *testing.T) (cg, pins string, a, b route.Config, ba, bb *backend) {
	cg = bpftest.Cgroup(t)
	pins = bpftest.BPFFS(t) + "/setpoint"
	ba, bb = startBackend(t), startBackend(t)
	first := agentWith(t, Config{Cgroup: cg, PinDir: pins, Groups: 2})
	a = testConfig([]string{ba.addr.String()})
	b = testConfig([]string{bb.addr.String()})
	b.VIP = "127.100.0.2:8080"
	if err := apply(t, first, changeAt(t, rg, a, action.Create)); err != "" {
		t.Fatal(err)
	}
	if err := apply(t, first, changeAt(t, otherRG, b, action.Create)); err != "" {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "both VIPs routed", func() bool { return reaches(a.VIP, ba) && reaches(b.VIP, bb) })
	if err := first.Leave(); err != nil {
		t.Fatal(err)
	}
	return cg, pins, a, b, ba, bb
}

var otherRG = addrs.Object{Provider: Name, Kind: route.Kind, Namespace: "shop", Name: "other"}

// After a restart on a full agent, a config whose group was resumed is
// planned as Apply would run it: into the index reserved for its VIP, not
// refused because every index is taken.
func TestReviewPlanTakesTheIndexReservedForItsVIP(t *testing.T) {
	cg, pins, a, b, _, bb := crashedWithTwoGroups(t)
	second := agentWith(t, Config{Cgroup: cg, PinDir: pins, Groups: 2})
	if err := apply(t, second, changeAt(t, rg, a, action.Create)); err != "" {
		t.Fatal(err)
	}
	plan := second.PlanChange(context.Background(), providers.PlanChangeRequest{Changes: []providers.ObjectChange{changeAt(t, otherRG, b, action.Create)}})
	if plan.Results[0].Err != "" {
		t.Fatalf("plan of a resumed group's config on a full agent: %s", plan.Results[0].Err)
	}
	if err := apply(t, second, changeAt(t, otherRG, b, action.Create)); err != "" {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "B routed by its config", func() bool { return reaches(b.VIP, bb) })
}

// A running group's config moved onto the VIP of a resumed group that no
// config claimed: the resumed group is given up, its index freed.
func TestReviewMovingOntoAResumedVIPFreesItsGroup(t *testing.T) {
	cg, pins, a, b, _, bb := crashedWithTwoGroups(t)
	second := agentWith(t, Config{Cgroup: cg, PinDir: pins, Groups: 2})
	if err := apply(t, second, changeAt(t, otherRG, b, action.Create)); err != "" {
		t.Fatal(err)
	}
	moved := b
	moved.VIP = a.VIP
	if err := apply(t, second, changeAt(t, otherRG, moved, action.Update)); err != "" {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "A's VIP routed to B's backend", func() bool { return reaches(a.VIP, bb) })
	if d := readDiags(second, otherRG); len(d) != 0 {
		t.Fatalf("after the move: %v", d)
	}
	c := testConfig([]string{bb.addr.String()})
	c.VIP = "127.100.0.3:8080"
	third := addrs.Object{Provider: Name, Kind: route.Kind, Namespace: "shop", Name: "third"}
	if err := apply(t, second, changeAt(t, third, c, action.Create)); err != "" {
		t.Fatalf("a new group after the resumed one was given up: %s", err)
	}
}

// failClearGroup makes dataplane.ClearGroup fail until the test ends.
func failClearGroup(t *testing.T) (restore func()) {
	orig := clearGroup
	clearGroup = func(*dataplane.Dataplane, uint32) error { return errors.New("injected: map write failed") }
	restore = func() { clearGroup = orig }
	t.Cleanup(restore)
	return restore
}

// A group whose index cannot be cleared does not start, is not reported
// as there, and the same config applied again starts it.
func TestReviewFailedClearIsNotReportedApplied(t *testing.T) {
	p := agentWith(t, Config{})
	b := startBackend(t)
	cfg := testConfig([]string{b.addr.String()})
	restore := failClearGroup(t)
	if err := apply(t, p, change(t, cfg, action.Create)); !strings.Contains(err, "injected") {
		t.Fatalf("apply with a failing clear: %q", err)
	}
	if exists(p, rg) {
		t.Error("a group that never started is reported as applied")
	}
	restore()
	if err := apply(t, p, change(t, cfg, action.Create)); err != "" {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "the retried config routes", func() bool { return reaches(cfg.VIP, b) })
}

// A release whose routing cannot be removed is still reported (so the
// release is known not to have happened) and its retry removes it.
func TestReviewFailedReleaseIsRetried(t *testing.T) {
	p := agentWith(t, Config{Groups: 1})
	b := startBackend(t)
	cfg := testConfig([]string{b.addr.String()})
	if err := apply(t, p, change(t, cfg, action.Create)); err != "" {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "routed", func() bool { return reaches(cfg.VIP, b) })
	rel := providers.ObjectChange{Address: rg, Action: action.Update, Released: []addrs.Path{route.AttrConfig}}
	restore := failClearGroup(t)
	if err := apply(t, p, rel); !strings.Contains(err, "injected") {
		t.Fatalf("release with a failing clear: %q", err)
	}
	if !exists(p, rg) {
		t.Fatal("a release that failed is reported as done")
	}
	restore()
	if err := apply(t, p, rel); err != "" {
		t.Fatal(err)
	}
	if exists(p, rg) || reaches(cfg.VIP, b) {
		t.Fatal("the retried release left the group")
	}
	// Its index is free again: the agent's one group takes a new config.
	other := cfg
	other.VIP = "127.100.0.4:8080"
	if err := apply(t, p, changeAt(t, otherRG, other, action.Create)); err != "" {
		t.Fatal(err)
	}
}

// A backend's response headers are bounded as its body is.
func TestReviewScrapeBoundsHeaders(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	huge := strings.Repeat("x", 1<<20)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("huge") != "" {
			w.Header().Set("X-Padding", huge)
		}
		fmt.Fprint(w, "backend_queue_depth 1\nbackend_latency_p95_seconds 0.01\nbackend_error_ratio 0\n")
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	name := l.Addr().(*net.TCPAddr).AddrPort().String()
	p := New()
	cfg := testConfig([]string{name})
	scrape := func(path string) bool {
		cfg.Metrics.Path = path
		g := newGroup(p, rg, 0, cfg, change(t, cfg, action.Create).Attributes[route.AttrConfig])
		return g.scrapeOne(context.Background(), name).Missing
	}
	if scrape("/metrics") {
		t.Fatal("a plain exposition was not read")
	}
	if !scrape("/metrics?huge=1") {
		t.Error("a megabyte of response headers was read")
	}
	tr := p.client.Transport.(*http.Transport)
	if tr.IdleConnTimeout <= 0 || tr.MaxIdleConns <= 0 {
		t.Errorf("idle connections to backends are kept without bound: idle timeout %s, at most %d idle", tr.IdleConnTimeout, tr.MaxIdleConns)
	}
}

// One backend or one VIP spelled two ways (a port with a leading 0) is one
// address: a config naming a backend twice is refused (it would take two
// shares of the table), and a second group on the same VIP so spelled is
// refused as the VIP's second owner.
func TestReviewAddressesComparedParsed(t *testing.T) {
	p := configured(t)
	b := startBackend(t)
	port := b.addr.Port()
	twice := testConfig([]string{b.addr.String(), fmt.Sprintf("%s:0%d", b.addr.Addr(), port)})
	if err := apply(t, p, change(t, twice, action.Create)); !strings.Contains(err, "again: name each backend once") {
		t.Fatalf("a backend named twice: %q", err)
	}
	if err := apply(t, p, change(t, testConfig([]string{b.addr.String()}), action.Create)); err != "" {
		t.Fatal(err)
	}
	other := testConfig([]string{b.addr.String()})
	other.VIP = "127.100.0.1:08080"
	c := change(t, other, action.Create)
	c.Address.Name = "other-vip"
	if err := apply(t, p, c); !strings.Contains(err, "is already routed by") {
		t.Fatalf("the same VIP spelled another way: %q", err)
	}
}
