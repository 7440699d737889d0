package main

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/plan"
	"github.com/setpoint-dev/setpoint/providers"
)

// selfMetrics are watch's own metrics. They live on a registry of their
// own: whatever a dependency registers on the global one (the Prometheus
// engine, client libraries) is not setpoint's to export. A nil
// *selfMetrics records nothing, so the reconcile path needs no branches
// when no server (debug or health) serves them.
type selfMetrics struct {
	reg       *prometheus.Registry
	decisions *prometheus.CounterVec
	applies   *prometheus.CounterVec
	holds     *prometheus.CounterVec
	reconcile prometheus.Histogram
	calls     *prometheus.HistogramVec
	// What the alerts in deploy/monitoring read: whether reconciles end
	// well, whether a spec file fails to load (its last good version
	// runs, so nothing else shows it), and whether every shard has a
	// replica.
	reconciles  *prometheus.CounterVec
	lastOK      prometheus.Gauge
	tick        prometheus.Gauge
	specs       prometheus.Gauge
	incomplete  prometheus.Gauge
	shards      prometheus.Gauge
	shardsOwned prometheus.Gauge
	// own is every collector above, registered from this list (which the
	// monitoring test reads), beside the Go and process collectors.
	own []prometheus.Collector
}

// watchMetrics are the running watch's, served by both its debug server
// and its health server: one registry, made once, since one watch runs in
// a process (as the Go and process collectors on it assume too).
var watchMetrics = sync.OnceValue(newSelfMetrics)

// latencyBuckets span an in-process provider call (well under a
// millisecond) to a reconcile waiting on a slow API server.
var latencyBuckets = prometheus.ExponentialBuckets(0.0005, 2, 16)

func newSelfMetrics() *selfMetrics {
	m := &selfMetrics{
		reg: prometheus.NewRegistry(),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "setpoint_decisions_total",
			Help: "Changes planned to be applied, by the kind of the spec that decided them and the dimension (releases have none).",
		}, []string{"kind", "dimension"}),
		applies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "setpoint_applies_total",
			Help: "Changes applied, by result (ok or failed).",
		}, []string{"result"}),
		holds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "setpoint_holds_total",
			Help: "Changes held by the gate, counted in every plan that holds them, by the kind of hold.",
		}, []string{"reason"}),
		reconcile: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "setpoint_reconcile_duration_seconds",
			Help:    "Wall time of one reconcile (tick, edit, event or due hold): lock, plan, apply and save.",
			Buckets: latencyBuckets,
		}),
		calls: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "setpoint_provider_call_duration_seconds",
			Help:    "Wall time of the engine's calls to a provider, by provider and method.",
			Buckets: latencyBuckets,
		}, []string{"provider", "method"}),
	}
	m.reconciles = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "setpoint_reconciles_total",
		Help: "Reconciles, by result: failed when the state could not be locked or saved, a spec could not be planned, or an apply failed.",
	}, []string{"result"})
	m.lastOK = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "setpoint_last_reconcile_success_timestamp_seconds",
		Help: "When a reconcile last ended without failing (Unix seconds; 0 before the first).",
	})
	m.tick = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "setpoint_tick_seconds",
		Help: "The Environment's tick: every spec is reconciled at least this often.",
	})
	m.specs = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "setpoint_specs",
		Help: "Specs in force at the last reconcile, the Environment excluded.",
	})
	m.incomplete = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "setpoint_specs_incomplete",
		Help: "1 while some spec file does not load: the last good version of it runs, and nothing is released.",
	})
	m.shards = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "setpoint_shards",
		Help: "Shards the specs are spread over when the state is in the cluster (0 with a local state: one writer).",
	})
	m.shardsOwned = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "setpoint_shards_owned",
		Help: "Shards this replica holds the Lease of.",
	})
	m.own = []prometheus.Collector{m.decisions, m.applies, m.holds, m.reconcile, m.calls,
		m.reconciles, m.lastOK, m.tick, m.specs, m.incomplete, m.shards, m.shardsOwned}
	m.reg.MustRegister(m.own...)
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Series that exist from the start make rate() and absent() alerts
	// work before the first apply or hold.
	for _, r := range []string{"ok", "failed"} {
		m.applies.WithLabelValues(r)
		m.reconciles.WithLabelValues(r)
	}
	for k := plan.HoldPaused; k <= plan.HoldRollout; k++ {
		m.holds.WithLabelValues(k.String())
	}
	return m
}

