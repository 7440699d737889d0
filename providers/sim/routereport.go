package sim

import (
	"math"
	"time"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/decide/routegroup"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
)

// RouteReport is what the world measured of one route group: where its
// requests went, what the field did, and how the backends answered.
// Shares and latencies are -1 where there were no requests.
type RouteReport struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	VIP       string `json:"vip"`
	// Table is the enforcement of the last config applied ("" if none
	// was), ConfiguredAt the second the first was applied (-1: never).
	Table        string `json:"table"`
	ConfiguredAt int    `json:"configuredAt"`
	Seconds      int    `json:"seconds"`
	Arrived      int64  `json:"arrived"`
	// Shed (soft) and Refused (hard) by admission; Failed by the backends
	// (their errors, and requests that waited too long).
	Shed    int64 `json:"shed"`
	Refused int64 `json:"refused"`
	Failed  int64 `json:"failed"`
	// The field: ticks run, slots moved (half the sum of the counts'
	// changes), table flips, regime changes and ticks in each regime,
	// and ticks with a scale hint.
	Ticks         int            `json:"ticks"`
	SlotsMoved    int64          `json:"slotsMoved"`
	Flips         uint32         `json:"flips"`
	RegimeChanges int            `json:"regimeChanges"`
	RegimeTicks   map[string]int `json:"regimeTicks"`
	ScaleHints    int            `json:"scaleHintTicks"`
	// Phases are before, during and after the backends' degrade windows
	// (from the config's first apply), or the whole run.
	Phases   []RoutePhase    `json:"phases"`
	Backends []BackendReport `json:"backends"`
	// Step is the seconds between points of each backend's share.
	Step int `json:"step"`
}

// RoutePhase is one phase's requests: routed, failed and their mean
// latency (seconds).
type RoutePhase struct {
	Name        string  `json:"name"`
	From        int     `json:"from"` // seconds from the trace's start
	Until       int     `json:"until"`
	Requests    int64   `json:"requests"`
	Failed      int64   `json:"failed"`
	MeanLatency float64 `json:"meanLatency"`
}

// BackendReport is one backend's part: its share of the requests routed
// in each phase (as Phases), its share over time (every Step seconds),
// and its slot count's reversals and flaps.
type BackendReport struct {
	Address   string          `json:"address"`
	Degrade   []DegradeWindow `json:"degrade,omitempty"`
	Share     []float64       `json:"share"`
	Points    []float64       `json:"points"`
	MinSlots  int             `json:"minSlots"`
	MaxSlots  int             `json:"maxSlots"`
	Reversals int             `json:"reversals"`
	Flaps     int             `json:"flaps"`
}

// DegradeWindow is a backend's degrade window as configured; ErrorRate
// is -1 when it keeps its own.
type DegradeWindow struct {
	From      int     `json:"from"`
	Until     int     `json:"until"`
	Latency   float64 `json:"latency"`
	Capacity  float64 `json:"capacity"`
	ErrorRate float64 `json:"errorRate"`
}

// routeTally accumulates a group's report. Requests are tallied by phase
// and by whether a config was in effect, so the phases of a group
// configured later start from its config.
type routeTally struct {
	configuredAt int
	table        string
	seconds      int
	arrived      int64
	shed         int64
	refused      int64
	// by row: configured × 3 + phase
	routed [6][]int64
	failed [6]int64
	latSum [6]float64

	step       int
	stepRouted []int64
	points     [][]float64

	ticks         int
	moved         int64
	regimeChanges int
	regimeTicks   map[string]int
	scaleHints    int
	slotsSeen     []bool
	minSlots      []int
	maxSlots      []int
}

// maxRoutePoints bounds the points of a route report, over all its
// backends, so the report stays far below a structured value's bound.
const maxRoutePoints = 12_000

// routeStep is the step between a route report's points for a trace of
// d seconds and n backends.
func routeStep(d, n int) int {
	most := max(1, min(MaxPoints, maxRoutePoints/n))
	return max(ScrapeInterval, (d+most-1)/most)
}

func newRouteTally(backends, step int) routeTally {
	r := routeTally{configuredAt: -1, step: step, stepRouted: make([]int64, backends), points: make([][]float64, backends),
		regimeTicks: map[string]int{}, slotsSeen: make([]bool, backends), minSlots: make([]int, backends), maxSlots: make([]int, backends)}
	for i := range r.routed {
		r.routed[i] = make([]int64, backends)
	}
	return r
}

// phase is the tally row of second s.
func (r *routeTally) phase(s int, g *simGroup) int {
	row := 0
	if g.conf != nil {
		row = 3
	}
	switch {
	case g.d1 == 0 || s < g.d0:
		return row
	case s < g.d1:
		return row + 1
	}
	return row + 2
}

// endSecond closes second s: a point of each backend's share every step.
func (r *routeTally) endSecond(s int, g *simGroup) {
	r.seconds++
	if (s+1)%r.step != 0 || len(r.points[0]) >= MaxPoints {
		return
	}
	var total int64
	for _, n := range r.stepRouted {
		total += n
	}
	for i, n := range r.stepRouted {
		v := -1.0
		switch {
		case total > 0:
			v = math.Round(float64(n)/float64(total)*1e4) / 1e4
		case len(r.points[i]) > 0:
			// No request this step: the split is as it was.
			v = r.points[i][len(r.points[i])-1]
		}
		r.points[i] = append(r.points[i], v)
		r.stepRouted[i] = 0
	}
}

