// Package engine runs setpoint's loop: observe through providers and
// signals, decide per spec, combine intents, gate, plan, and apply. The
// core knows nothing of Kubernetes or BPF: providers do; nor of any one
// kind: each registers a Decider whose Rules carry its gate policy.
package engine

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/diag"
	"github.com/setpoint-dev/setpoint/engine/gate"
	"github.com/setpoint-dev/setpoint/engine/intent"
	"github.com/setpoint-dev/setpoint/engine/plan"
	"github.com/setpoint-dev/setpoint/engine/signals"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
)

// PausedAnnotation on a target pauses every spec acting on it.
const PausedAnnotation = "setpoint.dev/paused"

// Engine plans and applies for a set of specs.
type Engine struct {
	Env *spec.Environment
	// Specs are the documents in force; each kind is handled by the
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
	// NoDryRun skips the providers' PlanChange (benchmarks of the engine
	// alone).
	NoDryRun bool
	// SkipDryRun names providers whose PlanChange is not asked: a
	// read-only plan's, where a dry run is a write request (a Kubernetes
	// server-side dry run needs patch).
	SkipDryRun map[string]bool
	// Incomplete says some spec files of the directory did not load: a
	// spec that fails to load cannot be told from a deleted one, so no
	// field is released (see release.go).
	Incomplete bool
	// ConfirmGone are specs whose deletion the user confirmed (setpoint
	// state confirm-release handed to this run): their releases pass the
	// vanished-specs guard. One shot: it names these specs only, and Plan
	// sets it to nil once it marked them in the state (never while spec
	// files fail to load).
	ConfirmGone map[string]bool
	// View says how current this process's copy of the spec directory
	// is, when it may lag the source (a ConfigMap volume the kubelet
	// syncs, read by one replica of several): a spec missing from a stale
	// copy may be one not delivered yet. nil: the directory read is the
	// source, and a missing spec is gone.
	View *DirView
	// Releases says whose releases this plan makes (nil: every gone
	// spec's). In a cluster each is its shard holder's: another
	// replica's are neither read nor planned.
	Releases func(spec string) bool
}

// DirView is how current a process's copy of the spec directory is.
type DirView struct {
	// At bounds the copy's age: its content is the source's as of At
	// less Lag, or later (the kubelet's swap of a ConfigMap volume, say).
	At time.Time
	// Lag is how far the copy's content may trail At: the writer's lag
	// behind the source (the kubelet's watch cache) plus the clock skew
	// between nodes. 0 is DefaultCopyLag.
	Lag time.Duration
}

// DefaultCopyLag is DirView's Lag unless set: the kubelet's default
// change detection (Watch) delivers within a second or so.
const DefaultCopyLag = 5 * time.Second

func (v *DirView) lag() time.Duration {
	if v.Lag > 0 {
		return v.Lag
	}
	return DefaultCopyLag
}

// sawGone says whether a spec missing from the directory is gone by this
// process's view of it, for a field last applied at: the copy is newer
// than the apply by more than its lag. A copy that is not may lack a spec
// another process applied from a newer one; no other evidence (having seen
// the spec go, say) tells a deletion from a deletion since undone.
func (v *DirView) sawGone(applied time.Time) bool {
	return v == nil || v.At.After(applied.Add(v.lag()))
}

func (e *Engine) logger() *slog.Logger {
	if e.Log != nil {
		return e.Log
	}
	return slog.Default()
}

// DefaultProvider is the Environment's first provider: where a spec's
// target lives unless it names one.
func (e *Engine) DefaultProvider() string {
	if e.Env != nil && len(e.Env.Spec.Providers) > 0 {
		return e.Env.Spec.Providers[0].Name
	}
	return ""
}

// decided pairs a spec with its decider and the addresses it reads.
type decided struct {
	doc     spec.Document
	id      string
	decider Decider
	reads   []addrs.Object
}

