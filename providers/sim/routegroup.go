package sim

import (
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/decide/routegroup"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/route"
)

// The route-group model. A group's VIP receives its share of the trace,
// request by request. Until a RouteGroup's config enforces a table, each
// request goes to one of the group's backends uniformly at random (as
// kube-proxy picks an endpoint); once one does, to a backend drawn with
// probability slots/size from the slot counts of the table in force, as
// the dataplane's hash of a socket over the table's slots does. The table
// itself is not built: both builders give each backend exactly its count
// of slots, and a Maglev build of 65,537 slots every 200 ms tick would
// cost more than the rest of the world.
//
// Each backend is a fluid queue between ticks: it serves up to its
// capacity per second, first come first served, the rest wait, and what
// would wait past MaxWait fails. Of what it serves, a share fails at its
// error rate. Its gauges are what an instrumented backend would export,
// and what the field reads at each tick: the queue, the p95 latency as
// its base p95 plus the queue's wait (queue / capacity), and the error
// ratio over the group's error window. The field runs at the config's
// tick, jittered as the eBPF agent's is, on the same pure Step.

// KindRouteGroup is a route group's object, as the eBPF provider serves it.
const KindRouteGroup = route.Kind

// KindRouteReport is the object through which the world hands out a
// route group's RouteReport (attribute AttrReport).
const KindRouteReport = "SimRouteGroupReport"

// DefaultErrorWindow is what a backend's error-ratio gauge is taken over
// when the config gives no window, and MaxErrorWindow the most it may be.
// A ratio over a few seconds of a backend that gets little traffic is
// mostly 0, then one error in a handful: the field reads a backend the
// table starved as healthy, sends it traffic, and takes it back. A real
// backend's gauge is a rate over a window too; the window is the config's
// to say.
const (
	DefaultErrorWindow = spec.DefaultSimErrorWindow
	MaxErrorWindow     = spec.MaxSimErrorWindow
)

// Flap accounting on each backend's slot count, tick by tick: a reversal
// is a move of at least flapBand of the table in one direction after one
// of at least as much in the other; a flap is a reversal within flapWithin
// of the backend's previous one. The field following a degrade and its
// end is one reversal, the way back, minutes after the first move;
// flapping is reversals seconds apart.
const (
	flapBand   = 0.05
	flapWithin = 60 * time.Second
)

// Phases of a route group's report: before, during and after its
// backends' degrade windows (from the first one's start to the last one's
// end), or the whole run when none degrades.
const (
	PhaseBefore = "before"
	PhaseDuring = "during"
	PhaseAfter  = "after"
	PhaseRun    = "run"
)

type simGroup struct {
	w        *World
	cfg      spec.SimRouteGroup
	vip      netip.AddrPort
	src      *source
	rng      *rand.Rand
	backends []*simBackend
	byAddr   map[string]int // normalised address → index in backends
	buf      []arrival
	// d0 and d1 bound the degrade windows of every backend (seconds);
	// d1 is 0 when none degrades.
	d0, d1 int

	// The config applied, nil before the first and after a release.
	conf    *route.Config
	raw     values.Value
	seed    string // the address as applied: it seeds the jitter
	names   []string
	members []int // the backend of each of names, by index in backends
	manager string
	configs int64 // configs applied: the object's generation
	st      routegroup.State
	last    routegroup.Decision
	field   route.Field
	epoch   uint32
	// The table in force (enforce only): slot counts and the backend each
	// is of, by index in backends.
	installed bool
	inForce   []int
	forceIdx  []int
	forceSize int
	admission routegroup.Admission
	tokens    float64 // hard admission's bucket
	tokensAt  float64 // seconds: when the bucket was last refilled
	n         uint64  // ticks since the config was applied: the jitter's index
	next      time.Duration
	rec       route.Recorder

	rep routeTally
}