// tick tallies one tick of the field: d after prev, with idx the backend
// of each of d's names.
func (r *routeTally) tick(g *simGroup, prev, d routegroup.Decision, idx []int) {
	r.ticks++
	// A first decision lays the table out: nothing moved.
	if prev.Regime != "" {
		r.moved += int64(d.Moved)
		if d.Regime != prev.Regime {
			r.regimeChanges++
		}
	}
	r.regimeTicks[string(d.Regime)]++
	if d.ScaleHint {
		r.scaleHints++
	}
	band := max(1, int(flapBand*float64(g.conf.Params.Slots)))
	for k, i := range idx {
		c := d.Slots[k]
		if !r.slotsSeen[i] {
			r.slotsSeen[i], r.minSlots[i], r.maxSlots[i] = true, c, c
		}
		r.minSlots[i], r.maxSlots[i] = min(r.minSlots[i], c), max(r.maxSlots[i], c)
		g.backends[i].zz.add(c, g.next, band)
	}
}

// zigzag follows a count's swings of at least a band: a reversal is a
// swing against the last one; a flap, a reversal soon after the last.
type zigzag struct {
	started, moving bool
	up              bool
	extreme         int
	lastReversal    time.Duration
	reversed        bool
	reversals       int
	flaps           int
}

func (z *zigzag) add(c int, at time.Duration, band int) {
	switch {
	case !z.started:
		z.started, z.extreme = true, c
	case !z.moving:
		if c >= z.extreme+band || c <= z.extreme-band {
			z.moving, z.up, z.extreme = true, c > z.extreme, c
		}
	case z.up && c > z.extreme, !z.up && c < z.extreme:
		z.extreme = c
	case z.up && c <= z.extreme-band, !z.up && c >= z.extreme+band:
		z.reversals++
		if z.reversed && at-z.lastReversal < flapWithin {
			z.flaps++
		}
		z.up, z.extreme, z.reversed, z.lastReversal = !z.up, c, true, at
	}
}

// report is the group's RouteReport so far.
func (g *simGroup) report() RouteReport {
	r := &g.rep
	out := RouteReport{Namespace: g.cfg.Namespace, Name: g.cfg.Name, VIP: g.vip.String(), Table: r.table, ConfiguredAt: r.configuredAt,
		Seconds: r.seconds, Arrived: r.arrived, Shed: r.shed, Refused: r.refused, Ticks: r.ticks, SlotsMoved: r.moved, Flips: g.epoch,
		RegimeChanges: r.regimeChanges, RegimeTicks: map[string]int{}, ScaleHints: r.scaleHints, Step: r.step}
	for k, v := range r.regimeTicks {
		out.RegimeTicks[k] = v
	}
	for _, f := range r.failed {
		out.Failed += f
	}
	row, start := 0, 0
	if r.configuredAt >= 0 {
		row, start = 3, r.configuredAt
	}
	type span struct {
		name        string
		from, until int
	}
	spans := []span{{PhaseRun, start, r.seconds}}
	if g.d1 > 0 {
		spans = []span{{PhaseBefore, start, max(start, g.d0)}, {PhaseDuring, max(start, g.d0), max(start, g.d1)}, {PhaseAfter, max(start, g.d1), max(start, g.d1, r.seconds)}}
	}
	for k, sp := range spans {
		ph := RoutePhase{Name: sp.name, From: sp.from, Until: sp.until, Failed: r.failed[row+k], MeanLatency: -1}
		for _, n := range r.routed[row+k] {
			ph.Requests += n
		}
		if ph.Requests > 0 {
			ph.MeanLatency = r.latSum[row+k] / float64(ph.Requests)
		}
		out.Phases = append(out.Phases, ph)
	}
	for i, b := range g.backends {
		br := BackendReport{Address: b.name, Points: append([]float64(nil), r.points[i]...), MinSlots: r.minSlots[i], MaxSlots: r.maxSlots[i],
			Reversals: b.zz.reversals, Flaps: b.zz.flaps}
		for _, d := range b.windows {
			br.Degrade = append(br.Degrade, DegradeWindow{From: d.from, Until: d.until, Latency: d.latency, Capacity: d.capacity, ErrorRate: d.errRate})
		}
		for k, ph := range out.Phases {
			v := -1.0
			if ph.Requests > 0 {
				v = float64(r.routed[row+k][i]) / float64(ph.Requests)
			}
			br.Share = append(br.Share, v)
		}
		out.Backends = append(out.Backends, br)
	}
	return out
}

// RouteReport returns what the world measured of a route group so far.
func (w *World) RouteReport(namespace, name string) (RouteReport, bool) {
	g := w.group(namespace, name)
	if g == nil {
		return RouteReport{}, false
	}
	return g.report(), true
}

func routeReportObject(a providers.Address, r RouteReport) providers.Object {
	o := providers.Object{Address: a}
	if v, err := structuredOf(r); err == nil {
		o.Exists, o.Attributes = true, map[addrs.Path]values.Value{AttrReport: v}
	}
	return o
}

// DecodeRouteReport reads the RouteReport of a SimRouteGroupReport object.
func DecodeRouteReport(o providers.Object) (RouteReport, error) {
	var r RouteReport
	return r, decodeReport(o, &r)
}
