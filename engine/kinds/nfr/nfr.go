// Package nfrkind plugs the NFR kind into the loop: which objects an NFR
// reads, its signals (grouped default queries evaluated once per tick),
// the pure decision of engine/decide/nfr, restores when enforcement is
// turned off, and the gate's rules with NFR's policy (stability, cooldown,
// bounded step; a container's memory request ≤ its limit).
package nfrkind

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/decide/nfr"
	"github.com/setpoint-dev/setpoint/engine/diag"
	"github.com/setpoint-dev/setpoint/engine/gate"
	"github.com/setpoint-dev/setpoint/engine/intent"
	"github.com/setpoint-dev/setpoint/engine/plan"
	"github.com/setpoint-dev/setpoint/engine/signals"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/noderes"
	"github.com/setpoint-dev/setpoint/providers/workload"
)

func init() { engine.Register("NFR", nfrDecider{}) }

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

// Queries of the slo policy, grouped the same way. The history is the
// 30 s arrival rate (refused requests included: they are demand) every
// 30 s over the last 30 minutes (the embedded store's retention): burst
// memory learns from it how long to keep a burst's pods, and the peak it
// keeps is read from it; the service time the lowest 1-minute mean
// latency over 30 minutes (at the quietest minute a request waits least);
// the fit of CPU on RPS pairs the two over 30 one-minute points (one
// subquery for both: each is evaluated once), and engine/decide/nfr
// solves the least squares.
const (
	QueryHistory = `label_replace(sum by (namespace, app) (rate(http_requests_total[30s])), "series", "rate", "", "")[30m:30s]`
	// HistoryStep is QueryHistory's step.
	HistoryStep = 30 * time.Second
	// QueryArrivals is the arrival rate now, appended to the history: a
	// subquery's steps are aligned to multiples of its step, so its
	// newest point can be a step old, and a burst is seen that much later.
	QueryArrivals = `sum by (namespace, app) (rate(http_requests_total[10s]))`
	// QueryReadyMin is the fewest pods ready at any scrape of the last two
	// minutes (kube-state-metrics' readiness): the p99 of the last minute,
	// and the backlog the minute before could leave in it, were served by
	// at least so many. (Counting the pods ready at every scrape instead
	// would read 0 for two minutes after a rolling update, when every pod
	// is new.)
	QueryReadyMin    = `min_over_time((sum by (namespace, label_app) (kube_pod_status_ready{condition="true"} * on(namespace, pod) group_left(label_app) kube_pod_labels))[2m:5s])`
	QueryServiceTime = `min_over_time((sum by (namespace, app) (rate(http_request_duration_seconds_sum[1m])) / sum by (namespace, app) (rate(http_request_duration_seconds_count[1m])))[30m:1m])`
	// fitX and fitY are RPS served and CPU (millicores), both by
	// namespace and app.
	fitX = `sum by (namespace, app) (rate(http_requests_total{code!~"5.."}[1m]))`
	fitY = `sum by (namespace, app) (label_replace(sum by (namespace, label_app) (rate(container_cpu_usage_seconds_total[1m]) * on(namespace, pod) group_left(label_app) kube_pod_labels), "app", "$1", "label_app", "(.*)")) * 1000`
)

// QueryFit is RPS and CPU of every workload over the last 30 minutes at
// one-minute steps, told apart by the label "series" (rps, cpu).
const QueryFit = `(label_replace(` + fitX + `, "series", "rps", "", "") or label_replace(` + fitY + `, "series", "cpu", "", ""))[30m:1m]`

// pair returns the values of x and y at the times both have one.
func pair(x, y []signals.Point) (xs, ys []float64) {
	at := make(map[int64]float64, len(y))
	for _, p := range y {
		at[p.T.UnixMilli()] = p.V
	}
	for _, p := range x {
		if v, ok := at[p.T.UnixMilli()]; ok {
			xs, ys = append(xs, p.V), append(ys, v)
		}
	}
	return xs, ys
}

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

// WorkloadAddress is the object an NFR targets.
func WorkloadAddress(n *spec.NFR, def string) addrs.Object {
	prov := n.Spec.Target.Provider
	if prov == "" {
		prov = def
	}
	return addrs.Object{Provider: prov, Kind: n.Spec.Target.Kind, Namespace: n.Metadata.Namespace, Name: n.Spec.Target.Name}
}

func hpaAddress(w addrs.Object) addrs.Object {
	w.Kind = "HorizontalPodAutoscaler"
	return w
}

