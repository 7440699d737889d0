package route

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/decide/routegroup"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
)

// Appender takes samples: a provider's Signals buffer.
type Appender interface {
	AppendCached(l labels.Labels, cache *any, t int64, v float64) error
}

// Recorder appends a group's tick to a provider's signals as the
// setpoint_routegroup_* series, keeping series handles between ticks.
// Not safe for concurrent use: one per group loop.
type Recorder struct {
	Namespace, Name string
	// Every is the least time between two records: a 200 ms loop over a
	// thousand backends need not write 20,000 samples a second for
	// queries over minutes (0: every tick).
	Every  time.Duration
	last   time.Time
	caches map[string]*any
}

// Record appends the tick's figures at now.
func (r *Recorder) Record(sink Appender, now time.Time, d routegroup.Decision, st routegroup.State) {
	if r.Every > 0 && !r.last.IsZero() && now.Sub(r.last) < r.Every && now.After(r.last) {
		return
	}
	r.last = now
	if r.caches == nil || len(r.caches) > 16*routegroup.MaxBackends {
		// Backends come and go: forget series handles rather than grow.
		r.caches = map[string]*any{}
	}
	t := now.UnixMilli()
	put := func(metric string, v float64, extra ...string) {
		key := metric + "\xff" + strings.Join(extra, "\xff")
		c := r.caches[key]
		if c == nil {
			c = new(any)
			r.caches[key] = c
		}
		l := labels.FromStrings(append([]string{"__name__", metric, "namespace", r.Namespace, "routegroup", r.Name}, extra...)...)
		_ = sink.AppendCached(l, c, t, v)
	}
	put("setpoint_routegroup_mean_pressure", d.MeanPressure)
	put("setpoint_routegroup_regime", RegimeNumber(d.Regime))
	put("setpoint_routegroup_scale_hint", b2f(d.ScaleHint))
	if d.SkewKnown {
		put("setpoint_routegroup_skew", d.Skew)
	}
	for i, b := range d.Names {
		put("setpoint_routegroup_weight", d.Weights[i], "backend", b)
		put("setpoint_routegroup_slots", float64(d.Slots[i]), "backend", b)
		put("setpoint_routegroup_pressure", d.Pressure[i], "backend", b)
	}
	for _, b := range st.Backends {
		if b.Counted {
			put("setpoint_routegroup_connects_total", float64(b.Connects), "backend", b.Name)
		}
	}
}

// RegimeNumber is a regime as a series value: laminar 0, transition 1,
// crisis 2, recovery 3.
func RegimeNumber(r routegroup.Regime) float64 {
	switch r {
	case routegroup.Transition:
		return 1
	case routegroup.Crisis:
		return 2
	case routegroup.Recovery:
		return 3
	}
	return 0
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Observed is the object a provider's Read reports for a group: its
// config, and once it has ticked, the last decision and field.
func Observed(raw values.Value, epoch uint32, d routegroup.Decision, tick uint64, f Field) map[addrs.Path]values.Value {
	out := map[addrs.Path]values.Value{
		AttrConfig: raw,
		AttrEpoch:  values.CountOf(int64(epoch)),
		AttrTick:   values.CountOf(int64(tick)),
	}
	if d.Regime == "" {
		return out
	}
	out[AttrRegime] = values.StringOf(string(d.Regime))
	out[AttrAdmission] = values.StringOf(string(d.Admission.Mode))
	skew := "unknown"
	if d.SkewKnown {
		skew = strconv.FormatFloat(d.Skew, 'f', 4, 64)
	}
	out[AttrSkew] = values.StringOf(skew)
	if raw, err := json.Marshal(f); err == nil {
		if v, err := values.StructuredOf(raw); err == nil {
			out[AttrField] = v
		}
	}
	return out
}

// FieldOf is the field a provider reports of a tick: the decision's
// weights, slots and pressure by backend, and the backends whose metrics
// are missing (their pressure holds).
func FieldOf(d routegroup.Decision, st routegroup.State, churn float64) Field {
	f := Field{Names: d.Names, Weights: d.Weights, Slots: d.Slots, Pressure: d.Pressure, Churn: churn}
	for _, b := range st.Backends {
		if b.Flagged {
			f.Flagged = append(f.Flagged, b.Name)
		}
	}
	return f
}

// Summary is what a node reports of a group in a cluster's
// NodeAgentConfig status: small and of fixed size (a status entry per node
// with every backend's weight would pass etcd's object limit on a large
// cluster); the per-backend figures go to Signals.
func Summary(attrs map[addrs.Path]values.Value) map[string]any {
	out := map[string]any{}
	for k, p := range map[string]addrs.Path{"regime": AttrRegime, "admission": AttrAdmission, "skew": AttrSkew} {
		if v, ok := attrs[p]; ok {
			out[k] = v.Str()
		}
	}
	for k, p := range map[string]addrs.Path{"epoch": AttrEpoch, "tick": AttrTick} {
		if v, ok := attrs[p]; ok {
			out[k] = v.Int()
		}
	}
	if v, ok := attrs[AttrField]; ok {
		var f Field
		if json.Unmarshal(v.JSON(), &f) == nil {
			out["backends"], out["flagged"] = len(f.Names), len(f.Flagged)
		}
	}
	return out
}

// SummaryKey is what of an observed group a node agent reports as soon as
// it changes (agentcr.Reconciler.Key): its regime, admission and number of
// backends, not the counters every tick moves nor a backend flagged for
// one missed scrape.
func SummaryKey(o providers.Object) string {
	m := Summary(o.Attributes)
	return fmt.Sprint(m["regime"], "/", m["admission"], "/", m["backends"])
}