// specs returns the specs to plan: every one when focus is nil, else the
// focused ones and, transitively, every spec that reads an object one of
// them reads — a spec is never planned without the others on its target.
func (e *Engine) specs(focus []string) ([]decided, []plan.Note) {
	all := make([]decided, 0, len(e.Specs))
	var errs []plan.Note
	def := e.DefaultProvider()
	for _, d := range e.Specs {
		h := d.Head()
		if h.Kind == "Environment" {
			continue
		}
		dec, ok := Lookup(h.Kind)
		if !ok {
			errs = append(errs, plan.Note{Severity: diag.Error, Spec: h.ID(), Pos: h.Src.Pos, Message: "no decider for kind " + h.Kind + " in this release"})
			continue
		}
		all = append(all, decided{doc: d, id: h.ID(), decider: dec, reads: dec.Reads(d, def)})
	}
	if focus == nil {
		return all, errs
	}
	byObject := map[addrs.Object][]int{}
	byID := map[string]int{}
	for i, d := range all {
		byID[d.id] = i
		for _, a := range d.reads {
			byObject[a] = append(byObject[a], i)
		}
	}
	in := make([]bool, len(all))
	var stack []int
	for _, id := range focus {
		if i, ok := byID[id]; ok && !in[i] {
			in[i] = true
			stack = append(stack, i)
		}
	}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, a := range all[i].reads {
			for _, j := range byObject[a] {
				if !in[j] {
					in[j] = true
					stack = append(stack, j)
				}
			}
		}
	}
	out := all[:0:0]
	for i, d := range all {
		if in[i] {
			out = append(out, d)
		}
	}
	return out, errs
}

// Observation is what one tick read.
type Observation struct {
	Objects map[addrs.Object]providers.Object
	// Failed holds a provider error per address that could not be read.
	Failed map[addrs.Object]string
	// Listed holds each list query's objects by ListKey, ListFailed why
	// one could not be answered.
	Listed     map[string][]providers.Object
	ListFailed map[string]string
}

// Value returns an attribute's observed value. An absent attribute of an
// existing object reads as the zero of its type (an absent annotation is
// 0, as Knative reads it), so has is true; a missing object is not.
func (o Observation) Value(a addrs.Attr, t values.Type) (values.Value, bool) {
	obj, ok := o.Objects[a.Object]
	if !ok || !obj.Exists {
		return values.Value{}, false
	}
	v, ok := obj.Attributes[a.Path]
	if !ok {
		if t.Numeric() {
			return values.Numeric(t, 0), true
		}
		return values.Value{}, false
	}
	return v, true
}

// List returns what a list query (one a decider's Lists asked for)
// answered, or why it could not be answered (failed).
func (o Observation) List(q providers.ListRequest) (objs []providers.Object, why string, failed bool) {
	k := ListKey(q)
	if why, failed := o.ListFailed[k]; failed {
		return nil, why, true
	}
	return o.Listed[k], "", false
}

// observe reads every address the specs target, one batch per provider.
func (e *Engine) observe(ctx context.Context, now time.Time, ds []decided) Observation {
	obs := Observation{Objects: map[addrs.Object]providers.Object{}, Failed: map[addrs.Object]string{}}
	byProv := map[string][]addrs.Object{}
	seen := map[addrs.Object]bool{}
	for _, d := range ds {
		for _, a := range d.reads {
			if !seen[a] {
				seen[a] = true
				byProv[a.Provider] = append(byProv[a.Provider], a)
			}
		}
	}
	e.read(ctx, now, byProv, obs.Objects, obs.Failed)
	e.list(ctx, now, ds, &obs)
	return obs
}

// read reads objects, one batch per provider, into objects, and says in
// failed why any could not be read.
func (e *Engine) read(ctx context.Context, now time.Time, byProv map[string][]addrs.Object, objects map[addrs.Object]providers.Object, failed map[addrs.Object]string) {
	for _, name := range slices.Sorted(maps.Keys(byProv)) {
		as := byProv[name]
		p, ok := e.Providers[name]
		if !ok {
			for _, a := range as {
				failed[a] = fmt.Sprintf("provider %q is not configured", name)
			}
			continue
		}
		resp := p.Read(ctx, providers.ReadRequest{Now: now, Addresses: as})
		for _, d := range resp.Diagnostics {
			if d.Severity != providers.Error {
				continue
			}
			if d.Address != nil {
				failed[*d.Address] = d.Message
				continue
			}
			for _, a := range as {
				failed[a] = d.Message + ": " + d.Detail
			}
		}
		for i, o := range resp.Objects {
			if i < len(as) && o.Address == as[i] {
				objects[o.Address] = o
			}
		}
		for _, a := range as {
			if _, ok := objects[a]; !ok {
				if _, bad := failed[a]; !bad {
					failed[a] = "the provider returned nothing for it"
				}
			}
		}
	}
}

