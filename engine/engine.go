// Package engine runs setpoint's loop: observe through providers and
// signals, decide per spec, combine intents, gate, plan, and apply. The
// core knows nothing of Kubernetes or BPF: providers do.
package engine

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/gate"
	"github.com/setpoint-dev/setpoint/engine/intent"
	"github.com/setpoint-dev/setpoint/engine/plan"
	"github.com/setpoint-dev/setpoint/engine/signals"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/providers"
)

// PausedAnnotation on a target pauses every spec acting on it.
const PausedAnnotation = "setpoint.dev/paused"

// Engine plans and applies for a set of specs.
type Engine struct {
	Env *spec.Environment
	// Specs are the documents to reconcile; each kind is handled by the
	// decider registered for it.
	Specs     []spec.Document
	Providers map[string]providers.Provider
	Signals   signals.Source
	// Feeds pull provider-sourced samples into the signal store before
	// every plan (the sim world out of process).
	Feeds   []*Feed
	Version string
	Dir     string
	Log     *slog.Logger
}

func (e *Engine) logger() *slog.Logger {
	if e.Log != nil {
		return e.Log
	}
	return slog.Default()
}

// defaultProvider is the Environment's first provider: where a spec's
// target lives unless it names one.
func (e *Engine) defaultProvider() string {
	if e.Env != nil && len(e.Env.Spec.Providers) > 0 {
		return e.Env.Spec.Providers[0].Name
	}
	return ""
}

// decided pairs a spec with its decider and the addresses it reads.
type decided struct {
	doc     spec.Document
	decider Decider
	reads   []providers.Address
}

func (e *Engine) plans() ([]decided, []plan.Note) {
	out := make([]decided, 0, len(e.Specs))
	var errs []plan.Note
	def := e.defaultProvider()
	for _, d := range e.Specs {
		h := d.Head()
		if h.Kind == "Environment" {
			continue
		}
		dec, ok := Lookup(h.Kind)
		if !ok {
			errs = append(errs, plan.Note{Spec: h.ID(), Pos: h.Src.Pos.String(), Text: "no decider for kind " + h.Kind + " in this release"})
			continue
		}
		out = append(out, decided{doc: d, decider: dec, reads: dec.Reads(d, def)})
	}
	return out, errs
}

// Observation is what one tick read.
type Observation struct {
	Objects map[string]providers.Object // by address
	// Failed holds a provider error per address that could not be read.
	Failed map[string]string
}

