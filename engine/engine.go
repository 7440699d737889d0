// Package engine runs setpoint's loop: observe through providers and
// signals, decide per spec, combine intents, gate, plan, and apply. The
// core knows nothing of Kubernetes or BPF: providers do.
package engine

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/decide/nfr"
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
	Env       *spec.Environment
	NFRs      []*spec.NFR
	Providers map[string]providers.Provider
	Signals   signals.Source
	Version   string
	Dir       string
	Log       *slog.Logger
}

// target is what one NFR acts on.
type target struct {
	spec     *spec.NFR
	workload providers.Address
	hpa      providers.Address // Deployments only
}

func (e *Engine) logger() *slog.Logger {
	if e.Log != nil {
		return e.Log
	}
	return slog.Default()
}

func (e *Engine) targets() []target {
	def := ""
	if e.Env != nil && len(e.Env.Spec.Providers) > 0 {
		def = e.Env.Spec.Providers[0].Name
	}
	out := make([]target, 0, len(e.NFRs))
	for _, n := range e.NFRs {
		prov := n.Spec.Target.Provider
		if prov == "" {
			prov = def
		}
		t := target{spec: n, workload: providers.Address{Provider: prov, Kind: n.Spec.Target.Kind, Namespace: n.Metadata.Namespace, Name: n.Spec.Target.Name}}
		if t.workload.Kind == "Deployment" {
			t.hpa = providers.Address{Provider: prov, Kind: "HorizontalPodAutoscaler", Namespace: t.workload.Namespace, Name: t.workload.Name}
		}
		out = append(out, t)
	}
	return out
}

// Observation is what one tick read.
type Observation struct {
	Objects map[string]providers.Object // by address
	// Failed holds a provider error per address that could not be read.
	Failed map[string]string
}

