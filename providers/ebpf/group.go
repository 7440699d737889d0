//go:build linux

package ebpf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"

	"github.com/setpoint-dev/setpoint/bpf/dataplane"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/decide/routegroup"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/route"
)

// maxMetricsBody bounds one backend's exposition. Up to 1,024 backends are
// read every tick, so the bound is what a tick may read at worst (64 MiB):
// a backend whose exposition is larger is flagged as missing metrics and
// logged once; spec.metrics.path can name a smaller endpoint.
const maxMetricsBody = 64 << 10

// scrapeParallel bounds the scrapes of one tick in flight at once.
const scrapeParallel = 32

// group is one route group's loop.
type group struct {
	p *Provider
	// dp is the dataplane the group was started on: the loop never reads
	// p.dp, which Leave and Shutdown let go of.
	dp   *dataplane.Dataplane
	addr addrs.Object
	idx  uint32
	conf route.Config
	raw  values.Value
	// manager is the field manager the config was applied as, reported by
	// Read: the ownership mark of a config setpoint created.
	manager string
	vip     netip.AddrPort
	proto   uint32

	cancel context.CancelFunc
	done   chan struct{}

	mu        sync.Mutex
	st        routegroup.State
	last      routegroup.Decision
	field     route.Field
	epoch     uint32
	installed bool
	published []string // names of the table in the kernel, by index
	table     []uint32 // the kernel's table, by name index
	admission routegroup.Admission
	ids       map[string]uint32 // backend → dataplane id
	base      map[uint32]uint64 // counter value when the id was given
	rec       route.Recorder
	oversize  sync.Map // backends whose oversized metrics were logged
	err       string   // the last tick's failure, or ""
	// ticked is signalled after every tick (tests wait on it).
	ticked chan struct{}
}

func newGroup(p *Provider, a addrs.Object, idx uint32, conf route.Config, raw values.Value) *group {
	proto := uint32(dataplane.TCP)
	if conf.Proto == "udp" {
		proto = dataplane.UDP
	}
	return &group{p: p, dp: p.dp, addr: a, idx: idx, conf: conf, raw: raw, vip: netip.MustParseAddrPort(conf.VIP), proto: proto,
		ids: map[string]uint32{}, base: map[uint32]uint64{}, rec: route.Recorder{Namespace: a.Namespace, Name: a.Name, Every: recordEvery}, ticked: make(chan struct{}, 1)}
}

// inherit takes over a reconfigured group's state and table. g is
// already in p.groups, where Read finds it: its fields change under g.mu.
func (g *group) inherit(old *group) {
	old.mu.Lock()
	defer old.mu.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.st, g.epoch, g.published, g.table = old.st, old.epoch, old.published, old.table
	g.installed, g.ids, g.base, g.rec, g.admission = old.installed, old.ids, old.base, old.rec, old.admission
	if old.vip != g.vip || old.proto != g.proto {
		if old.installed {
			_ = g.dp.RemoveVIP(old.vip, old.proto)
		}
		g.installed = false
	}
	if g.st.Backends != nil && len(g.table) != g.conf.Params.Slots {
		// Another table size: the field starts again.
		g.st = routegroup.State{}
	}
}

// resume takes over what a pinned dataplane routed for this VIP before
// the agent restarted: the backends' ids and the active table's counts,
// so the first step moves at most Δmax from what connects see now.
func (g *group) resume() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	dp := g.dp
	bs, err := dp.Backends(g.idx)
	if err != nil {
		return err
	}
	act, err := dp.Active(g.idx)
	if err != nil {
		return err
	}
	epoch, err := dp.Epoch(g.idx)
	if err != nil {
		return err
	}
	counts := map[uint32]int{}
	for _, id := range act {
		counts[id]++
	}
	ids := make([]uint32, 0, len(bs))
	for id, ap := range bs {
		g.ids[ap.String()] = id
		ids = append(ids, id)
	}
	slices.Sort(ids)
	cs, err := dp.Counters(g.idx, ids)
	if err != nil {
		return err
	}
	for i, id := range ids {
		g.base[id] = cs[i]
	}
	g.epoch, g.installed = epoch, true
	if len(act) == g.conf.Params.Slots {
		for name, id := range g.ids {
			g.st.Backends = append(g.st.Backends, routegroup.Backend{Name: name, Slots: counts[id]})
		}
		slices.SortFunc(g.st.Backends, func(a, b routegroup.Backend) int { return strings.Compare(a.Name, b.Name) })
	}
	return nil
}