// list answers the list queries of the specs that discover their
// objects, each query once.
func (e *Engine) list(ctx context.Context, now time.Time, ds []decided, obs *Observation) {
	def := e.DefaultProvider()
	for _, d := range ds {
		l, ok := d.decider.(Lister)
		if !ok {
			continue
		}
		for _, q := range l.Lists(d.doc, def) {
			k := ListKey(q)
			if _, done := obs.Listed[k]; done {
				continue
			}
			if _, done := obs.ListFailed[k]; done {
				continue
			}
			if obs.Listed == nil {
				obs.Listed, obs.ListFailed = map[string][]providers.Object{}, map[string]string{}
			}
			p, ok := e.Providers[q.Provider]
			if !ok {
				obs.ListFailed[k] = fmt.Sprintf("provider %q is not configured", q.Provider)
				continue
			}
			q.Now = now
			resp := p.List(ctx, q)
			var why []string
			for _, dg := range resp.Diagnostics {
				if dg.Severity == providers.Error {
					why = append(why, dg.Message)
				}
			}
			if len(why) > 0 {
				obs.ListFailed[k] = strings.Join(why, "; ")
				continue
			}
			obs.Listed[k] = resp.Objects
			for _, o := range resp.Objects {
				obs.Objects[o.Address] = o
			}
		}
	}
}