// NodeMemoryAddress is where an NFR with memory.apply: node sends its
// limits: the NRI provider's node agent. The sim world has no node agent
// yet (false): its NFRs note that nothing is applied.
func NodeMemoryAddress(n *spec.NFR, def string) (addrs.Object, bool) {
	w := WorkloadAddress(n, def)
	if w.Provider == "sim" {
		return addrs.Object{}, false
	}
	return addrs.Object{Provider: "nri", Kind: noderes.MemoryKind, Namespace: w.Namespace, Name: w.Name}, true
}

// Reads: the workload, the HPA of its name (where setpoint would create
// one: that name must be free or scale the workload), the node agent's
// object for memory.apply node.
func (nfrDecider) Reads(doc spec.Document, def string) []addrs.Object {
	n := doc.(*spec.NFR)
	w := WorkloadAddress(n, def)
	out := []addrs.Object{w}
	if w.Kind == "Deployment" {
		out = append(out, hpaAddress(w))
	}
	if a, ok := NodeMemoryAddress(n, def); ok && n.Spec.Memory.Apply == spec.MemoryNode {
		out = append(out, a)
	}
	return out
}

// Lists: a Deployment's HPA is the one whose scaleTargetRef names it,
// whatever its name, found among the HPAs of its namespace.
func (nfrDecider) Lists(doc spec.Document, def string) []providers.ListRequest {
	w := WorkloadAddress(doc.(*spec.NFR), def)
	if w.Kind != "Deployment" {
		return nil
	}
	return []providers.ListRequest{workload.HPAList(w)}
}

// hpaOf is the HPA that scales the workload w, found by its
// scaleTargetRef: an object that does not exist (at the address setpoint
// would create one at) when none does; an error when the HPAs cannot be
// listed, when several scale it, or when the name setpoint would create
// one under is taken by an HPA of another workload.
func hpaOf(t *engine.Tick, n *spec.NFR, w addrs.Object, obs engine.Observation) (providers.Object, *plan.Note) {
	fail := func(format string, a ...any) (providers.Object, *plan.Note) {
		return providers.Object{}, &plan.Note{Severity: diag.Error, Spec: n.ID(), Pos: n.Src.PosOf("spec.target"), Message: fmt.Sprintf(format, a...)}
	}
	q := workload.HPAList(w)
	listed, why, failed := obs.List(q)
	if failed {
		return fail("listing the HorizontalPodAutoscalers of %s (to find the one that scales %s): %s", w.Namespace, w, why)
	}
	// Indexed once per plan: each workload of a namespace reads the same list.
	hpas := t.Memo("hpa-index:"+engine.ListKey(q), func() any { return workload.IndexHPAs(listed) }).(workload.HPAIndex).ScaledBy(w)
	switch len(hpas) {
	case 1:
		return hpas[0], nil
	case 0:
	default:
		var names []string
		for _, h := range hpas {
			names = append(names, h.Address.String())
		}
		return fail("%d HorizontalPodAutoscalers scale %s (%s): their controller refuses to act on either; keep one", len(hpas), w, strings.Join(names, ", "))
	}
	named := hpaAddress(w)
	if o := obs.Objects[named]; o.Exists && n.Spec.Autoscaler != nil && n.Spec.Autoscaler.Create {
		return fail("autoscaler.create: %s, where setpoint would create the HPA of %s, scales %s %s", named, w, o.Attributes[workload.ScaleTargetKind], o.Attributes[workload.ScaleTargetName])
	}
	return providers.Object{Address: named}, nil
}

