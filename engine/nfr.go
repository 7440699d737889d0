package engine

import (
	"fmt"
	"strconv"
	"time"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/decide/nfr"
	"github.com/setpoint-dev/setpoint/engine/gate"
	"github.com/setpoint-dev/setpoint/engine/intent"
	"github.com/setpoint-dev/setpoint/engine/plan"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/providers"
)

func init() { Register("NFR", nfrDecider{}) }

// nfrDecider adapts engine/decide/nfr to the loop.
type nfrDecider struct{}

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

// workloadAddress and hpaAddress are what an NFR acts on.
func workloadAddress(n *spec.NFR, def string) providers.Address {
	prov := n.Spec.Target.Provider
	if prov == "" {
		prov = def
	}
	return providers.Address{Provider: prov, Kind: n.Spec.Target.Kind, Namespace: n.Metadata.Namespace, Name: n.Spec.Target.Name}
}

func hpaAddress(w providers.Address) providers.Address {
	w.Kind = "HorizontalPodAutoscaler"
	return w
}

func (nfrDecider) Reads(doc spec.Document, def string) []providers.Address {
	n := doc.(*spec.NFR)
	w := workloadAddress(n, def)
	if w.Kind == "Deployment" {
		return []providers.Address{w, hpaAddress(w)}
	}
	return []providers.Address{w}
}

func (nfrDecider) Decide(t *Tick, doc spec.Document, reads []providers.Address, obs Observation, st *state.State) ([]intent.Intent, []plan.Note, []plan.Note) {
	n := doc.(*spec.NFR)
	wAddr := reads[0]
	if why, failed := obs.Failed[wAddr.String()]; failed {
		return nil, nil, []plan.Note{{Spec: n.ID(), Pos: n.Src.PosOf("spec.target").String(), Text: fmt.Sprintf("reading %s: %s", wAddr, why)}}
	}
	w := obs.Objects[wAddr.String()]
	if !w.Exists {
		return nil, []plan.Note{{Spec: n.ID(), Pos: n.Src.PosOf("spec.target").String(), Text: fmt.Sprintf("target %s does not exist: nothing to do (setpoint creates only what a spec asks for)", wAddr)}}, nil
	}
	var hpa providers.Object
	if len(reads) > 1 {
		hpa = obs.Objects[reads[1].String()]
		hpa.Address = reads[1]
	}
	users := map[string]int64{}
	for _, o := range []providers.Object{w, hpa} {
		for attr, v := range o.Attributes {
			if e, ok := st.Entries[state.Key(o.Address.String(), attr)]; ok && e.User != nil {
				users[attr] = *e.User
			} else if x, err := strconv.ParseInt(v, 10, 64); err == nil {
				users[attr] = x
			}
		}
	}
	out := nfr.Decide(nfr.Input{Spec: n, Target: w, HPA: hpa, Signals: signalsFor(t, n), UserValue: users})
	out.Intents = append(out.Intents, restores(n, []providers.Object{w, hpa}, st)...)
	var notes []plan.Note
	for _, note := range out.Notes {
		notes = append(notes, plan.Note{Spec: n.ID(), Pos: n.Src.Pos.String(), Text: string(note.Dimension) + ": " + note.Text})
	}
	return out.Intents, notes, nil
}