// Plan runs observe → decide → diff → gate → dry run at now for the specs
// in focus (nil: every spec) and every spec sharing a target with them. It
// records what it saw in st (each attribute's user value at adoption and
// each policy's state) and changes nothing else.
func (e *Engine) Plan(ctx context.Context, now time.Time, st *state.State, focus []string) *plan.Plan {
	p := &plan.Plan{FormatVersion: plan.FormatVersion, SetpointVersion: e.Version, At: now, Dir: e.Dir,
		Specs: map[string]string{}, Observed: map[string]string{}, Changes: []plan.Change{}, Held: []plan.Change{},
		Notes: []plan.Note{}, Errors: []plan.Note{}, Due: map[string]time.Time{}}
	ds, errs := e.specs(focus)
	p.Errors = append(p.Errors, errs...)
	for _, f := range e.Feeds {
		f.Pull(ctx, now)
	}
	obs := e.observe(ctx, now, ds)
	// An apply cut off by a crash is settled first, from what the world
	// says, so the deciders and the gate read a state that matches it.
	p.Notes = append(p.Notes, e.settle(ctx, now, st, obs)...)
	// What this plan adopts into the state: a saved plan carries it, so
	// applying it records the user's values a read-only plan never saved.
	var adopted []plan.Adoption
	p.Record(func(p *plan.Plan) {
		p.Observed = obs.fingerprintable()
		p.Specs = e.digests(ds)
		p.Adopted = adopted
	})
	tick := &Tick{Ctx: ctx, Now: now, Source: e.Signals, DefaultProvider: e.DefaultProvider(), peers: peersOf(ds)}

	var intents []intent.Intent
	bySpec := map[string]decided{}
	for _, d := range ds {
		bySpec[d.id] = d
		tick.forSpec()
		its, notes, errs := d.decider.Decide(tick, d.doc, d.reads, obs, st)
		p.Notes = append(p.Notes, notes...)
		p.Errors = append(p.Errors, errs...)
		intents = append(intents, its...)
	}
	var gitops []string
	if e.Env != nil {
		gitops = e.Env.Spec.GitopsManagers
	}
	policies := map[addrs.Attr]gate.Policy{}
	for _, d := range Combine(intents, obs.Value) {
		if !d.Set {
			continue
		}
		if why, failed := obs.Failed[d.Attr.Object]; failed {
			// Nothing is decided on an object that could not be read.
			p.Errors = append(p.Errors, plan.Note{Severity: diag.Error, Spec: d.Primary.Source, Pos: d.Primary.SourcePos, Message: fmt.Sprintf("reading %s: %s", d.Attr.Object, why)})
			continue
		}
		o := obs.Objects[d.Attr.Object]
		if d.Primary.Delete {
			if pc, ok := e.deletion(d, o, bySpec, obs, gitops); ok {
				if pc.Held != nil {
					p.Held = append(p.Held, pc)
				} else {
					p.Changes = append(p.Changes, pc)
				}
			}
			continue
		}
		cur, has := obs.Value(d.Attr, d.Value.Type())
		if has && cur.Type() != d.Value.Type() {
			p.Errors = append(p.Errors, plan.Note{Severity: diag.Error, Spec: d.Primary.Source, Pos: d.Primary.SourcePos,
				Message: fmt.Sprintf("%s: the provider reports a %s, the spec decides a %s: nothing is changed", d.Attr, cur.Type(), d.Value.Type())})
			continue
		}
		entry := st.Entry(d.Attr)
		if entry.User == nil && entry.Applied == nil && has && o.Exists {
			// (With a record of setpoint's write, the value there is its
			// own, as on an object it created: nothing to adopt.)
			if _, present := o.Attributes[d.Attr.Path]; present {
				if note := readopt(entry, cur); note != "" {
					p.Notes = append(p.Notes, plan.Note{Severity: diag.Warning, Spec: d.Primary.Source, Pos: d.Primary.SourcePos, Message: fmt.Sprintf("%s: %s", d.Attr, note)})
				} else {
					v := cur
					entry.User = &v // adoption: the value the workload had
				}
				adopted = append(adopted, adoptionOf(d.Attr, entry))
			}
		}
		specs := d.Specs()
		rules := make([]gate.Rules, 0, len(specs))
		primary := 0
		for i, id := range specs {
			sp := bySpec[id]
			r := sp.decider.Rules(sp.doc, sp.reads, dimensionOf(d.Intents, id), obs)
			r.Spec = id
			rules = append(rules, r)
			if id == d.Primary.Source {
				primary = i
			}
		}
		if r := rules[primary]; r.Policy != nil {
			policies[d.Attr] = r.Policy
		}
		ch := gate.Change{Current: cur, HasCurrent: has, Desired: d.Value, Manager: o.Managers[d.Attr.Path]}
		dec := gate.Evaluate(now, gitops, rules, primary, ch, entry)
		restoreOnly := onlyRestores(d.Intents)
		if has && cur == d.Value {
			if !restoreOnly {
				// Nothing to change: the policies saw it (a stability
				// window is not restarted by a recommendation equal to the
				// current value within its tolerance).
				continue
			}
			if ch.Manager != gate.SetpointManager {
				// The user's value is there and the field is not
				// setpoint's: the restore is done. Kept, the record would
				// restore again over whatever the user writes next.
				st.Delete(d.Attr)
				continue
			}
			// The user's value, still setpoint's field: the restore
			// hands it back, moving no value.
		}
		if has && cur == dec.Value && o.Exists && dec.Hold == nil && d.Conflict == "" && !restoreOnly {
			// Capped or bounded to where it already is: nothing to do.
			continue
		}
		pc := plan.Change{
			Address: d.Attr.Object, Attribute: d.Attr.Path, Action: action.Update, Dimension: string(d.Dimension),
			From: cur.String(), To: dec.Value.String(), Wanted: d.Value.String(),
			Reason: d.Primary.Rationale, Bounds: dec.Bounds, Held: dec.Hold, Manager: ch.Manager,
			Spec: d.Primary.Source, SpecPos: d.Primary.SourcePos.String(), Value: dec.Value, Restore: d.Primary.Restore,
			By: specs, Group: d.Primary.Group, Force: dec.Force, InPlace: d.Primary.InPlace,
		}
		if _, set := o.Attributes[d.Attr.Path]; has && set {
			seen := cur
			pc.Seen = &seen
		}
		if pc.Held == nil && o.Exists && o.ObservedGeneration > 0 && o.ObservedGeneration < o.Generation {
			// Its controller has not acted on the last change yet: a
			// change now would pile onto a rollout in progress.
			pc.Held = &plan.Hold{Kind: plan.HoldRollout, Detail: fmt.Sprintf("observedGeneration %d is behind generation %d", o.ObservedGeneration, o.Generation)}
		}
		if !o.Exists {
			if d.Create == nil {
				continue
			}
			pc.Action, pc.From = action.Create, ""
			pc.Create = maps.Clone(d.Create.Attributes)
			if pc.Create == nil {
				pc.Create = map[addrs.Path]values.Value{}
			}
			pc.Create[d.Attr.Path] = dec.Value
		}
		for _, c := range d.Contributors {
			pc.Contributors = append(pc.Contributors, plan.Contributor{Spec: c.Source, Pos: c.SourcePos.String(), Kind: string(c.Kind), Value: c.Value.String(), Rationale: c.Rationale})
		}
		if d.Conflict != "" {
			pc.Held = &plan.Hold{Kind: plan.HoldTwoExact, Detail: d.Conflict}
		}
		if pc.Held != nil && !dec.Due.IsZero() {
			for _, id := range specs {
				if t, ok := p.Due[id]; !ok || dec.Due.Before(t) {
					p.Due[id] = dec.Due
				}
			}
		}
		if pc.Held != nil {
			p.Held = append(p.Held, pc)
		} else {
			p.Changes = append(p.Changes, pc)
		}
	}
	for id, at := range tick.due {
		if t, ok := p.Due[id]; !ok || at.Before(t) {
			p.Due[id] = at
		}
	}
	e.coupled(p, obs, policies)
	e.releases(ctx, now, p, st, intents, obs)
	if !e.NoDryRun {
		e.dryRun(ctx, now, p, st)
	}
	// After the dry run: an object whose change it held still needs its
	// repair.
	e.repairs(p, st, obs, intents, bySpec, gitops)
	sortChanges(p.Changes)
	sortChanges(p.Held)
	return p
}