type simBackend struct {
	cfg     spec.SimBackend
	name    string // the address, normalised
	windows []degrade
	queue   int
	credit  float64 // service not yet used, at most one request's worth
	// connects counts the requests routed to it through the table: the
	// dataplane's counter.
	connects uint64
	arrived  int // in the current segment
	// win holds the requests finished and failed in each second of the
	// error window, by second modulo its length.
	win []struct{ req, fail int }
	// zigzag of the slot count, for flaps
	zz zigzag
}

type degrade struct {
	from, until int // seconds
	latency     float64
	capacity    float64
	errRate     float64 // -1: its own
}

// newGroup builds a route group over tr (the world's trace: a group has
// the config's file and window) with its own seeded draws.
func newGroup(w *World, cfg spec.SimRouteGroup, tr *Trace) (*simGroup, error) {
	name := cfg.Namespace + "/" + cfg.Name
	vip, err := netip.ParseAddrPort(cfg.VIP)
	if err != nil || !vip.Addr().Is4() || vip.Port() == 0 {
		return nil, fmt.Errorf("sim route group %s: VIP %q: want an IPv4 address and a port, like 127.100.0.1:8080", name, cfg.VIP)
	}
	if len(cfg.Backends) == 0 || len(cfg.Backends) > MaxGroupBackends {
		return nil, fmt.Errorf("sim route group %s: %d backends: want 1 to %d", name, len(cfg.Backends), MaxGroupBackends)
	}
	own := w.cfg.TraceForGroup(cfg)
	k, thin := own.RateScale, own.Thin
	if k == 0 {
		k = 1
	}
	if thin == 0 {
		thin = 1
	}
	h := fnv.New64a()
	h.Write([]byte(KindRouteGroup + "/" + name))
	seed := uint64(w.cfg.Seed) ^ h.Sum64()
	shift, err := own.ShiftSeconds(DefaultShift)
	if err != nil {
		return nil, fmt.Errorf("sim route group %s: %w", name, err)
	}
	src, err := newSource(tr, own.Scaling, own.ServiceTimes, k, thin, cfg.Share, shift, seed)
	if err != nil {
		return nil, fmt.Errorf("sim route group %s: %w", name, err)
	}
	g := &simGroup{w: w, cfg: cfg, vip: vip, src: src, rng: rand.New(rand.NewPCG(seed, 0x7a61)), byAddr: map[string]int{},
		rec: route.Recorder{Namespace: cfg.Namespace, Name: cfg.Name, Every: routeRecordEvery}}
	window := cfg.ErrorWindow.D()
	if window == 0 {
		window = DefaultErrorWindow
	}
	if window < spec.MinSimErrorWindow || window > MaxErrorWindow {
		return nil, fmt.Errorf("sim route group %s: errorWindow %s: want %s to %s", name, window, spec.MinSimErrorWindow, MaxErrorWindow)
	}
	g.d0 = math.MaxInt
	for i, bc := range cfg.Backends {
		ap, err := netip.ParseAddrPort(bc.Address)
		if err != nil || !ap.Addr().Is4() || ap.Port() == 0 {
			return nil, fmt.Errorf("sim route group %s: backend %q: want an IPv4 address and a port, like 127.0.0.1:9001", name, bc.Address)
		}
		if _, dup := g.byAddr[ap.String()]; dup {
			return nil, fmt.Errorf("sim route group %s: backend %s twice", name, ap)
		}
		if !(bc.Capacity > 0) || bc.Capacity > MaxBackendCapacity {
			return nil, fmt.Errorf("sim route group %s: backend %s: capacity %g: want more than 0, at most %g requests a second", name, ap, bc.Capacity, float64(MaxBackendCapacity))
		}
		if bc.ErrorRate < 0 || bc.ErrorRate > 1 || bc.Latency < 0 {
			return nil, fmt.Errorf("sim route group %s: backend %s: error rate %s, latency %s: want 0%% to 100%% and a latency of 0 or more", name, ap, bc.ErrorRate, bc.Latency)
		}
		b := &simBackend{cfg: bc, name: ap.String(), win: make([]struct{ req, fail int }, secs(window))}
		prev := -1
		for _, d := range bc.Degrade {
			from, until := secs(d.From.D()), secs(d.Until.D())
			if until <= from || from < prev {
				return nil, fmt.Errorf("sim route group %s: backend %s: degrade from %s until %s: want windows that end after they start, in order, not overlapping", name, ap, d.From, d.Until)
			}
			if d.Latency < 1 || d.Latency > 1000 || d.Capacity < 0 || d.Capacity > 1 || (d.ErrorRate != nil && (*d.ErrorRate < 0 || *d.ErrorRate > 1)) {
				return nil, fmt.Errorf("sim route group %s: backend %s: degrade from %s: latency ×%g, capacity ×%g: want a latency factor of 1 to 1000 and a capacity factor of 0 to 1", name, ap, d.From, d.Latency, d.Capacity)
			}
			dg := degrade{from: from, until: until, latency: d.Latency, capacity: d.Capacity, errRate: -1}
			if d.ErrorRate != nil {
				dg.errRate = float64(*d.ErrorRate)
			}
			b.windows = append(b.windows, dg)
			prev = until
			g.d0, g.d1 = min(g.d0, from), max(g.d1, until)
		}
		g.byAddr[b.name] = i
		g.backends = append(g.backends, b)
	}
	if g.d1 == 0 {
		g.d0 = 0
	}
	g.rep = newRouteTally(len(g.backends), routeStep(len(tr.Rate), len(g.backends)))
	return g, nil
}