func (g *group) start() {
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel, g.done = cancel, make(chan struct{})
	go g.run(ctx)
}

// running says the loop was started and not halted.
func (g *group) running() bool { return g.cancel != nil }

// halt stops the loop and waits for it.
func (g *group) halt() {
	if g.cancel != nil {
		g.cancel()
		<-g.done
		g.cancel = nil
	}
}

// uninstall stops routing the VIP and forgets the group's tables.
func (g *group) uninstall() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.installed {
		return nil
	}
	// Still installed if either write fails, so a retry writes both again.
	if err := errors.Join(g.dp.RemoveVIP(g.vip, g.proto), clearGroup(g.dp, g.idx)); err != nil {
		return err
	}
	g.installed = false
	return nil
}

func (g *group) run(ctx context.Context) {
	defer close(g.done)
	seed := g.addr.String()
	for n := uint64(0); ; n++ {
		g.tick(ctx)
		t := time.NewTimer(routegroup.Jitter(seed, n, g.conf.Every, g.conf.Jitter))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// tick runs one step of the loop.
func (g *group) tick(ctx context.Context) {
	now := g.p.Clock()
	names := g.conf.Sorted()
	samples := g.scrape(ctx, names)
	g.mu.Lock()
	defer g.mu.Unlock()
	if ctx.Err() != nil {
		return
	}
	enforce := g.conf.Table == route.TableEnforce
	if g.installed {
		g.count(samples)
	} else {
		for i := range samples {
			samples[i].NoConnects = true
		}
	}
	prevRegime, prevHint := g.last.Regime, g.last.ScaleHint
	st, d := routegroup.Step(g.conf.Params, g.st, now, samples)
	g.st, g.last = st, d
	churn := 0.0
	var failed error
	if enforce {
		var err error
		if churn, err = g.project(d); err != nil {
			failed = fmt.Errorf("writing the route table: %w", err)
		}
	} else if g.installed {
		// Enforcement turned off: setpoint stops rewriting the VIP. The
		// backends' ids stay written, so enforcing again republishes
		// over them.
		if err := g.dp.RemoveVIP(g.vip, g.proto); err != nil {
			failed = fmt.Errorf("removing the VIP: %w", err)
		} else {
			g.installed = false
		}
	}
	g.fail(now, failed)
	g.field = route.FieldOf(d, st, churn)
	g.rec.Record(g.p.buf, now, d, g.st)
	if prevRegime != "" && d.Regime != prevRegime {
		g.p.emit(providers.Event{Now: now, Address: g.addr, Reason: fmt.Sprintf("regime %s → %s at mean pressure %.3g; admission %s", prevRegime, d.Regime, d.MeanPressure, d.Admission.Mode)})
	}
	if d.ScaleHint && !prevHint {
		g.p.emit(providers.Event{Now: now, Address: g.addr, Reason: fmt.Sprintf("scale hint: %d backend(s) in %s at mean pressure %.3g: rerouting cannot relieve it", len(d.Names), d.Regime, d.MeanPressure)})
	}
	select {
	case g.ticked <- struct{}{}:
	default:
	}
}

// count fills each sample's connects from the program's counters.
func (g *group) count(samples []routegroup.Sample) {
	ids := make([]uint32, len(samples))
	for i, s := range samples {
		id, ok := g.ids[s.Name]
		if !ok {
			samples[i].NoConnects = true
			continue
		}
		ids[i] = id
	}
	cs, err := g.dp.Counters(g.idx, ids)
	if err != nil {
		for i := range samples {
			samples[i].NoConnects = true
		}
		return
	}
	for i := range samples {
		if !samples[i].NoConnects {
			samples[i].Connects = cs[i] - g.base[ids[i]]
		}
	}
}

// project writes the decision to the kernel: new backends get ids, the
// table goes to the inactive side and flips (when it changed), admission
// and the heartbeat follow, and ids of backends gone are freed only after
// the flip, so no table in use names a reused id.
func (g *group) project(d routegroup.Decision) (float64, error) {
	dp := g.dp
	prevNames, prevTable := g.published, g.table
	// A group has dataplane.MaxBackends ids and its set as many backends,
	// so a set replaced (a blue/green switch, one backend of a full set)
	// can need more ids than are free while the departed still hold
	// theirs. Then a table over the backends that have ids is flipped
	// first, which frees the others; two such rounds always suffice.
	for round := 0; ; round++ {
		short, err := g.assignIDs(d.Names)
		if err != nil {
			return 0, err
		}
		if !short {
			break
		}
		if round == 2 {
			return 0, fmt.Errorf("no backend id left for %d backends", len(d.Names))
		}
		names, counts := g.interim(d)
		table := make([]uint32, g.conf.Params.Slots)
		if err := routegroup.Build(g.conf.Builder, names, counts, table); err != nil {
			return 0, err
		}
		if err := g.publish(names, table); err != nil {
			return 0, fmt.Errorf("an interim table freeing the ids of departed backends: %w", err)
		}
	}
	table := make([]uint32, g.conf.Params.Slots)
	if err := routegroup.Build(g.conf.Builder, d.Names, d.Slots, table); err != nil {
		return 0, err
	}
	churn := 0.0
	if !slices.Equal(table, g.table) || !slices.Equal(d.Names, g.published) || !g.installed {
		if prevTable != nil {
			churn = routegroup.Churn(prevNames, prevTable, d.Names, table)
		}
		if err := g.publish(d.Names, table); err != nil {
			return 0, err
		}
	}
	if d.Admission != g.admission || !g.installed {
		mode := map[routegroup.Mode]int{routegroup.Normal: dataplane.AdmitNormal, routegroup.Soft: dataplane.AdmitSoft, routegroup.Hard: dataplane.AdmitHard}[d.Admission.Mode]
		if err := dp.SetControl(g.idx, dataplane.Control{Mode: mode, Shed: d.Admission.Shed, Budget: g.conf.Params.HardBudget, Burst: g.conf.Burst, Failsafe: g.conf.Failsafe}); err != nil {
			return churn, err
		}
		g.admission = d.Admission
	}
	if err := dp.Heartbeat(g.idx, dataplane.Monotonic()); err != nil {
		return churn, err
	}
	if !g.installed {
		// The VIP last: no connect is rewritten before a table is there.
		if err := dp.SetVIP(g.idx, g.vip, g.proto); err != nil {
			return churn, err
		}
		g.installed = true
	}
	return churn, nil
}

// assignIDs gives each of names that has none a free id, writing its
// backend; it says whether some were left without one.
func (g *group) assignIDs(names []string) (short bool, err error) {
	// Most ticks bring no new backend: nothing to allocate then.
	if !slices.ContainsFunc(names, func(n string) bool { _, ok := g.ids[n]; return !ok }) {
		return false, nil
	}
	used := make([]bool, dataplane.MaxBackends)
	for _, id := range g.ids {
		used[id] = true
	}
	next := uint32(0)
	for _, name := range names {
		if _, ok := g.ids[name]; ok {
			continue
		}
		for next < dataplane.MaxBackends && used[next] {
			next++
		}
		if next >= dataplane.MaxBackends {
			short = true
			continue
		}
		id := next
		if err := g.dp.SetBackend(g.idx, id, netip.MustParseAddrPort(name)); err != nil {
			return false, err
		}
		cs, err := g.dp.Counters(g.idx, []uint32{id})
		if err != nil {
			return false, err
		}
		g.ids[name], g.base[id], used[id] = id, cs[0], true
	}
	return short, nil
}

// interim is the table flipped to while ids are short: the decision's
// backends that have ids, their slot counts scaled to the whole table; or,
// when none has one yet, the departed backend of the lowest id alone (the
// table in use routes to it already), so every other id frees up.
func (g *group) interim(d routegroup.Decision) ([]string, []int) {
	var names []string
	var weights []float64
	for i, name := range d.Names {
		if _, ok := g.ids[name]; ok {
			names = append(names, name)
			weights = append(weights, float64(d.Slots[i]))
		}
	}
	if len(names) == 0 {
		first := ""
		for name, id := range g.ids {
			if first == "" || id < g.ids[first] {
				first = name
			}
		}
		return []string{first}, []int{g.conf.Params.Slots}
	}
	return names, routegroup.Apportion(weights, g.conf.Params.Slots)
}

// publish writes table (indexes into names, which all have ids) to the
// inactive side with the failsafe's healthy list, flips it, and frees the
// ids of backends it does not name.
func (g *group) publish(names []string, table []uint32) error {
	byIndex := make([]uint32, len(names))
	for i, name := range names {
		byIndex[i] = g.ids[name]
	}
	kernel := make([]uint32, len(table))
	for i, v := range table {
		kernel[i] = byIndex[v]
	}
	flagged := map[string]bool{}
	for _, b := range g.st.Backends {
		flagged[b.Name] = b.Flagged
	}
	var healthy []uint32
	for i, name := range names {
		if !flagged[name] {
			healthy = append(healthy, byIndex[i])
		}
	}
	if len(healthy) == 0 {
		healthy = byIndex
	}
	f, err := g.dp.Publish(g.idx, kernel, healthy)
	if err != nil {
		return err
	}
	g.epoch, g.table, g.published = f.Epoch, table, slices.Clone(names)
	// Ids of backends the flipped table does not name are free now.
	named := make(map[string]bool, len(names))
	for _, name := range names {
		named[name] = true
	}
	for name, id := range g.ids {
		if !named[name] {
			delete(g.ids, name)
			delete(g.base, id)
			_ = g.dp.SetBackend(g.idx, id, netip.AddrPort{})
		}
	}
	return nil
}

// scrape reads every backend's metrics, at most scrapeParallel at once,
// within most of a tick.
func (g *group) scrape(ctx context.Context, names []string) []routegroup.Sample {
	timeout := routegroup.ScrapeTimeout(g.conf.Every)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out := make([]routegroup.Sample, len(names))
	sem := make(chan struct{}, scrapeParallel)
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i] = g.scrapeOne(ctx, name)
		}()
	}
	wg.Wait()
	return out
}