// deletion is the plan's change for a delete intent: the whole object
// goes, held by a pause, a mode other than enforce, or the spec's rules
// (deletes not enabled). Nothing to do for an object that is gone.
func (e *Engine) deletion(d Desired, o providers.Object, bySpec map[string]decided, obs Observation, gitops []string) (plan.Change, bool) {
	if !o.Exists {
		return plan.Change{}, false
	}
	it := d.Primary
	sp := bySpec[it.Source]
	r := sp.decider.Rules(sp.doc, sp.reads, it.Dimension, obs)
	pc := plan.Change{Address: d.Attr.Object, Action: action.Delete, Dimension: string(it.Dimension), Reason: it.Rationale,
		Spec: it.Source, SpecPos: it.SourcePos.String(), By: []string{it.Source}}
	// The gate's common core weighs a GitOps controller managing any of
	// the object's fields: deleting what it manages starts a tug of war.
	managers := slices.Sorted(maps.Values(o.Managers))
	manager := ""
	if i := slices.IndexFunc(managers, func(m string) bool { return slices.Contains(gitops, m) }); i >= 0 {
		manager = managers[i]
	}
	pc.Held = gate.Core(gitops, []gate.Rules{r}, 0, manager)
	if pc.Held == nil && r.NoDelete != "" {
		pc.Held = &plan.Hold{Kind: plan.HoldPolicy, Policy: "delete", Detail: r.NoDelete}
	}
	return pc, true
}

// peersOf lists, for each spec, the specs of its group.
func peersOf(ds []decided) map[string][]spec.Document {
	root := groupRoots(ds)
	members := map[int][]spec.Document{}
	for i, d := range ds {
		members[root[i]] = append(members[root[i]], d.doc)
	}
	out := make(map[string][]spec.Document, len(ds))
	for i, d := range ds {
		out[d.id] = members[root[i]]
	}
	return out
}

func sortChanges(cs []plan.Change) {
	sort.SliceStable(cs, func(i, j int) bool {
		if cs[i].Address != cs[j].Address {
			return cs[i].Address.String() < cs[j].Address.String()
		}
		return cs[i].Attribute.String() < cs[j].Attribute.String()
	})
}

// dimensionOf is the dimension a spec's intent on the attribute is in.
func dimensionOf(its []intent.Intent, id string) intent.Dimension {
	for _, it := range its {
		if it.Source == id {
			return it.Dimension
		}
	}
	return ""
}

type groupKey struct {
	obj   addrs.Object
	group string
}

// coupled holds a group of coupled attributes together: if one is held,
// every one is; and the values the group would have after this plan must
// satisfy its policy's rule (a container's request ≤ its limit).
func (e *Engine) coupled(p *plan.Plan, obs Observation, policies map[addrs.Attr]gate.Policy) {
	heldIn := map[groupKey]plan.Change{}
	for _, c := range p.Held {
		if c.Group != "" {
			if _, ok := heldIn[groupKey{c.Address, c.Group}]; !ok {
				heldIn[groupKey{c.Address, c.Group}] = c
			}
		}
	}
	members := map[groupKey][]int{}
	for i, c := range p.Changes {
		if c.Group != "" {
			members[groupKey{c.Address, c.Group}] = append(members[groupKey{c.Address, c.Group}], i)
		}
	}
	hold := map[int]*plan.Hold{}
	for k, idx := range members {
		if h, ok := heldIn[k]; ok {
			for _, i := range idx {
				hold[i] = &plan.Hold{Kind: plan.HoldCoupled, Attribute: h.Attribute.String(), Detail: h.Held.String()}
			}
			continue
		}
		pol := policies[addrs.Attr{Object: k.obj, Path: p.Changes[idx[0]].Attribute}]
		if pol == nil {
			continue
		}
		after := map[addrs.Path]values.Value{}
		var paths []addrs.Path
		for _, i := range idx {
			after[p.Changes[i].Attribute] = p.Changes[i].Value
			paths = append(paths, p.Changes[i].Attribute)
		}
		value := func(path addrs.Path) (values.Value, bool) {
			if v, ok := after[path]; ok {
				return v, true
			}
			v, ok := obs.Objects[k.obj].Attributes[path]
			return v, ok
		}
		if err := pol.Coherent(paths, value); err != nil {
			for _, i := range idx {
				hold[i] = &plan.Hold{Kind: plan.HoldInvalid, Detail: err.Error()}
			}
		}
	}
	if len(hold) == 0 {
		return
	}
	kept := p.Changes[:0:0]
	for i, c := range p.Changes {
		if h, ok := hold[i]; ok {
			c.Held = h
			p.Held = append(p.Held, c)
			continue
		}
		kept = append(kept, c)
	}
	p.Changes = kept
}