// routeRecordEvery is the least virtual time between two records of a
// group's setpoint_routegroup_* series, as the eBPF agent records them.
// A record is 4 samples and 4 more a backend: at a 10 ms tick, one a tick
// is some 26,000 samples a virtual second over 64 backends, which the
// provider's buffer and the embedded store each keep for half an hour.
const routeRecordEvery = time.Second

// MaxGroupBackends bounds a sim route group's backends (the schema's).
const MaxGroupBackends = 64

// MaxBackendCapacity bounds a backend's requests per second.
const MaxBackendCapacity = 1_000_000

// model is the backend's latency factor, capacity (requests a second) and
// error rate in second s.
func (b *simBackend) model(s int) (lat, capacity, errRate float64) {
	lat, capacity, errRate = 1, b.cfg.Capacity, float64(b.cfg.ErrorRate)
	for _, d := range b.windows {
		if s >= d.from && s < d.until {
			lat, capacity = d.latency, capacity*d.capacity
			if d.errRate >= 0 {
				errRate = d.errRate
			}
			break
		}
	}
	return lat, capacity, errRate
}

// latency is the backend's p95 gauge in second s: its base p95 and the
// wait of a request joining the queue now.
func (b *simBackend) latency(s int) float64 {
	lat, capacity, _ := b.model(s)
	base := b.cfg.Latency.D().Seconds() * lat
	if capacity <= 0 {
		return base + MaxWait
	}
	return base + math.Min(float64(b.queue)/capacity, MaxWait)
}

// errorRatio is the failed share of the requests it finished in the
// error window (0 without any).
func (b *simBackend) errorRatio() float64 {
	req, fail := 0, 0
	for _, c := range b.win {
		req += c.req
		fail += c.fail
	}
	if req == 0 {
		return 0
	}
	return float64(fail) / float64(req)
}

// advance runs the backend's queue over dt seconds of second s with the
// requests routed to it in that time; it returns those that failed.
func (b *simBackend) advance(s int, dt float64, rng *rand.Rand) int {
	_, capacity, errRate := b.model(s)
	avail := b.credit + capacity*dt
	q := b.queue + b.arrived
	served := min(q, int(avail))
	// An idle backend banks no more than one request's worth of service.
	b.credit = math.Min(avail-float64(served), 1)
	q -= served
	drop := max(0, q-int(capacity*MaxWait))
	b.queue = q - drop
	fail := binomial(rng, served, errRate) + drop
	c := &b.win[s%len(b.win)]
	c.req += served + drop
	c.fail += fail
	return fail
}