func (g *group) scrapeOne(ctx context.Context, name string) routegroup.Sample {
	s := routegroup.Sample{Name: name, Missing: true}
	ap := netip.MustParseAddrPort(name)
	port := ap.Port()
	if g.conf.Metrics.Port != 0 {
		port = uint16(g.conf.Metrics.Port)
	}
	url := "http://" + netip.AddrPortFrom(ap.Addr(), port).String() + g.conf.Metrics.Path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return s
	}
	resp, err := g.p.client.Do(req)
	if err != nil {
		return s
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return s
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetricsBody+1))
	if err != nil {
		return s
	}
	if len(body) > maxMetricsBody {
		if _, warned := g.oversize.LoadOrStore(name, true); !warned {
			g.p.log.Warn("a backend's metrics exceed what a tick reads: its pressure holds", "group", g.addr.String(), "backend", name, "limit", maxMetricsBody, "path", g.conf.Metrics.Path)
		}
		return s
	}
	want := map[string]*float64{}
	m := g.conf.Metrics
	p := g.conf.Params
	// A metric whose pressure weight is 0 is not needed.
	if p.WQueue > 0 {
		want[m.Queue] = &s.Queue
	}
	if p.WLatency > 0 {
		want[m.Latency] = &s.Latency
	}
	if p.WErrors > 0 {
		want[m.ErrorRate] = &s.ErrorRate
	}
	found := parseGauges(body, resp.Header.Get("Content-Type"), want)
	s.Missing = found < len(want)
	return s
}