// signalsFor reads one NFR's signals: the grouped defaults (evaluated once
// per tick), or the spec's own queries.
func signalsFor(t *Tick, n *spec.NFR) nfr.Signals {
	s := nfr.Signals{Missing: map[string]string{}, WorkingSet: map[string]float64{}}
	key := n.Metadata.Namespace + "/" + n.Spec.Target.Name
	grouped := func(expr, name string, by ...string) *float64 {
		m, r, err := t.By(expr, by...)
		if err != nil {
			s.Missing[name] = err.Error()
			return nil
		}
		if v, ok := m[key]; ok {
			return &v
		}
		s.Missing[name] = orDefault(r.NoData(), "no series for this workload")
		return nil
	}
	own := func(expr, name string) *float64 {
		r, err := t.Query(expr)
		if err == nil {
			var v float64
			if v, err = r.Value(); err == nil {
				return &v
			}
		}
		s.Missing[name] = err.Error()
		return nil
	}
	pick := func(override, def, name string, by ...string) *float64 {
		if override != "" {
			return own(override, name)
		}
		return grouped(def, name, by...)
	}
	s.RPS = pick(n.Spec.Signals.RPS, QueryRPS, "rps", "namespace", "app")
	s.CPUMilli = pick(n.Spec.Signals.CPU, QueryCPU, "cpu", "namespace", "label_app")
	s.P99 = pick(n.Spec.Signals.P99, QueryP99, "p99", "namespace", "app")
	if n.Spec.Enforcement.Memory == spec.ModeOff {
		return s
	}
	if n.Spec.Signals.WorkingSet != "" {
		// An override gives one value for every sized container.
		if v := own(n.Spec.Signals.WorkingSet, "workingSet"); v != nil {
			for _, c := range n.Spec.Memory.Containers {
				s.WorkingSet[c] = *v
			}
		}
		return s
	}
	m, r, err := t.Nested(QueryWorkingSet(n.Spec.Memory.Window.D()), "container", "namespace", "label_app")
	why := ""
	if err != nil {
		why = err.Error()
	} else {
		for c, v := range m[key] {
			s.WorkingSet[c] = v
		}
		why = orDefault(r.NoData(), "no series for this workload")
	}
	if len(s.WorkingSet) == 0 {
		for _, c := range n.Spec.Memory.Containers {
			s.Missing["workingSet/"+c] = why
		}
	}
	return s
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// restores returns, for each dimension turned off, the user's value of
// every attribute setpoint wrote, so turning enforcement off hands the
// workload back as it was.
func restores(n *spec.NFR, objs []providers.Object, st *state.State) []intent.Intent {
	var out []intent.Intent
	for _, o := range objs {
		if !o.Exists {
			continue
		}
		for attr := range o.Attributes {
			e, ok := st.Entries[state.Key(o.Address.String(), attr)]
			if !ok || e.User == nil || e.Applied == nil {
				continue
			}
			dim, unit := nfr.Dimension(attr)
			mode := n.Spec.Enforcement.Replicas
			if dim == intent.Memory {
				mode = n.Spec.Enforcement.Memory
			}
			if mode != spec.ModeOff {
				continue
			}
			out = append(out, intent.Intent{Address: o.Address, Attribute: attr, Kind: intent.Exact, Value: *e.User, Recommended: *e.User,
				Unit: unit, Dimension: dim, Restore: true, Source: n.ID(), SourcePos: n.Src.PosOf("spec.enforcement"),
				Rationale: fmt.Sprintf("enforcement of %s is off: restoring the user's value %s", dim, intent.Format(*e.User, unit))})
		}
	}
	return out
}

func (nfrDecider) Params(doc spec.Document, reads []providers.Address, d intent.Dimension, obs Observation) gate.Params {
	n := doc.(*spec.NFR)
	s := n.Spec
	p := gate.Params{Stability: s.Safety.Stability.D(), Tolerance: float64(s.Safety.Tolerance), Cooldown: s.Safety.Cooldown.D(), TakeOverFrom: s.TakeOverFrom}
	annotations := obs.Objects[reads[0].String()].Annotations
	switch {
	case s.Paused:
		p.Paused, p.PauseReason = true, "spec.paused at "+n.Src.PosOf("spec.paused").String()
	case annotations[PausedAnnotation] == "true":
		p.Paused, p.PauseReason = true, PausedAnnotation+` is "true" on the target`
	}
	// An off dimension has only restores: they go through at once, in one
	// step, unless the target is paused.
	if (d == intent.Replicas && s.Enforcement.Replicas == spec.ModeOff) || (d == intent.Memory && s.Enforcement.Memory == spec.ModeOff) {
		p.Mode, p.Stability, p.Cooldown = spec.ModeEnforce, 0, 0
		return p
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