// observe reads every address the specs target, one batch per provider.
func (e *Engine) observe(ctx context.Context, now time.Time, ts []target) Observation {
	obs := Observation{Objects: map[string]providers.Object{}, Failed: map[string]string{}}
	byProv := map[string][]providers.Address{}
	for _, t := range ts {
		byProv[t.workload.Provider] = append(byProv[t.workload.Provider], t.workload)
		if t.hpa.Kind != "" {
			byProv[t.hpa.Provider] = append(byProv[t.hpa.Provider], t.hpa)
		}
	}
	names := make([]string, 0, len(byProv))
	for n := range byProv {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
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

// Default queries, evaluated once per tick for every workload and split by
// labels. CPU and memory series carry only the pod, so they are joined to
// workloads through kube_pod_labels.
const (
	QueryRPS = `sum by (namespace, app) (rate(http_requests_total{code!~"5.."}[1m]))`
	QueryCPU = `sum by (namespace, label_app) (rate(container_cpu_usage_seconds_total[1m]) * on(namespace, pod) group_left(label_app) kube_pod_labels) * 1000`
	QueryP99 = `histogram_quantile(0.99, sum by (namespace, app, le) (rate(http_request_duration_seconds_bucket[1m])))`
)

// QueryWorkingSet is the mean over pods of each container's working set
// averaged over window.
func QueryWorkingSet(window time.Duration) string {
	return fmt.Sprintf(`avg by (namespace, label_app, container) (avg_over_time(container_memory_working_set_bytes[%s]) * on(namespace, pod) group_left(label_app) kube_pod_labels)`, promDuration(window))
}

func promDuration(d time.Duration) string {
	if d%time.Minute == 0 {
		return strconv.Itoa(int(d/time.Minute)) + "m"
	}
	return strconv.Itoa(int(d/time.Second)) + "s"
}

// gather evaluates the signals of every target: grouped default queries
// once, overrides one by one.
func (e *Engine) gather(ctx context.Context, now time.Time, ts []target) map[*spec.NFR]nfr.Signals {
	out := make(map[*spec.NFR]nfr.Signals, len(ts))
	if e.Signals == nil {
		for _, t := range ts {
			out[t.spec] = nfr.Signals{Missing: map[string]string{"rps": "no signal source", "cpu": "no signal source", "p99": "no signal source"}}
		}
		return out
	}
	type grouped struct {
		vals map[string]float64
		err  string
	}
	run := func(expr string, by ...string) grouped {
		r, err := e.Signals.Query(ctx, expr, now)
		if err != nil {
			return grouped{err: err.Error()}
		}
		return grouped{vals: r.By(by...), err: r.NoData()}
	}
	rps := run(QueryRPS, "namespace", "app")
	cpu := run(QueryCPU, "namespace", "label_app")
	p99 := run(QueryP99, "namespace", "app")
	ws := map[time.Duration]grouped{}
	for _, t := range ts {
		w := t.spec.Spec.Memory.Window.D()
		if _, ok := ws[w]; !ok && t.spec.Spec.Enforcement.Memory != spec.ModeOff {
			ws[w] = run(QueryWorkingSet(w), "namespace", "label_app", "container")
		}
	}
	pick := func(g grouped, key, name string, s *nfr.Signals) *float64 {
		if v, ok := g.vals[key]; ok {
			return &v
		}
		why := "no series for this workload"
		if g.err != "" {
			why = g.err
		}
		s.Missing[name] = why
		return nil
	}
	for _, t := range ts {
		n := t.spec
		key := n.Metadata.Namespace + "/" + n.Spec.Target.Name
		s := nfr.Signals{Missing: map[string]string{}, WorkingSet: map[string]float64{}}
		s.RPS = e.override(ctx, now, n.Spec.Signals.RPS, "rps", &s, func() *float64 { return pick(rps, key, "rps", &s) })
		s.CPUMilli = e.override(ctx, now, n.Spec.Signals.CPU, "cpu", &s, func() *float64 { return pick(cpu, key, "cpu", &s) })
		s.P99 = e.override(ctx, now, n.Spec.Signals.P99, "p99", &s, func() *float64 { return pick(p99, key, "p99", &s) })
		if g, ok := ws[n.Spec.Memory.Window.D()]; ok {
			prefix := key + "/"
			for k, v := range g.vals {
				if c, ok := strings.CutPrefix(k, prefix); ok {
					s.WorkingSet[c] = v
				}
			}
			if len(s.WorkingSet) == 0 {
				for _, c := range n.Spec.Memory.Containers {
					s.Missing["workingSet/"+c] = orDefault(g.err, "no series for this workload")
				}
			}
		}
		if n.Spec.Signals.WorkingSet != "" {
			// An override gives one value for every sized container.
			if v := e.override(ctx, now, n.Spec.Signals.WorkingSet, "workingSet", &s, func() *float64 { return nil }); v != nil {
				for _, c := range n.Spec.Memory.Containers {
					s.WorkingSet[c] = *v
				}
			}
		}
		out[n] = s
	}
	return out
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// override evaluates a spec's own query for one signal, or falls back to
// the grouped default.
func (e *Engine) override(ctx context.Context, now time.Time, expr, name string, s *nfr.Signals, def func() *float64) *float64 {
	if expr == "" {
		return def()
	}
	r, err := e.Signals.Query(ctx, expr, now)
	if err != nil {
		s.Missing[name] = err.Error()
		return nil
	}
	v, err := r.Value()
	if err != nil {
		s.Missing[name] = err.Error()
		return nil
	}
	return &v
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
	ts := e.targets()
	obs := e.observe(ctx, now, ts)
	p.Observed = obs.fingerprintable()
	sigs := e.gather(ctx, now, ts)

	var intents []intent.Intent
	bySpec := map[string]target{}
	for _, t := range ts {
		n := t.spec
		p.Specs[n.ID()] = spec.Digest(n)
		bySpec[n.ID()] = t
		pos := n.Src.Pos.String()
		if why, failed := obs.Failed[t.workload.String()]; failed {
			p.Errors = append(p.Errors, plan.Note{Spec: n.ID(), Pos: n.Src.PosOf("spec.target").String(), Text: fmt.Sprintf("reading %s: %s", t.workload, why)})
			continue
		}
		w := obs.Objects[t.workload.String()]
		if !w.Exists {
			p.Notes = append(p.Notes, plan.Note{Spec: n.ID(), Pos: n.Src.PosOf("spec.target").String(), Text: fmt.Sprintf("target %s does not exist: nothing to do (setpoint creates only what a spec asks for)", t.workload)})
			continue
		}
		hpa := obs.Objects[t.hpa.String()]
		if t.hpa.Kind != "" && !hpa.Exists {
			hpa.Address = t.hpa
		}
		users := map[string]int64{}
		for _, o := range []providers.Object{w, hpa} {
			for attr, v := range o.Attributes {
				key := state.Key(o.Address.String(), attr)
				if e, ok := st.Entries[key]; ok && e.User != nil {
					users[attr] = *e.User
				} else if n, err := strconv.ParseInt(v, 10, 64); err == nil {
					users[attr] = n
				}
			}
		}
		out := nfr.Decide(nfr.Input{Spec: n, Target: w, HPA: hpa, Signals: sigs[n], UserValue: users})
		for _, note := range out.Notes {
			p.Notes = append(p.Notes, plan.Note{Spec: n.ID(), Pos: pos, Text: string(note.Dimension) + ": " + note.Text})
		}
		intents = append(intents, out.Intents...)
	}

	current := func(a providers.Address, attr string) (int64, bool) {
		o, ok := obs.Objects[a.String()]
		if !ok || !o.Exists {
			return 0, false
		}
		v, ok := o.Attributes[attr]
		if !ok {
			return 0, true // an absent annotation reads as 0, as Knative does
		}
		u := intent.Count
		if strings.HasSuffix(attr, ".memory") {
			u = intent.Bytes
		}
		return parseValue(u, v)
	}
	for _, d := range Combine(intents, current) {
		if !d.Set {
			continue
		}
		t := bySpec[d.Primary.Source]
		o := obs.Objects[d.Address.String()]
		cur, has := current(d.Address, d.Attribute)
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
		params := e.params(t, d.Dimension, obs.Objects[t.workload.String()])
		ch := gate.Change{Unit: d.Unit, Current: cur, HasCurrent: has, Desired: d.Value, Manager: o.Managers[d.Attribute]}
		dec := gate.Evaluate(now, params, ch, entry)
		entry.Window = dec.Window
		pc := plan.Change{
			Address: d.Address.String(), Attribute: d.Attribute, Action: plan.Update, Dimension: string(d.Dimension),
			From: intent.Format(cur, d.Unit), To: intent.Format(dec.Value, d.Unit), Wanted: intent.Format(d.Value, d.Unit),
			Reason: d.Primary.Rationale, Notes: dec.Notes, Held: dec.Held, Conflict: dec.Conflict, Manager: ch.Manager,
			Spec: d.Primary.Source, SpecPos: d.Primary.SourcePos.String(), Value: dec.Value,
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
	p.Seal()
	return p
}

// params are the gate's rules for one dimension of one spec.
func (e *Engine) params(t target, d intent.Dimension, workload providers.Object) gate.Params {
	s := t.spec.Spec
	p := gate.Params{Stability: s.Safety.Stability.D(), Tolerance: float64(s.Safety.Tolerance), Cooldown: s.Safety.Cooldown.D(), TakeOverFrom: s.TakeOverFrom}
	if e.Env != nil {
		p.GitOps = e.Env.Spec.GitopsManagers
	}
	switch {
	case s.Paused:
		p.Paused, p.PauseReason = true, "spec.paused at "+t.spec.Src.PosOf("spec.paused").String()
	case workload.Annotations[PausedAnnotation] == "true":
		p.Paused, p.PauseReason = true, PausedAnnotation+` is "true" on the target`
	}
	if d == intent.Replicas {
		p.Mode, p.MaxStep = s.Enforcement.Replicas, float64(s.Safety.MaxReplicaStep)
		p.Cap, p.CapField = int64(s.Safety.MaxReplicas), "safety.maxReplicas"
	} else {
		p.Mode, p.MaxStep = s.Enforcement.Memory, float64(s.Safety.MaxMemoryStep)
		if s.Safety.MaxMemory != nil {
			p.Cap, p.CapField = int64(*s.Safety.MaxMemory), "safety.maxMemory"
		}
	}
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
	return e.observe(ctx, now, e.targets()).fingerprintable()
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