// parseGauges sets each wanted metric's first sample; it returns how many
// were found.
func parseGauges(body []byte, ctype string, want map[string]*float64) int {
	tp, err := textparse.New(body, ctype, nil, textparse.ParserOptions{})
	if err != nil && tp == nil {
		return 0
	}
	seen := map[string]bool{}
	var lb labels.Labels
	for {
		entry, err := tp.Next()
		if err != nil {
			break
		}
		if entry != textparse.EntrySeries {
			continue
		}
		_, _, v := tp.Series()
		tp.Labels(&lb)
		name := lb.Get("__name__")
		if dst, ok := want[name]; ok && !seen[name] && !math.IsNaN(v) {
			*dst, seen[name] = v, true
		}
		if len(seen) == len(want) {
			break // the rest of the exposition is not needed
		}
	}
	return len(seen)
}

// fail records the tick's error, so Read shows it and an Event says when
// it starts or changes (a log line alone reaches nobody watching a plan).
func (g *group) fail(now time.Time, err error) {
	why := ""
	if err != nil {
		why = err.Error()
		g.p.log.Error("route group tick", "group", g.addr.String(), "err", err)
	}
	if why == g.err {
		return
	}
	g.err = why
	if why == "" {
		g.p.emit(providers.Event{Now: now, Address: g.addr, Reason: "the loop writes its table again"})
		return
	}
	g.p.emit(providers.Event{Now: now, Address: g.addr, Reason: why})
}

// failing is the last tick's error, or "".
func (g *group) failing() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

// observed is the object Read reports.
func (g *group) observed() map[addrs.Path]values.Value {
	g.mu.Lock()
	defer g.mu.Unlock()
	return route.Observed(g.raw, g.epoch, g.last, g.st.Tick, g.field)
}