func (nfrDecider) Decide(t *engine.Tick, doc spec.Document, reads []addrs.Object, obs engine.Observation, st *state.State) ([]intent.Intent, []plan.Note, []plan.Note) {
	n := doc.(*spec.NFR)
	wAddr := reads[0]
	// Every read must have succeeded: an HPA that could not be read is not
	// an HPA that does not exist (its absence would send the bound to the
	// Deployment's replicas, or create a second HPA).
	for _, a := range reads {
		if why, failed := obs.Failed[a]; failed {
			return nil, nil, []plan.Note{{Severity: diag.Error, Spec: n.ID(), Pos: n.Src.PosOf("spec.target"), Message: fmt.Sprintf("reading %s: %s", a, why)}}
		}
	}
	w := obs.Objects[wAddr]
	if !w.Exists {
		return nil, []plan.Note{{Severity: diag.Warning, Spec: n.ID(), Pos: n.Src.PosOf("spec.target"), Message: fmt.Sprintf("target %s does not exist: nothing to do (setpoint creates only what a spec asks for)", wAddr)}}, nil
	}
	var hpa, node providers.Object
	for _, a := range reads[1:] {
		if a.Kind == noderes.MemoryKind {
			node = obs.Objects[a]
			node.Address = a
		}
	}
	if wAddr.Kind == "Deployment" {
		var bad *plan.Note
		if hpa, bad = hpaOf(t, n, wAddr, obs); bad != nil {
			return nil, nil, []plan.Note{*bad}
		}
	}
	users := map[addrs.Path]values.Value{}
	for _, o := range []providers.Object{w, hpa} {
		for attr, v := range o.Attributes {
			if e, ok := st.Lookup(addrs.Attr{Object: o.Address, Path: attr}); ok && e.User != nil {
				users[attr] = *e.User
			} else {
				users[attr] = v
			}
		}
	}
	sig, errs := signalsFor(t, n)
	out := nfr.Decide(nfr.Input{Spec: n, Target: w, HPA: hpa, Node: node, Signals: sig, UserValue: users})
	out.Intents = append(out.Intents, restores(n, []providers.Object{w, hpa}, st)...)
	var notes []plan.Note
	for _, note := range out.Notes {
		notes = append(notes, plan.Note{Severity: diag.Warning, Spec: n.ID(), Pos: n.Src.Pos, Message: string(note.Dimension) + ": " + note.Text})
	}
	return out.Intents, notes, errs
}