// binomial draws the failures among n requests failing with probability
// p each: one draw per request for few, a normal approximation for many.
func binomial(rng *rand.Rand, n int, p float64) int {
	switch {
	case n <= 0 || p <= 0:
		return 0
	case p >= 1:
		return n
	case n <= 64:
		k := 0
		for range n {
			if rng.Float64() < p {
				k++
			}
		}
		return k
	}
	mean := float64(n) * p
	k := int(math.Round(mean + math.Sqrt(mean*(1-p))*rng.NormFloat64()))
	return max(0, min(n, k))
}

// step runs second s: its arrivals in time order, cut into segments at
// the field's ticks; each segment's requests are admitted and routed by
// the table in force, the backends' queues run over it, and at its end
// the field ticks.
func (g *simGroup) step(s int) {
	for _, b := range g.backends {
		b.win[s%len(b.win)] = struct{ req, fail int }{}
	}
	g.buf = g.src.second(s, g.buf[:0])
	arr := g.buf
	t0, end := float64(s), time.Duration(s+1)*time.Second
	for {
		tick := g.conf != nil && g.next < end
		t1 := float64(s + 1)
		if tick {
			t1 = math.Max(t0, g.next.Seconds())
		}
		j := 0
		for j < len(arr) && arr[j].at < t1 {
			j++
		}
		g.segment(s, arr[:j], t0, t1)
		arr, t0 = arr[j:], t1
		if !tick {
			break
		}
		g.tick(s)
	}
	g.rep.endSecond(s, g)
}

// segment admits and routes arrivals, then runs every backend's queue
// from t0 to t1.
func (g *simGroup) segment(s int, arr []arrival, t0, t1 float64) {
	r := &g.rep
	ph := r.phase(s, g)
	for _, a := range arr {
		r.arrived++
		if g.installed && !g.admit(a.at) {
			continue
		}
		i := g.route()
		g.backends[i].arrived++
		r.routed[ph][i]++
		r.stepRouted[i]++
		if g.installed {
			g.backends[i].connects++
		}
	}
	for _, b := range g.backends {
		fail := b.advance(s, t1-t0, g.rng)
		r.failed[ph] += int64(fail)
		r.latSum[ph] += float64(b.arrived) * b.latency(s)
		b.arrived = 0
	}
}

// admit says whether a new request at `at` passes admission.
func (g *simGroup) admit(at float64) bool {
	switch g.admission.Mode {
	case routegroup.Soft:
		if g.rng.Float64() < g.admission.Shed {
			g.rep.shed++
			return false
		}
	case routegroup.Hard:
		burst := float64(g.conf.Burst)
		if burst == 0 {
			burst = math.Max(1, math.Floor(g.conf.Params.HardBudget))
		}
		g.tokens = math.Min(burst, g.tokens+(at-g.tokensAt)*g.conf.Params.HardBudget)
		g.tokensAt = math.Max(g.tokensAt, at)
		if g.tokens < 1 {
			g.rep.refused++
			return false
		}
		g.tokens--
	}
	return true
}

// route picks a request's backend: by the table in force, or evenly.
func (g *simGroup) route() int {
	if !g.installed || g.forceSize == 0 {
		return g.rng.IntN(len(g.backends))
	}
	slot := g.rng.IntN(g.forceSize)
	for k, c := range g.inForce {
		if slot < c {
			return g.forceIdx[k]
		}
		slot -= c
	}
	return g.forceIdx[len(g.forceIdx)-1]
}