// handler serves the registry in the Prometheus text format.
func (m *selfMetrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(slog.Default().Handler(), slog.LevelError),
		ErrorHandling: promhttp.ContinueOnError,
	})
}

// observePlan counts a plan's changes and holds.
func (m *selfMetrics) observePlan(p *plan.Plan) {
	if m == nil || p == nil {
		return
	}
	for _, c := range p.Changes {
		// A spec's ID is Kind/namespace/name; the kind keeps the label's
		// cardinality to the number of kinds.
		kind, _, _ := strings.Cut(c.Spec, "/")
		m.decisions.WithLabelValues(kind, c.Dimension).Inc()
	}
	for _, c := range p.Held {
		if c.Held != nil {
			m.holds.WithLabelValues(c.Held.Kind.String()).Inc()
		}
	}
}

// observeApplies counts applied changes by result.
func (m *selfMetrics) observeApplies(rs []engine.Result) {
	if m == nil {
		return
	}
	for _, r := range rs {
		if r.Err != "" {
			m.applies.WithLabelValues("failed").Inc()
		} else {
			m.applies.WithLabelValues("ok").Inc()
		}
	}
}

// observeSet records the specs in force.
func (m *selfMetrics) observeSet(n int, incomplete bool) {
	if m == nil {
		return
	}
	m.specs.Set(float64(n))
	// One Set: a scrape between two would reset the alert's pending time.
	v := 0.0
	if incomplete {
		v = 1
	}
	m.incomplete.Set(v)
}

// observeResult counts a reconcile that ended, failed or not.
func (m *selfMetrics) observeResult(failed bool) {
	if m == nil {
		return
	}
	if failed {
		m.reconciles.WithLabelValues("failed").Inc()
		return
	}
	m.reconciles.WithLabelValues("ok").Inc()
	m.lastOK.SetToCurrentTime()
}

// observeTick records the tick in force, which the alert on reconciles
// that stopped measures against.
func (m *selfMetrics) observeTick(d time.Duration) {
	if m == nil {
		return
	}
	m.tick.Set(d.Seconds())
}

// observeShards records this replica's share of n shards.
func (m *selfMetrics) observeShards(n, owned int) {
	if m == nil {
		return
	}
	m.shards.Set(float64(n))
	m.shardsOwned.Set(float64(owned))
}

// observeReconcile records a reconcile that started at start; for defer.
func (m *selfMetrics) observeReconcile(start time.Time) {
	if m == nil {
		return
	}
	m.reconcile.Observe(time.Since(start).Seconds())
}

// instrument times every call the engine makes to the providers. Only the
// engine's map is wrapped: the event streams and signal feeds use the
// providers directly, and their calls are long-lived or not the engine's.
func (m *selfMetrics) instrument(provs map[string]providers.Provider) {
	if m == nil {
		return
	}
	for name, p := range provs {
		provs[name] = timedProvider{next: p, seconds: m.calls.MustCurryWith(prometheus.Labels{"provider": name})}
	}
}

// timedProvider is a providers.Provider that records how long each call
// took.
type timedProvider struct {
	next    providers.Provider
	seconds prometheus.ObserverVec // curried with the provider's name
}

func (t timedProvider) since(method string, start time.Time) {
	t.seconds.WithLabelValues(method).Observe(time.Since(start).Seconds())
}

func (t timedProvider) Read(ctx context.Context, req providers.ReadRequest) providers.ReadResponse {
	defer t.since("Read", time.Now())
	return t.next.Read(ctx, req)
}

func (t timedProvider) List(ctx context.Context, req providers.ListRequest) providers.ListResponse {
	defer t.since("List", time.Now())
	return t.next.List(ctx, req)
}

func (t timedProvider) PlanChange(ctx context.Context, req providers.PlanChangeRequest) providers.PlanChangeResponse {
	defer t.since("PlanChange", time.Now())
	return t.next.PlanChange(ctx, req)
}

func (t timedProvider) Apply(ctx context.Context, req providers.ApplyRequest) providers.ApplyResponse {
	defer t.since("Apply", time.Now())
	return t.next.Apply(ctx, req)
}

var _ providers.Provider = timedProvider{}
