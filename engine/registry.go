package engine

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/setpoint-dev/setpoint/cue/schema"
	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/gate"
	"github.com/setpoint-dev/setpoint/engine/intent"
	"github.com/setpoint-dev/setpoint/engine/plan"
	"github.com/setpoint-dev/setpoint/engine/signals"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/providers"
)

// Decider adapts one kind's pure decision function to the loop: which
// objects a spec reads, its intents from what was observed, and the gate's
// rules for each of its dimensions. Each kind registers one.
type Decider interface {
	// Reads lists the addresses a spec needs observed; specs that read a
	// common object are planned together.
	Reads(doc spec.Document, defaultProvider string) []addrs.Object
	// Decide returns the spec's intents, notes (decisions it could not
	// make, and why) and errors (things the user must fix).
	Decide(t *Tick, doc spec.Document, reads []addrs.Object, obs Observation, st *state.State) ([]intent.Intent, []plan.Note, []plan.Note)
	// Rules are the gate's rules for one dimension of the spec: the common
	// core's parameters and the kind's policy.
	Rules(doc spec.Document, reads []addrs.Object, d intent.Dimension, obs Observation) gate.Rules
}

// Lister is a Decider whose specs discover their objects (a Fleet's
// clusters): the engine lists them each tick and hands them to Decide in
// Observation.Listed, under the query's key.
type Lister interface {
	Lists(doc spec.Document, defaultProvider string) []providers.ListRequest
}

// ListKey names a list query's answer in Observation.Listed.
func ListKey(q providers.ListRequest) string {
	keys := slices.Sorted(maps.Keys(q.Selector))
	var b strings.Builder
	b.WriteString(q.Provider + ":" + q.Kind + "/" + q.Namespace + "?")
	for _, k := range keys {
		b.WriteString(k + "=" + q.Selector[k] + ",")
	}
	return b.String()
}

var (
	regMu    sync.RWMutex
	registry = map[string]Decider{}
)

// Register adds the decider of a kind whose schema and Go type are built
// in (cue/schema, cue/spec).
func Register(kind string, d Decider) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[kind]; dup {
		panic("engine: decider registered twice for " + kind)
	}
	registry[kind] = d
}

// Lookup returns the decider of a kind.
func Lookup(kind string) (Decider, bool) {
	regMu.RLock()
	defer regMu.RUnlock()
	d, ok := registry[kind]
	return d, ok
}

// Kinds lists the kinds with a decider.
func Kinds() []string {
	regMu.RLock()
	defer regMu.RUnlock()
	return slices.Sorted(maps.Keys(registry))
}

// Kind is everything a spec kind brings: its CUE schema (a file that adds
// `#Kinds: NAME: #NAME`), its Go type and its decider (whose Rules carry
// its gate policy). RegisterKind is the one place a kind is registered.
type Kind struct {
	Name    string
	Schema  []byte
	New     func() spec.Document
	Decider Decider
}

// RegisterKind registers a kind's schema, Go type and decider; call it
// from an init, before a loader is made.
func RegisterKind(k Kind) {
	schema.Add(strings.ToLower(k.Name)+".cue", k.Schema)
	spec.Register(spec.Kind{Name: k.Name, New: k.New})
	Register(k.Name, k.Decider)
}

// Tick is one evaluation: its time, and the signal source with every query
// evaluated at most once, so grouped queries are shared by all specs.
type Tick struct {
	// Ctx is the reconcile's: the grouped queries every spec shares run
	// under it.
	Ctx context.Context
	// own is Ctx with the budget of the spec being decided (deciding):
	// its own queries (Query, OwnBy) are charged to it.
	own      context.Context
	deciding bool
	Now      time.Time
	Source   signals.Source
	// DefaultProvider serves a spec's target unless it names one.
	DefaultProvider string
	cache           map[string]tickResult
	// peers are the specs planned with each spec (its group).
	peers map[string][]spec.Document
	memo  map[string]any
	due   map[string]time.Time
}

// Peers returns the specs planned in this tick that share a target with
// the spec id, transitively, itself included: a decision that spans
// workloads (a Schedule's dependencies) or kinds (an NFR that keeps a
// Schedule's target warm) reads them here, never through another tick.
func (t *Tick) Peers(id string) []spec.Document { return t.peers[id] }

// Memo computes f once per tick for key: a decision made for a whole
// group is shared by its members.
func (t *Tick) Memo(key string, f func() any) any {
	if v, ok := t.memo[key]; ok {
		return v
	}
	if t.memo == nil {
		t.memo = map[string]any{}
	}
	v := f()
	t.memo[key] = v
	return v
}

// RequeueAt asks for the spec id to be planned again at at (the next
// wake-up, an idle expiry): a controller requeues it then instead of at
// its next tick. The earliest request counts.
func (t *Tick) RequeueAt(id string, at time.Time) {
	if at.IsZero() {
		return
	}
	if t.due == nil {
		t.due = map[string]time.Time{}
	}
	if old, ok := t.due[id]; !ok || at.Before(old) {
		t.due[id] = at
	}
}

