package engine

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/setpoint-dev/setpoint/cue/spec"
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
	// Reads lists the addresses a spec needs observed.
	Reads(doc spec.Document, defaultProvider string) []providers.Address
	// Decide returns the spec's intents, notes (decisions it could not
	// make, and why) and errors (things the user must fix).
	Decide(t *Tick, doc spec.Document, reads []providers.Address, obs Observation, st *state.State) ([]intent.Intent, []plan.Note, []plan.Note)
	// Params are the gate's rules for one dimension of the spec (reads are
	// what Reads returned).
	Params(doc spec.Document, reads []providers.Address, d intent.Dimension, obs Observation) gate.Params
}

var (
	regMu    sync.RWMutex
	registry = map[string]Decider{}
)

// Register adds the decider of a kind.
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
	out := make([]string, 0, len(registry))
	for k := range registry {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Tick is one evaluation: its time, and the signal source with every query
// evaluated at most once, so grouped queries are shared by all specs.
type Tick struct {
	Ctx    context.Context
	Now    time.Time
	Source signals.Source
	cache  map[string]tickResult
}

type tickResult struct {
	r   signals.Result
	err error
}

// Query evaluates expr at the tick's time, once per tick.
func (t *Tick) Query(expr string) (signals.Result, error) {
	if t.cache == nil {
		t.cache = map[string]tickResult{}
	}
	if r, ok := t.cache[expr]; ok {
		return r.r, r.err
	}
	if t.Source == nil {
		return signals.Result{Expr: expr, At: t.Now}, errNoSource
	}
	r, err := t.Source.Query(t.Ctx, expr, t.Now)
	t.cache[expr] = tickResult{r, err}
	return r, err
}

type noSource struct{}

func (noSource) Error() string { return "no signal source configured" }

var errNoSource error = noSource{}