// signalsFor reads one NFR's signals: the grouped defaults (evaluated once
// per tick), or the spec's own queries. A query of the spec's own that
// fails or answers several series where one is expected is an error at
// its field: no data is a hold, but a query that cannot mean one value is
// the spec's mistake.
func signalsFor(t *engine.Tick, n *spec.NFR) (nfr.Signals, []plan.Note) {
	s := nfr.Signals{Missing: map[string]string{}, WorkingSet: map[string]float64{}}
	var errs []plan.Note
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
		if !errors.Is(err, signals.ErrNoData) {
			field := "spec.signals." + name
			msg := fmt.Sprintf("%s: %v", field, err)
			if len(r.Samples) > 1 {
				msg = fmt.Sprintf("%s: the query answers %d series where one is expected: aggregate them (sum, max) or select one by its labels", field, len(r.Samples))
			}
			errs = append(errs, plan.Note{Severity: diag.Error, Spec: n.ID(), Pos: n.Src.PosOf(field), Message: msg})
		}
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
	if n.Spec.Policy != spec.PolicyReference && n.Spec.Throughput != nil {
		if m, _, err := t.Series(QueryHistory, "series", "namespace", "app"); err != nil {
			s.Missing["history"] = err.Error()
		} else if pts := m[key]["rate"]; len(pts) > 0 {
			s.History, s.HistoryStep = make([]float64, len(pts), len(pts)+1), HistoryStep
			for i, p := range pts {
				s.History[i] = p.V
			}
			if now := grouped(QueryArrivals, "arrivals", "namespace", "app"); now != nil {
				s.History = append(s.History, *now)
			}
		}
		if n.Spec.Latency != nil {
			s.ReadyMin = grouped(QueryReadyMin, "readyMin", "namespace", "label_app")
		}
		if n.Spec.Latency != nil && n.Spec.Latency.ServiceTime == nil {
			s.ServiceTime = grouped(QueryServiceTime, "serviceTime", "namespace", "app")
		}
		if m, _, err := t.Series(QueryFit, "series", "namespace", "app"); err == nil {
			if sr, ok := m[key]; ok {
				xs, ys := pair(sr["rps"], sr["cpu"])
				f, good := nfr.FitLine(xs, ys)
				f.N = float64(len(xs))
				s.Fit, s.FitOK = &f, good
			}
		}
	}
	if n.Spec.Enforcement.Memory == spec.ModeOff {
		return s, errs
	}
	if n.Spec.Signals.WorkingSet != "" {
		// An override gives one value for every sized container.
		if v := own(n.Spec.Signals.WorkingSet, "workingSet"); v != nil {
			for _, c := range n.Spec.Memory.Containers {
				s.WorkingSet[c] = *v
			}
		}
		return s, errs
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
	return s, errs
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// restores hands back what this NFR wrote in each dimension turned off,
// and the HPA's target and window once it owns only the floor again.
func restores(n *spec.NFR, objs []providers.Object, st *state.State) []intent.Intent {
	out := restoresOff(n, objs, st)
	for i, it := range out {
		if it.Dimension == nfr.Autoscaler && n.Spec.Enforcement.Replicas != spec.ModeOff {
			out[i].Rationale = fmt.Sprintf("autoscaler.owns is %q: restoring the user's value %s", spec.OwnsFloor, it.Value)
			out[i].SourcePos = n.Src.PosOf("spec.autoscaler")
		}
	}
	return out
}

func restoresOff(n *spec.NFR, objs []providers.Object, st *state.State) []intent.Intent {
	return engine.Restores(n.ID(), n.Src.PosOf("spec.enforcement"), objs, st, func(attr addrs.Path) (intent.Dimension, bool) {
		dim := nfr.Dimension(attr)
		mode := n.Spec.Enforcement.Replicas
		switch dim {
		case nfr.Memory:
			mode = n.Spec.Enforcement.Memory
		case nfr.Autoscaler:
			// Owning only the floor again hands the target and window back.
			return dim, mode == spec.ModeOff || !n.Spec.OwnsCount()
		}
		return dim, mode == spec.ModeOff
	})
}

// Rules are the gate's rules for one dimension of an NFR.
func (nfrDecider) Rules(doc spec.Document, reads []addrs.Object, d intent.Dimension, obs engine.Observation) gate.Rules {
	n := doc.(*spec.NFR)
	s := n.Spec
	r := gate.Rules{TakeOverFrom: s.TakeOverFrom}
	annotations := obs.Objects[reads[0]].Annotations
	switch {
	case s.Paused:
		r.Paused, r.PauseReason = true, "spec.paused at "+n.Src.PosOf("spec.paused").String()
	case annotations[engine.PausedAnnotation] == "true":
		r.Paused, r.PauseReason = true, engine.PausedAnnotation+` is "true" on the target`
	}
	// An off dimension has only restores: they go through at once, in one
	// step, unless the target is paused.
	if (d == nfr.Replicas || d == nfr.Autoscaler) && s.Enforcement.Replicas == spec.ModeOff || (d == nfr.Memory && s.Enforcement.Memory == spec.ModeOff) {
		r.Mode = spec.ModeEnforce
		return r
	}
	if d == nfr.Autoscaler && !s.OwnsCount() {
		// Owning only the floor again: the target and window go back to
		// the user's values in one step, as the replicas mode says (an
		// observed restore is shown, not made).
		r.Mode = s.Enforcement.Replicas
		return r
	}
	pol := gate.Stability{Key: "nfr", Stability: s.Safety.Stability.D(), Tolerance: float64(s.Safety.Tolerance), Cooldown: s.Safety.Cooldown.D()}
	if d == nfr.Autoscaler {
		// The HPA's target and window follow the sizing's model, which
		// moves slowly: stability and cooldown, no step (a bounded step of
		// a percentage or a window means nothing).
		r.Mode, r.Policy = s.Enforcement.Replicas, pol
		return r
	}
	if d == nfr.Replicas {
		r.Mode, pol.MaxStep, pol.Period = s.Enforcement.Replicas, float64(s.Safety.MaxReplicaStep), s.Safety.StepPeriod.D()
		// An increase of replicas is needed to meet the targets now.
		pol.ImmediateUp = s.Safety.ScaleUp != "stable"
		pol.MinStepUp = int64(s.Safety.MinReplicaStepUp)
		pol.NoCooldownAfterUp = true
		if s.Safety.MaxReplicaStepUp != nil {
			pol.MaxStepUp = float64(*s.Safety.MaxReplicaStepUp)
		}
		if s.Safety.MaxReplicas > 0 {
			r.Cap, r.CapField = values.CountOf(int64(s.Safety.MaxReplicas)), "safety.maxReplicas"
		}
	} else {
		r.Mode, pol.MaxStep = s.Enforcement.Memory, float64(s.Safety.MaxMemoryStep)
		if s.Safety.MaxMemory != nil {
			r.Cap, r.CapField = values.BytesOf(int64(*s.Safety.MaxMemory)), "safety.maxMemory"
		}
		pol.Check = requestWithinLimit
	}
	r.Policy = pol
	return r
}

// requestWithinLimit holds a container's memory request and limit unless
// request ≤ limit after the change, as an API server would refuse.
func requestWithinLimit(group []addrs.Path, value func(addrs.Path) (values.Value, bool)) error {
	done := map[string]bool{}
	for _, p := range group {
		c, ok := nfr.Container(p)
		if !ok || done[c] {
			continue
		}
		done[c] = true
		req, okR := value(nfr.ContainerAttr(c, "requests"))
		lim, okL := value(nfr.ContainerAttr(c, "limits"))
		if okR && okL && lim.IsValid() && req.Compare(lim) > 0 {
			return fmt.Errorf("container %s: request %s would exceed limit %s", c, req, lim)
		}
	}
	return nil
}