// objectChanges groups changes per provider and object, each object's
// change carrying every attribute setpoint owns on it (from the state)
// with the new values over them, so a server-side apply keeps every field
// setpoint owned.
//
// A state entry whose path does not parse (an edited state) fails its
// object's change rather than drop a field setpoint owns: bad names why.
func objectChanges(cs []plan.Change, st *state.State) (byProv map[string][]providers.ObjectChange, members map[addrs.Object][]int, bad map[addrs.Object]string) {
	byProv = map[string][]providers.ObjectChange{}
	bad = map[addrs.Object]string{}
	index := map[addrs.Object]int{}
	members = map[addrs.Object][]int{}
	for i, c := range cs {
		a := c.Address
		members[a] = append(members[a], i)
		j, ok := index[a]
		if !ok {
			oc := providers.ObjectChange{Address: a, Action: action.Update, Attributes: map[addrs.Path]values.Value{}, Manager: gate.SetpointManager}
			if so, ok := st.Object(a); ok {
				for path, e := range so.Attrs {
					if e.Applied == nil {
						continue
					}
					pp, err := addrs.ParsePath(path)
					if err != nil {
						bad[a] = fmt.Sprintf("the state holds an attribute setpoint owns on it with a malformed path: %v", err)
						continue
					}
					oc.Attributes[pp] = e.Applied.Value
				}
			}
			byProv[a.Provider] = append(byProv[a.Provider], oc)
			j = len(byProv[a.Provider]) - 1
			index[a] = j
		}
		oc := &byProv[a.Provider][j]
		if c.Release {
			delete(oc.Attributes, c.Attribute)
			oc.Released = append(oc.Released, c.Attribute)
			continue
		}
		if c.Action == action.Create {
			oc.Action = action.Create
			for k, v := range c.Create {
				oc.Attributes[k] = v
			}
		}
		if c.Action == action.Delete {
			// The whole object: no attribute moves.
			oc.Action = action.Delete
			oc.Reason = "deleted: " + c.Reason
			continue
		}
		if c.Repair {
			// Nothing moves: the object's owned fields are carried as
			// above, and none is taken from anyone.
			continue
		}
		if c.Restore {
			// Written with the user's value and handed back in one change:
			// left setpoint's, the next apply that no longer names it
			// would drop it (server-side apply removes a field nobody
			// else manages) or carry a stale record over it.
			delete(oc.Attributes, c.Attribute)
			if oc.Restored == nil {
				oc.Restored = map[addrs.Path]values.Value{}
			}
			oc.Restored[c.Attribute] = c.Value
			oc.Force = oc.Force || c.Force
			oc.Reason = joinReason(oc.Reason, fmt.Sprintf("%s %s → %s (restored, handed back)", c.Attribute, orUnset(c.From), c.To), c.Reason)
			continue
		}
		oc.Attributes[c.Attribute] = c.Value
		oc.Changed = append(oc.Changed, c.Attribute)
		if c.Seen != nil {
			if oc.Seen == nil {
				oc.Seen = map[addrs.Path]values.Value{}
			}
			oc.Seen[c.Attribute] = *c.Seen
		}
		oc.Force = oc.Force || c.Force
		if c.InPlace != "" {
			oc.InPlace = c.InPlace
		}
		oc.Reason = joinReason(oc.Reason, fmt.Sprintf("%s %s → %s", c.Attribute, orUnset(c.From), c.To), c.Reason)
	}
	return byProv, members, bad
}

// onlyRestores says every intent on an attribute is a restore (no spec
// that still enforces it has a say).
func onlyRestores(its []intent.Intent) bool {
	for _, it := range its {
		if !it.Restore {
			return false
		}
	}
	return len(its) > 0
}