// tick runs one step of the field at g.next, inside second s, and
// schedules the next.
func (g *simGroup) tick(s int) {
	conf, idx := g.conf, g.members
	now := g.w.trace.Start.Add(g.next)
	samples := make([]routegroup.Sample, len(g.names))
	for k, name := range g.names {
		b := g.backends[idx[k]]
		samples[k] = routegroup.Sample{Name: name, Queue: float64(b.queue), Latency: b.latency(s), ErrorRate: b.errorRatio(),
			Connects: b.connects, NoConnects: !g.installed}
	}
	prev := g.last
	st, d := routegroup.Step(conf.Params, g.st, now, samples)
	g.st, g.last = st, d
	churn := 0.0
	if conf.Table == route.TableEnforce {
		if !g.installed || !slices.Equal(d.Slots, g.inForce) || !slices.Equal(idx, g.forceIdx) {
			// What the counts moved: the sim builds no table, so the
			// owners Maglev moves beyond them are not counted.
			if g.installed {
				churn = float64(d.Moved) / float64(conf.Params.Slots)
			}
			g.inForce, g.forceIdx, g.forceSize = slices.Clone(d.Slots), idx, conf.Params.Slots
			g.epoch++
		}
		if !g.installed || d.Admission != g.admission {
			if d.Admission.Mode == routegroup.Hard && g.admission.Mode != routegroup.Hard {
				// The bucket starts full: admit clamps it to the burst.
				g.tokens, g.tokensAt = math.Inf(1), g.next.Seconds()
			}
			g.admission = d.Admission
		}
		g.installed = true
	} else {
		g.uninstall()
	}
	g.field = route.FieldOf(d, st, churn)
	if g.w.sink != nil {
		g.rec.Record(g.w.sink, now, d, st)
	}
	g.rep.tick(g, prev, d, idx)
	g.next += routegroup.Jitter(g.seed, g.n, conf.Every, conf.Jitter)
	g.n++
}

// uninstall stops routing by a table: requests split evenly again.
func (g *simGroup) uninstall() {
	g.installed, g.inForce, g.forceIdx, g.forceSize = false, nil, nil, 0
	g.admission = routegroup.Admission{}
}

// configure applies a checked config at the world's second s and reports
// whether anything moved. Like the agent given a new config, the field
// keeps its state (unless the table's size changed) and ticks at once.
func (g *simGroup) configure(a providers.Address, manager string, conf route.Config, raw values.Value, s int) bool {
	if g.conf != nil && g.raw.Equal(raw) {
		moved := g.manager != manager
		g.manager = manager
		return moved
	}
	if g.conf == nil || g.conf.Params.Slots != conf.Params.Slots {
		g.st, g.last, g.field = routegroup.State{}, routegroup.Decision{}, route.Field{}
	}
	g.conf, g.raw, g.seed, g.manager = &conf, raw, a.String(), manager
	g.names = conf.Sorted()
	g.members = make([]int, len(g.names))
	for k, name := range g.names {
		// Checked: a backend of the group, maybe written otherwise (a
		// port with a leading 0).
		g.members[k] = g.byAddr[netip.MustParseAddrPort(name).String()]
	}
	g.configs++
	g.n, g.next = 0, time.Duration(s)*time.Second
	if g.rep.configuredAt < 0 {
		g.rep.configuredAt = s
	}
	g.rep.table = conf.Table
	return true
}

// release forgets the config: the field stops, the table goes.
func (g *simGroup) release() bool {
	if g.conf == nil {
		return false
	}
	g.conf, g.raw, g.manager = nil, values.Value{}, ""
	g.st, g.last, g.field = routegroup.State{}, routegroup.Decision{}, route.Field{}
	g.uninstall()
	return true
}

// object is the group's object as Read reports it: absent until a config
// is applied.
func (g *simGroup) object(a providers.Address) providers.Object {
	o := providers.Object{Address: a}
	if g.conf == nil {
		return o
	}
	o.Exists, o.Generation = true, g.configs
	o.Attributes = route.Observed(g.raw, g.epoch, g.last, g.st.Tick, g.field)
	o.Managers = map[addrs.Path]string{route.AttrConfig: g.manager}
	return o
}