type tickResult struct {
	r   signals.Result
	err error
	by  map[string]map[string]float64 // By(labels) of r, per label list
	// nested is r indexed by group labels then one sub-label (one
	// label set per expression).
	nested map[string]map[string]float64
	// series is a matrix r indexed the same way, to each series' points.
	series map[string]map[string][]signals.Point
}

// Query evaluates a spec's own query (a trigger, an activity, an
// override) at the tick's time, once per tick, charged to the budget of
// the spec being decided.
func (t *Tick) Query(expr string) (signals.Result, error) {
	return t.query(t.specCtx(), expr)
}

// specCtx is the context of the spec being decided, with its budget made
// on its first own query (most specs ask none: a plan of 10,000 NFRs
// makes no budget at all).
func (t *Tick) specCtx() context.Context {
	if !t.deciding {
		return t.Ctx
	}
	if t.own == nil {
		base := t.Ctx
		if base == nil {
			base = context.Background()
		}
		t.own = signals.WithBudget(base, signals.NewBudget(signals.SpecBudget))
	}
	return t.own
}

// forSpec makes the following Query calls the next spec's: charged to a
// fresh budget of signals.SpecBudget samples.
func (t *Tick) forSpec() { t.deciding, t.own = true, nil }

// query evaluates expr under ctx, once per tick. A query refused at a
// budget is not kept: another spec's budget may let it through.
func (t *Tick) query(ctx context.Context, expr string) (signals.Result, error) {
	if t.cache == nil {
		t.cache = map[string]tickResult{}
	}
	if r, ok := t.cache[expr]; ok {
		return r.r, r.err
	}
	if t.Source == nil {
		return signals.Result{Expr: expr, At: t.Now}, errNoSource
	}
	r, err := t.Source.Query(ctx, expr, t.Now)
	if !errors.Is(err, signals.ErrBudget) {
		t.cache[expr] = tickResult{r: r, err: err}
	}
	return r, err
}

// By evaluates expr once per tick and indexes it by labels once, so every
// spec finds its workload's value in a grouped result without a scan.
func (t *Tick) By(expr string, labels ...string) (map[string]float64, signals.Result, error) {
	return t.by(t.Ctx, expr, labels)
}

// OwnBy is By for a spec's own grouped query (a Fleet's per-cluster
// queries): charged to the budget of the spec being decided, as Query.
func (t *Tick) OwnBy(expr string, labels ...string) (map[string]float64, signals.Result, error) {
	return t.by(t.specCtx(), expr, labels)
}

func (t *Tick) by(ctx context.Context, expr string, labels []string) (map[string]float64, signals.Result, error) {
	r, err := t.query(ctx, expr)
	if err != nil {
		return nil, r, err
	}
	tr := t.cache[expr]
	key := strings.Join(labels, ",")
	if m, ok := tr.by[key]; ok {
		return m, r, nil
	}
	if tr.by == nil {
		tr.by = map[string]map[string]float64{}
	}
	m := r.By(labels...)
	tr.by[key] = m
	t.cache[expr] = tr
	return m, r, nil
}

// Nested indexes a grouped result two levels deep, once per tick: by the
// values of labels (joined with "/"), then by the value of sub.
func (t *Tick) Nested(expr, sub string, labels ...string) (map[string]map[string]float64, signals.Result, error) {
	r, err := t.query(t.Ctx, expr)
	if err != nil {
		return nil, r, err
	}
	tr := t.cache[expr]
	if tr.nested == nil {
		parts := make([]string, len(labels))
		tr.nested = map[string]map[string]float64{}
		for _, smp := range r.Samples {
			for i, l := range labels {
				parts[i] = smp.Labels[l]
			}
			k := strings.Join(parts, "/")
			if tr.nested[k] == nil {
				tr.nested[k] = map[string]float64{}
			}
			tr.nested[k][smp.Labels[sub]] = smp.Value
		}
		t.cache[expr] = tr
	}
	return tr.nested, r, nil
}

// Series indexes a grouped matrix result (a subquery) two levels deep,
// once per tick, as Nested does: by the values of labels, then by the
// value of sub, to each series' points.
func (t *Tick) Series(expr, sub string, labels ...string) (map[string]map[string][]signals.Point, signals.Result, error) {
	r, err := t.query(t.Ctx, expr)
	if err != nil {
		return nil, r, err
	}
	tr := t.cache[expr]
	if tr.series == nil {
		parts := make([]string, len(labels))
		tr.series = map[string]map[string][]signals.Point{}
		for _, smp := range r.Samples {
			for i, l := range labels {
				parts[i] = smp.Labels[l]
			}
			k := strings.Join(parts, "/")
			if tr.series[k] == nil {
				tr.series[k] = map[string][]signals.Point{}
			}
			tr.series[k][smp.Labels[sub]] = smp.Points
		}
		t.cache[expr] = tr
	}
	return tr.series, r, nil
}

type noSource struct{}

func (noSource) Error() string { return "no signal source configured" }

var errNoSource error = noSource{}