// joinReason adds one change's what and why to an object's reason.
func joinReason(all, what, why string) string {
	if why != "" {
		what += ": " + why
	}
	if all != "" {
		all += "; "
	}
	return all + what
}

func orUnset(s string) string {
	if s == "" {
		return "unset"
	}
	return s
}

// dryRun asks each provider whether it would accept the changes the gate
// let through; a refused object's changes are held with the provider's
// reason, so a rejection shows in the plan and not only in apply.
func (e *Engine) dryRun(ctx context.Context, now time.Time, p *plan.Plan, st *state.State) {
	if len(p.Changes) == 0 {
		return
	}
	byProv, members, bad := objectChanges(p.Changes, st)
	refused := map[int]string{}
	for a, why := range bad {
		for _, m := range members[a] {
			refused[m] = why
		}
	}
	for _, name := range slices.Sorted(maps.Keys(byProv)) {
		prov, ok := e.Providers[name]
		if !ok {
			continue // Apply reports it with the spec's position
		}
		if e.SkipDryRun[name] {
			continue
		}
		sent := sendable(byProv[name], bad)
		if len(sent) == 0 {
			continue
		}
		resp := prov.PlanChange(ctx, providers.PlanChangeRequest{Now: now, Changes: sent})
		for i, oc := range sent {
			if why := refusal(resp.Results, resp.Diagnostics, i, oc); why != "" {
				for _, m := range members[oc.Address] {
					refused[m] = why
				}
				continue
			}
			// What a provider warns of an accepted change (releasing a route
			// group stops its routing) goes in the plan beside it.
			for _, d := range resp.Diagnostics {
				if d.Severity != providers.Warning || d.Address == nil || *d.Address != oc.Address || len(members[oc.Address]) == 0 {
					continue
				}
				d.Spec = p.Changes[members[oc.Address][0]].Spec
				p.Notes = append(p.Notes, d)
			}
		}
	}
	if len(refused) == 0 {
		return
	}
	kept := p.Changes[:0:0]
	for i, c := range p.Changes {
		if why, ok := refused[i]; ok {
			c.Held = &plan.Hold{Kind: plan.HoldRejected, Detail: why}
			p.Held = append(p.Held, c)
			continue
		}
		kept = append(kept, c)
	}
	p.Changes = kept
}

// sendable drops the objects whose change could not be built whole: they
// are not sent to a provider.
func sendable(ocs []providers.ObjectChange, bad map[addrs.Object]string) []providers.ObjectChange {
	out := make([]providers.ObjectChange, 0, len(ocs))
	for _, oc := range ocs {
		if bad[oc.Address] == "" {
			out = append(out, oc)
		}
	}
	return out
}

// refusal says why a provider did not take (or, in a dry run, would not
// take) the i-th object's change of a batch; "" when it did. Results are
// matched by position, and no answer is no acceptance.
func refusal(results []providers.ObjectResult, diags []providers.Diagnostic, i int, oc providers.ObjectChange) string {
	switch {
	case i >= len(results):
		why := "the provider did not answer for this change"
		for _, d := range diags {
			if d.Severity == providers.Error {
				return why + ": " + d.Error()
			}
		}
		return why
	case !results[i].Address.IsZero() && results[i].Address != oc.Address:
		return fmt.Sprintf("the provider answered for %s in its place", results[i].Address)
	case results[i].Err != "":
		return results[i].Err
	case len(results[i].Conflicts) > 0:
		var cs []string
		for _, c := range results[i].Conflicts {
			cs = append(cs, c.Path.String()+" owned by "+c.Manager)
		}
		return "conflicts: " + strings.Join(cs, ", ")
	}
	return ""
}

// Result of applying one change.
type Result struct {
	Change plan.Change
	Err    string
}