// group finds a route group by namespace and name.
func (w *World) group(namespace, name string) *simGroup {
	for _, g := range w.groups {
		if g.cfg.Namespace == namespace && g.cfg.Name == name {
			return g
		}
	}
	return nil
}

// groupNames lists the world's route groups, for messages.
func (w *World) groupNames() string {
	if len(w.groups) == 0 {
		return "none"
	}
	out := make([]string, len(w.groups))
	for i, g := range w.groups {
		out[i] = fmt.Sprintf("%s/%s on %s", g.cfg.Namespace, g.cfg.Name, g.vip)
	}
	return strings.Join(out, ", ")
}

// routeChange is a checked change of a route group's config.
type routeChange struct {
	g       *simGroup
	release bool
	conf    route.Config
	raw     values.Value
}

// checkRoute checks a change of a route group's config as the eBPF agent
// would, and against the world: the group must be one of the world's,
// its VIP the group's, its backends among the group's.
func (w *World) checkRoute(p *pending, res providers.ObjectResult) (*pending, providers.ObjectResult) {
	c := p.c
	fail := func(format string, a ...any) (*pending, providers.ObjectResult) {
		res.Err = fmt.Sprintf(format, a...)
		return nil, res
	}
	g := w.group(c.Address.Namespace, c.Address.Name)
	if g == nil {
		return fail("no sim route group %s/%s: the sim world's route groups are %s", c.Address.Namespace, c.Address.Name, w.groupNames())
	}
	// In path order, so the refusal names the same path every time.
	for _, path := range slices.SortedFunc(maps.Keys(c.Attributes), comparePaths) {
		if path != route.AttrConfig {
			return fail("%s: a RouteGroup takes only %s (the rest is what its loop reports)", path, route.AttrConfig)
		}
	}
	v, set := c.Attributes[route.AttrConfig]
	if c.Action == action.Delete || (!set && slices.Contains(c.Released, route.AttrConfig)) {
		p.route = &routeChange{g: g, release: true}
		return p, res
	}
	switch c.Action {
	case action.Create:
	case action.Update, action.NoOp:
		if g.conf == nil {
			return fail("no such object: route group %s/%s has no config yet (create it)", c.Address.Namespace, c.Address.Name)
		}
	default:
		return fail("unknown action %s", c.Action)
	}
	if !set || v.Type() != values.Structured {
		return fail("%s: want the route group's structured config", route.AttrConfig)
	}
	conf, err := route.Parse(v.JSON())
	if err != nil {
		return fail("%s: %v", route.AttrConfig, err)
	}
	if vip := netip.MustParseAddrPort(conf.VIP); vip != g.vip {
		for _, o := range w.groups {
			if o.vip == vip {
				return fail("VIP %s is sim route group %s/%s's, not %s/%s's (on %s)", vip, o.cfg.Namespace, o.cfg.Name, g.cfg.Namespace, g.cfg.Name, g.vip)
			}
		}
		return fail("VIP %s is not in the sim world: sim route group %s/%s is on %s", vip, g.cfg.Namespace, g.cfg.Name, g.vip)
	}
	// (Each backend once, however spelled: route.Parse checked it.)
	for _, e := range conf.Endpoints {
		ap := netip.MustParseAddrPort(e).String()
		if _, ok := g.byAddr[ap]; !ok {
			have := make([]string, len(g.backends))
			for i, b := range g.backends {
				have[i] = b.name
			}
			return fail("backend %s is not one of sim route group %s/%s's backends (%s)", e, g.cfg.Namespace, g.cfg.Name, strings.Join(have, ", "))
		}
	}
	p.route = &routeChange{g: g, conf: conf, raw: v}
	p.after = map[addrs.Path]values.Value{route.AttrConfig: v}
	res.After = p.after
	return p, res
}

// commitRoute makes a checked route change take effect at the world's
// second.
func (w *World) commitRoute(p *pending) bool {
	r := p.route
	if r.release {
		return r.g.release()
	}
	return r.g.configure(p.c.Address, p.c.Manager, r.conf, r.raw, w.sec)
}