// observe reads every address the specs target, one batch per provider.
func (e *Engine) observe(ctx context.Context, now time.Time, ds []decided) Observation {
	obs := Observation{Objects: map[string]providers.Object{}, Failed: map[string]string{}}
	byProv := map[string][]providers.Address{}
	seen := map[providers.Address]bool{}
	for _, d := range ds {
		for _, a := range d.reads {
			if !seen[a] {
				seen[a] = true
				byProv[a.Provider] = append(byProv[a.Provider], a)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(byProv)) {
		addrs := byProv[name]
		p, ok := e.Providers[name]
		if !ok {
			for _, a := range addrs {
				obs.Failed[a.String()] = fmt.Sprintf("provider %q is not configured", name)
			}
			continue
		}
		resp := p.Read(ctx, providers.ReadRequest{Now: now, Addresses: addrs})
		for _, d := range resp.Diagnostics {
			if d.Severity != providers.Error {
				continue
			}
			if d.Address != nil {
				obs.Failed[d.Address.String()] = d.Summary
				continue
			}
			for _, a := range addrs {
				obs.Failed[a.String()] = d.Summary + ": " + d.Detail
			}
		}
		for i, o := range resp.Objects {
			if i < len(addrs) && o.Address == addrs[i] {
				obs.Objects[o.Address.String()] = o
			}
		}
		for _, a := range addrs {
			if _, ok := obs.Objects[a.String()]; !ok {
				if _, failed := obs.Failed[a.String()]; !failed {
					obs.Failed[a.String()] = "the provider returned nothing for it"
				}
			}
		}
	}
	return obs
}

// parseValue reads an attribute as a number in its unit.
func parseValue(u intent.Unit, s string) (int64, bool) {
	if u == intent.Bytes {
		b, err := spec.ParseBytes(s)
		return int64(b), err == nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// Plan runs observe → decide → diff → gate at now. It records what it saw
// in st (each attribute's user value at adoption, the recommendation and
// the stability window) and changes nothing else.
func (e *Engine) Plan(ctx context.Context, now time.Time, st *state.State) *plan.Plan {
	p := &plan.Plan{FormatVersion: plan.FormatVersion, SetpointVersion: e.Version, At: now, Dir: e.Dir,
		Specs: map[string]string{}, Observed: map[string]string{}, Changes: []plan.Change{}, Held: []plan.Change{}, Notes: []plan.Note{}, Errors: []plan.Note{}}
	ds, errs := e.plans()
	p.Errors = append(p.Errors, errs...)
	for _, f := range e.Feeds {
		f.Pull(ctx, now)
	}
	obs := e.observe(ctx, now, ds)
	p.Record(func(p *plan.Plan) {
		p.Observed = obs.fingerprintable()
		for _, d := range ds {
			p.Specs[d.doc.Head().ID()] = spec.Digest(d.doc)
		}
	})
	tick := &Tick{Ctx: ctx, Now: now, Source: e.Signals}

	var intents []intent.Intent
	bySpec := map[string]decided{}
	for _, d := range ds {
		bySpec[d.doc.Head().ID()] = d
		its, notes, errs := d.decider.Decide(tick, d.doc, d.reads, obs, st)
		p.Notes = append(p.Notes, notes...)
		p.Errors = append(p.Errors, errs...)
		intents = append(intents, its...)
	}

	current := func(a providers.Address, attr string, u intent.Unit) (int64, bool) {
		o, ok := obs.Objects[a.String()]
		if !ok || !o.Exists {
			return 0, false
		}
		v, ok := o.Attributes[attr]
		if !ok {
			return 0, true // an absent annotation reads as 0, as Knative does
		}
		return parseValue(u, v)
	}
	for _, d := range Combine(intents, current) {
		if !d.Set {
			continue
		}
		sp := bySpec[d.Primary.Source]
		o := obs.Objects[d.Address.String()]
		cur, has := current(d.Address, d.Attribute, d.Unit)
		key := state.Key(d.Address.String(), d.Attribute)
		entry := st.Get(key)
		if entry.User == nil && has && o.Exists {
			if _, present := o.Attributes[d.Attribute]; present {
				v := cur
				entry.User = &v // adoption: the value the workload had
			}
		}
		entry.Record(now, d.Value)
		if has && cur == d.Value {
			entry.Window = nil
			continue
		}
		params := sp.decider.Params(sp.doc, sp.reads, d.Dimension, obs)
		if e.Env != nil {
			params.GitOps = e.Env.Spec.GitopsManagers
		}
		ch := gate.Change{Unit: d.Unit, Current: cur, HasCurrent: has, Desired: d.Value, Manager: o.Managers[d.Attribute]}
		dec := gate.Evaluate(now, params, ch, entry)
		entry.Window = dec.Window
		pc := plan.Change{
			Address: d.Address.String(), Attribute: d.Attribute, Action: plan.Update, Dimension: string(d.Dimension),
			From: intent.Format(cur, d.Unit), To: intent.Format(dec.Value, d.Unit), Wanted: intent.Format(d.Value, d.Unit),
			Reason: d.Primary.Rationale, Notes: dec.Notes, Held: dec.Held, Conflict: dec.Conflict, Manager: ch.Manager,
			Spec: d.Primary.Source, SpecPos: d.Primary.SourcePos.String(), Value: dec.Value, Restore: d.Primary.Restore,
		}
		if !o.Exists {
			if d.Create == nil {
				continue
			}
			pc.Action, pc.From = plan.Create, ""
			pc.Create = map[string]string{}
			for k, v := range d.Create.Attributes {
				pc.Create[k] = v
			}
			pc.Create[d.Attribute] = pc.To
		}
		for _, c := range d.Contributors {
			pc.Contributors = append(pc.Contributors, plan.Contributor{Spec: c.Source, Pos: c.SourcePos.String(), Kind: string(c.Kind), Value: intent.Format(c.Value, c.Unit), Rationale: c.Rationale})
		}
		if d.Conflict != "" {
			pc.Held, pc.Conflict = "conflict: "+d.Conflict, true
		}
		if pc.Held != "" {
			p.Held = append(p.Held, pc)
		} else {
			p.Changes = append(p.Changes, pc)
		}
	}
	sort.SliceStable(p.Changes, func(i, j int) bool {
		if p.Changes[i].Address != p.Changes[j].Address {
			return p.Changes[i].Address < p.Changes[j].Address
		}
		return p.Changes[i].Attribute < p.Changes[j].Attribute
	})
	return p
}

// Result of applying one change.
type Result struct {
	Change plan.Change
	Err    string
}

// Apply writes a plan's changes, one batch per provider. Only changes that
// succeeded are recorded in st; a failure names the spec's file:line.
func (e *Engine) Apply(ctx context.Context, now time.Time, p *plan.Plan, st *state.State) []Result {
	byProv := map[string][]plan.Change{}
	var order []string
	for _, c := range p.Changes {
		a, err := providers.ParseAddress(c.Address)
		if err != nil {
			continue
		}
		if _, ok := byProv[a.Provider]; !ok {
			order = append(order, a.Provider)
		}
		byProv[a.Provider] = append(byProv[a.Provider], c)
	}
	var results []Result
	for _, name := range order {
		changes := byProv[name]
		prov, ok := e.Providers[name]
		if !ok {
			for _, c := range changes {
				results = append(results, Result{Change: c, Err: fmt.Sprintf("%s: provider %q is not configured", c.SpecPos, name)})
			}
			continue
		}
		req := providers.ApplyRequest{Now: now}
		for _, c := range changes {
			a, _ := providers.ParseAddress(c.Address)
			req.Changes = append(req.Changes, providers.Change{Address: a, Attribute: c.Attribute, Value: c.To, Manager: gate.SetpointManager, Create: c.Create})
		}
		resp := prov.Apply(ctx, req)
		for i, c := range changes {
			r := Result{Change: c}
			switch {
			case i >= len(resp.Results):
				r.Err = fmt.Sprintf("%s: %s %s: the provider did not answer for this change", c.SpecPos, c.Address, c.Attribute)
			case resp.Results[i].Err != "":
				r.Err = fmt.Sprintf("%s: %s %s: %s", c.SpecPos, c.Address, c.Attribute, resp.Results[i].Err)
			case c.Restore:
				// The user's value is back: setpoint no longer owns it.
				delete(st.Entries, state.Key(c.Address, c.Attribute))
			default:
				e := st.Get(state.Key(c.Address, c.Attribute))
				e.Applied = &state.Applied{Value: c.Value, At: now}
				e.Window = nil
			}
			if r.Err != "" {
				e.logger().Error("apply failed", "address", c.Address, "attribute", c.Attribute, "error", r.Err)
			}
			results = append(results, r)
		}
		for _, d := range resp.Diagnostics {
			if d.Severity == providers.Error {
				e.logger().Error("provider", "provider", name, "summary", d.Summary, "detail", d.Detail)
			}
		}
	}
	return results
}

// Observe re-reads what a plan observes, for the staleness check of a
// saved plan.
func (e *Engine) Observe(ctx context.Context, now time.Time) map[string]string {
	ds, _ := e.plans()
	return e.observe(ctx, now, ds).fingerprintable()
}

// fingerprintable lists every object's existence and generation and every
// spec attribute with its manager. Status is left out: it moves by itself
// and does not make a plan stale.
func (o Observation) fingerprintable() map[string]string {
	out := make(map[string]string, len(o.Objects)*6)
	for _, obj := range o.Objects {
		a := obj.Address.String()
		out[a] = fmt.Sprintf("exists=%t generation=%d", obj.Exists, obj.Generation)
		for k, v := range obj.Attributes {
			if strings.HasPrefix(k, "status.") {
				continue
			}
			out[a+" "+k] = v + " (manager " + obj.Managers[k] + ")"
		}
	}
	for a, why := range o.Failed {
		out[a] = "unreadable: " + why
	}
	return out
}