// Apply writes a plan's changes, one batch per provider, one change per
// object (all of its attributes together, or none). Only changes that
// succeeded are recorded in st; a failure names the spec's file:line.
func (e *Engine) Apply(ctx context.Context, now time.Time, p *plan.Plan, st *state.State) []Result {
	byProv, members, bad := objectChanges(p.Changes, st)
	var results []Result
	for _, name := range slices.Sorted(maps.Keys(byProv)) {
		ocs := byProv[name]
		prov, ok := e.Providers[name]
		sent := sendable(ocs, bad)
		var resp providers.ApplyResponse
		if ok && len(sent) > 0 {
			resp = prov.Apply(ctx, providers.ApplyRequest{Now: now, Changes: sent})
		}
		ri := 0 // index into resp.Results: objects sent, in order
		for _, oc := range ocs {
			why := bad[oc.Address]
			if why == "" {
				if ok {
					why = refusal(resp.Results, resp.Diagnostics, ri, oc)
				} else {
					why = fmt.Sprintf("provider %q is not configured", name)
				}
				ri++
			}
			for _, m := range members[oc.Address] {
				c := p.Changes[m]
				r := Result{Change: c}
				attr := addrs.Attr{Object: c.Address, Path: c.Attribute}
				switch {
				case why != "":
					// The journal's mark stays: whether it happened after
					// all (a call cut off) is settled from a read.
					r.Err = fmt.Sprintf("%s: %s %s: %s", c.SpecPos, c.Address, c.Attribute, why)
					e.logger().Error("apply failed", "address", c.Address.String(), "attribute", c.Attribute.String(), "error", why)
				case c.Action == action.Delete:
					// The object is gone: so is what setpoint knew of it.
					if o, ok := st.Object(c.Address); ok {
						for k := range o.Attrs {
							if path, err := addrs.ParsePath(k); err == nil {
								st.Delete(addrs.Attr{Object: c.Address, Path: path})
							}
						}
					}
				case c.Release:
					// Handed back: a tombstone remembers what setpoint wrote
					// and the user's value before it.
					tombstone(st.Entry(attr), now)
				case c.Restore:
					// The user's value is back: setpoint no longer owns it.
					st.Delete(attr)
				case c.Repair:
					// Nothing moved: the record of the last apply stands
					// (its time keeps the cooldown).
				default:
					en := st.Entry(attr)
					en.Applied = &state.Applied{Value: c.Value, At: now, By: c.By}
					// A live spec applied it: no confirmed deletion holds.
					en.Pending, en.ReleaseConfirmed = nil, false
					// A created object's other attributes are setpoint's too:
					// its next change must carry them.
					for k, v := range c.Create {
						if k == c.Attribute {
							continue
						}
						// A re-created object's values replace an old one's.
						st.Entry(addrs.Attr{Object: c.Address, Path: k}).Applied = &state.Applied{Value: v, At: now, By: c.By}
					}
				}
				results = append(results, r)
			}
		}
		for _, d := range resp.Diagnostics {
			if d.Severity == providers.Error {
				e.logger().Error("provider", "provider", name, "error", d.Error())
			}
		}
	}
	return results
}

// Readers lists the specs that read an object: the keys to reconcile
// when a provider reports it changed.
func (e *Engine) Readers(a addrs.Object) []string {
	ds, _ := e.specs(nil)
	var out []string
	for _, d := range ds {
		if slices.Contains(d.reads, a) {
			out = append(out, d.id)
		}
	}
	return out
}

// Observe re-reads what a plan observes, for the staleness check of a
// saved plan.
func (e *Engine) Observe(ctx context.Context, now time.Time) map[string]string {
	ds, _ := e.specs(nil)
	return e.observe(ctx, now, ds).fingerprintable()
}

// SpecDigests returns each spec's digest, as a saved plan records them.
func (e *Engine) SpecDigests() map[string]string {
	ds, _ := e.specs(nil)
	return e.digests(ds)
}

// digests are the specs' digests and the Environment's: it decides
// providers, GitOps managers and the state, so a saved plan made under
// another one is stale too.
func (e *Engine) digests(ds []decided) map[string]string {
	out := make(map[string]string, len(ds)+1)
	for _, d := range ds {
		out[d.id] = spec.Digest(d.doc)
	}
	if e.Env != nil {
		out[e.Env.ID()] = spec.Digest(e.Env)
	}
	return out
}

// fingerprintable lists every object's existence and generation and every
// spec attribute with its manager. Status is left out: it moves by itself
// and does not make a plan stale.
func (o Observation) fingerprintable() map[string]string {
	out := make(map[string]string, len(o.Objects)*6)
	for _, obj := range o.Objects {
		a := obj.Address.String()
		out[a] = fmt.Sprintf("exists=%t generation=%d", obj.Exists, obj.Generation)
		if obj.ObservedGeneration != 0 {
			out[a] += fmt.Sprintf(" observedGeneration=%d", obj.ObservedGeneration)
		}
		for k, v := range obj.Attributes {
			if ks := k.String(); !strings.HasPrefix(ks, "status.") {
				out[a+" "+ks] = plan.ObservedValue(v, obj.Managers[k])
			}
		}
	}
	for a, why := range o.Failed {
		out[a.String()] = "unreadable: " + why
	}
	return out
}
