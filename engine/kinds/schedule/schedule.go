// Package schedulekind plugs the Schedule kind into the loop: what a
// Schedule reads (its workload, its dependencies, and the HPAs of its
// namespace, among which the workload's is the one that scales it),
// the activity and trigger signals, the pure decisions of
// engine/decide/schedule for every Schedule of a group at once, what it
// writes per target, and the gate's policy that keeps the HPA behavior's
// windows and change log in state.
package schedulekind

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/decide/schedule"
	"github.com/setpoint-dev/setpoint/engine/diag"
	"github.com/setpoint-dev/setpoint/engine/gate"
	"github.com/setpoint-dev/setpoint/engine/intent"
	nfrkind "github.com/setpoint-dev/setpoint/engine/kinds/nfr"
	"github.com/setpoint-dev/setpoint/engine/plan"
	"github.com/setpoint-dev/setpoint/engine/signals"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/workload"
)

func init() { engine.Register("Schedule", decider{}) }

// Replicas is a Schedule's one enforcement dimension.
const Replicas intent.Dimension = "replicas"

// ActivityAnnotation on a target is a provider's activity signal: the
// last time something asked for the workload (RFC 3339), as a gateway in
// front of it saw. It counts beside the activity query.
const ActivityAnnotation = "setpoint.dev/last-activity"

// Gateway is the default activity: requests arriving at what is in front
// of the workload (the sim world's gateway, an ingress relabelled to
// service), grouped once per tick for every Schedule.
const (
	gatewayCounter = "gateway_requests_total"
	gatewayBy      = "namespace, service"
)

// maxLookback bounds how far back activity is looked for, whatever the
// timeouts say.
const maxLookback = spec.MaxIdleTimeout + time.Minute

type decider struct{}

// Address is the workload a Schedule targets.
func Address(s *spec.Schedule, def string) addrs.Object {
	prov := s.Spec.Target.Provider
	if prov == "" {
		prov = def
	}
	return addrs.Object{Provider: prov, Kind: s.Spec.Target.Kind, Namespace: s.Metadata.Namespace, Name: s.Spec.Target.Name}
}

// Reads: the workload first, then each dependency. Reading the
// dependencies joins a Schedule to theirs, so a group's 0→N decision is
// made once, over all of them. A Deployment's HPA is found by what it
// scales, among the HPAs of its namespace (Lists), not by its name.
func (decider) Reads(doc spec.Document, def string) []addrs.Object {
	s := doc.(*spec.Schedule)
	w := Address(s, def)
	out := []addrs.Object{w}
	for _, d := range s.Spec.DependsOn {
		out = append(out, dependency(w, d))
	}
	return out
}

// dependency is the workload a dependsOn entry names, beside w.
func dependency(w addrs.Object, entry string) addrs.Object {
	kind, name := spec.SplitDependency(entry)
	return addrs.Object{Provider: w.Provider, Kind: kind, Namespace: w.Namespace, Name: name}
}

// Lists: a Deployment's namespace's HPAs, among which its own are the
// ones whose scaleTargetRef names it.
func (decider) Lists(doc spec.Document, def string) []providers.ListRequest {
	w := Address(doc.(*spec.Schedule), def)
	if w.Kind != workload.Deployment {
		return nil
	}
	return []providers.ListRequest{workload.HPAList(w)}
}

// hpasOf returns the HPAs that scale w, or why they could not be listed.
// An HPA that could not be read is not one that does not exist: the
// caller decides nothing on it.
func hpasOf(w addrs.Object, obs engine.Observation) ([]providers.Object, string) {
	if w.Kind != workload.Deployment {
		return nil, ""
	}
	listed, why, failed := obs.List(workload.HPAList(w))
	if failed {
		return nil, why
	}
	return workload.ScaledBy(listed, w), ""
}

func names(os []providers.Object) string {
	var out []string
	for _, o := range os {
		out = append(out, o.Address.String())
	}
	return strings.Join(out, " and ")
}

// writes is the attribute a Schedule decides on its target.
func writes(s *spec.Schedule, w addrs.Object) addrs.Attr {
	if w.Kind == workload.Knative {
		return addrs.Attr{Object: w, Path: workload.MinScale}
	}
	return addrs.Attr{Object: w, Path: workload.Replicas}
}

// count reads an integer attribute of an object (0 when absent).
func count(o providers.Object, p addrs.Path) int {
	if v, ok := o.Attributes[p]; ok {
		return int(v.Int())
	}
	return 0
}

// current is the workload's replicas: a Deployment's spec.replicas, a
// Knative Service's ready pods (its own autoscaler sizes it).
func current(o providers.Object) int {
	if o.Address.Kind == workload.Knative {
		return count(o, workload.ReadyReplicas)
	}
	return count(o, workload.Replicas)
}

// groupDecision is every Schedule of a group decided at once.
type groupDecision struct {
	zero     map[string]schedule.Zero
	activity map[string]activitySeen
	// unknown is why some member's activity could not be read: nothing
	// of the group sleeps then (a dependency's activity is its
	// dependents').
	unknown string
	// keptWarm names, by workload, an NFR of the group that keeps it
	// warm while idle (throughput.keepWarm).
	keptWarm map[addrs.Object]string
}

type activitySeen struct {
	at  time.Time
	err string
}

// Decide runs the group's 0→N decision (once per tick), then this
// Schedule's N→M recommendation, and says what it writes.
func (decider) Decide(t *engine.Tick, doc spec.Document, reads []addrs.Object, obs engine.Observation, st *state.State) ([]intent.Intent, []plan.Note, []plan.Note) {
	s := doc.(*spec.Schedule)
	id := s.ID()
	wAddr := reads[0]
	// The workload and its HPAs must have been read (an HPA that could
	// not be read is not one that does not exist); a dependency that could
	// not be read is a dependency without ready replicas.
	if why, failed := obs.Failed[wAddr]; failed {
		return nil, nil, []plan.Note{{Severity: diag.Error, Spec: id, Pos: s.Src.PosOf("spec.target"), Message: fmt.Sprintf("reading %s: %s", wAddr, why)}}
	}
	hpas, why := hpasOf(wAddr, obs)
	if why != "" {
		return nil, nil, []plan.Note{{Severity: diag.Error, Spec: id, Pos: s.Src.PosOf("spec.target"), Message: fmt.Sprintf("listing the HorizontalPodAutoscalers of %s (to find the ones that scale %s): %s", wAddr.Namespace, wAddr, why)}}
	}
	w := obs.Objects[wAddr]
	if !w.Exists {
		return nil, []plan.Note{{Severity: diag.Warning, Spec: id, Pos: s.Src.PosOf("spec.target"), Message: fmt.Sprintf("target %s does not exist: nothing to do (setpoint creates only what a spec asks for)", wAddr)}}, nil
	}
	attr := writes(s, wAddr)
	mode := s.Spec.Enforcement.Replicas
	enforcing := mode == spec.ModeEnforce
	if mode == spec.ModeOff {
		forget(st, attr, id)
		return engine.Restores(id, s.Src.PosOf("spec.enforcement"), []providers.Object{w}, st, func(addrs.Path) (intent.Dimension, bool) { return Replicas, true }), nil, nil
	}
	if enforcing {
		claim(st, attr, id)
	}
	// An HPA scales the workload whatever its name: the one whose
	// scaleTargetRef names it.
	hasHPA := len(hpas) > 0
	if hasHPA && len(s.Spec.Triggers) > 0 {
		return nil, nil, []plan.Note{{Severity: diag.Error, Spec: id, Pos: s.Src.PosOf("spec.triggers"),
			Message: fmt.Sprintf("two autoscalers on one workload: this Schedule's triggers and %s both size %s; remove the triggers (the Schedule then only sleeps and wakes it, the HPA sizes it) or the HPA", names(hpas), wAddr)}}
	}

	// Every member of a group has the same peers, in one order: the first
	// names the group's decision.
	peers := t.Peers(id)
	def := t.DefaultProvider
	gd := t.Memo("schedule-group:"+peers[0].Head().ID(), func() any { return decideGroup(t, peers, def, obs, st) }).(*groupDecision)
	z := gd.zero[id]
	var notes, errs []plan.Note
	a := gd.activity[id]
	if a.err != "" {
		notes = append(notes, plan.Note{Severity: diag.Warning, Spec: id, Pos: s.Src.PosOf("spec.idle"), Message: "activity: " + a.err + "; the workload is not put to sleep on missing data"})
	}
	if z.Idle && gd.unknown != "" {
		// No data is not idleness, for this workload nor for what its
		// activity keeps awake: hold where it is.
		z.Idle, z.Proposed = false, current(w)
		z.Why = "activity unknown (" + gd.unknown + "): holding"
	}
	if enforcing {
		recordActivity(st, attr, id, a.at)
	}
	keptWarmBy := gd.keptWarm[wAddr]
	cur := current(w)
	sp := s.Spec
	rec, trig := -1, ""
	if cur > 0 && len(sp.Triggers) > 0 {
		readings := make([]schedule.Reading, len(sp.Triggers))
		trs := make([]schedule.Trigger, len(sp.Triggers))
		for i, tr := range sp.Triggers {
			trs[i] = schedule.Trigger{Name: tr.Name, Type: schedule.TriggerType(tr.Type), Target: tr.Target}
			r, err := t.Query(tr.Query)
			if err == nil {
				var v float64
				if v, err = r.Value(); err == nil {
					readings[i] = schedule.Reading{Value: v, OK: true}
					continue
				}
			}
			if !errors.Is(err, signals.ErrNoData) {
				readings[i].Err = err.Error()
			}
			switch {
			case len(r.Samples) > 1:
				errs = append(errs, plan.Note{Severity: diag.Error, Spec: id, Pos: s.Src.PosOf(fmt.Sprintf("spec.triggers.%d.query", i)),
					Message: fmt.Sprintf("trigger %s: the query answers %d series where one is expected: aggregate them (sum, max) or select one by its labels", tr.Name, len(r.Samples))})
			case errors.Is(err, signals.ErrBound):
				// Asking less is the spec's to do, as a query that does
				// not parse; a server that fails is only a hold.
				errs = append(errs, plan.Note{Severity: diag.Error, Spec: id, Pos: s.Src.PosOf(fmt.Sprintf("spec.triggers.%d.query", i)),
					Message: fmt.Sprintf("trigger %s: %v", tr.Name, err)})
			}
		}
		rec, trig = schedule.Recommend(cur, trs, readings, float64(sp.Behavior.Tolerance))
	}
	want, why := schedule.Want(z, cur, sp.Replicas.Min, sp.Replicas.Max, sp.Replicas.AtStart, rec)
	if trig != "" {
		why += "; triggers: " + trig + fmt.Sprintf("; raw %d", want)
	}
	// At 0 while idle or waiting for its dependencies, it stays at 0:
	// other specs' minimums yield to that as to the sleep itself.
	sleep := want == 0 && (z.Idle || len(z.Waiting) > 0)
	if sleep && keptWarmBy != "" {
		want, sleep = max(want, 1, cur), false
		why += "; kept warm by " + keptWarmBy + " (throughput.keepWarm)"
	}
	// A raise that cannot happen (a dependency that does not exist, pods
	// that cannot be created) is planned and held with why, by the
	// policy (Rules): a wake-up stays asleep meanwhile, and other specs'
	// minimums yield to that as to the sleep itself.
	blockedBy := ""
	if b := blocked(s, wAddr, obs); b != "" && !z.Idle && (want > cur || len(z.Waiting) > 0) {
		blockedBy = b
		if cur == 0 || cur < sp.Replicas.Min {
			want, sleep = max(want, min(sp.Replicas.AtStart, sp.Replicas.Max)), true
		}
		why += "; held: " + blockedBy
	}
	adopted := adoption(st, attr, id, t.Now, enforcing)
	if graceEnd := adopted.Add(sp.Idle.Grace.D()); z.Idle && want < cur && t.Now.Before(graceEnd) {
		// What it has not seen yet (activity before setpoint came)
		// could still show up: no sleep in the grace period.
		want, sleep = cur, false
		why += fmt.Sprintf("; but in the grace period after adoption (idle.grace %s) until %s", sp.Idle.Grace.D(), graceEnd.UTC().Format(time.RFC3339))
		if z.Due.IsZero() || graceEnd.Before(z.Due) {
			z.Due = graceEnd
		}
	}
	if !z.Due.IsZero() {
		why += "; next change due " + z.Due.UTC().Format(time.RFC3339)
		t.RequeueAt(id, z.Due)
	}

	var its []intent.Intent
	base := intent.Intent{Attr: attr, Kind: intent.Exact, Dimension: Replicas, Source: id, SourcePos: s.Src.PosOf("spec.replicas"), Rationale: why}
	switch {
	case blockedBy != "" && wAddr.Kind != workload.Knative:
		its = append(its, withValue(base, want, sleep))
	case wAddr.Kind == workload.Knative:
		// Knative's autoscaler sizes the service between the bounds:
		// min-scale is the Schedule's floor (atStart awake, min idle),
		// max-scale its ceiling.
		if !z.Idle && len(z.Waiting) == 0 && gd.unknown == "" {
			want = min(max(want, sp.Replicas.AtStart), sp.Replicas.Max)
		}
		it := base
		it.Value, it.Recommended, it.Sleep = values.CountOf(int64(want)), values.CountOf(int64(want)), sleep
		maxIt := base
		maxIt.Attr = addrs.Attr{Object: wAddr, Path: workload.MaxScale}
		maxIt.Value, maxIt.Recommended = values.CountOf(int64(sp.Replicas.Max)), values.CountOf(int64(sp.Replicas.Max))
		maxIt.Rationale = fmt.Sprintf("replicas.max %d", sp.Replicas.Max)
		its = append(its, it, maxIt)
	case hasHPA:
		// The HPA sizes it while it runs; the Schedule moves it only
		// between 0 and atStart (the HPA is inactive at 0), as KEDA does.
		switch {
		case sleep:
			// Also at 0: nothing else may raise it while it sleeps.
			its = append(its, withValue(base, 0, true))
		case cur == 0 && want > 0:
			its = append(its, withValue(base, want, false))
		}
	case len(sp.Triggers) > 0:
		// It sizes the workload: every tick's value feeds the behavior's
		// windows.
		its = append(its, withValue(base, want, sleep))
	default:
		// Without triggers it only sleeps, wakes and keeps [min, max].
		if want != cur || sleep {
			its = append(its, withValue(base, want, sleep))
		}
	}
	if !moves(its, w) {
		// The plan shows no change of it: say why here.
		notes = append(notes, plan.Note{Severity: diag.Info, Spec: id, Pos: s.Src.Pos, Message: fmt.Sprintf("no change at %d replicas: %s", cur, why)})
	}
	return its, notes, errs
}

// moves reports whether an intent asks for another value than the
// workload's.
func moves(its []intent.Intent, w providers.Object) bool {
	for _, it := range its {
		if v, ok := w.Attributes[it.Attr.Path]; !ok || v != it.Value {
			return true
		}
	}
	return false
}

func withValue(it intent.Intent, n int, sleep bool) intent.Intent {
	it.Value, it.Recommended, it.Sleep = values.CountOf(int64(n)), values.CountOf(int64(n)), sleep
	return it
}

// decideGroup makes the 0→N decision for every Schedule of a group: each
// one's activity (its query, or the gateway's grouped counter, and the
// provider's annotation), its dependencies' readiness, then
// schedule.DecideZero over all of them.
func decideGroup(t *engine.Tick, peers []spec.Document, def string, obs engine.Observation, st *state.State) *groupDecision {
	gd := &groupDecision{activity: map[string]activitySeen{}, keptWarm: map[addrs.Object]string{}}
	var scheds []*spec.Schedule
	var longest time.Duration
	for _, p := range peers {
		if n, ok := p.(*spec.NFR); ok && n.Spec.Throughput != nil && n.Spec.Throughput.KeepWarm {
			gd.keptWarm[nfrkind.WorkloadAddress(n, def)] = n.ID()
		}
		s, ok := p.(*spec.Schedule)
		if !ok {
			continue
		}
		scheds = append(scheds, s)
		longest = max(longest, longestTimeout(s))
	}
	lookback := min(longest.Round(time.Minute)+time.Minute, maxLookback)
	step := stepFor(lookback)
	ws := make([]schedule.Workload, 0, len(scheds))
	// A Schedule names its dependencies by workload; the decision keys
	// workloads by spec ID, so map one to the other.
	byWorkload := map[addrs.Object]string{}
	for _, s := range scheds {
		byWorkload[Address(s, def)] = s.ID()
	}
	for _, s := range scheds {
		sp := s.Spec
		w := Address(s, def)
		o := obs.Objects[w]
		loc, err := s.Location()
		if err != nil {
			loc = time.UTC // validation refuses it; never panic on it
		}
		seen := activityOf(t, s, o, remembered(st, writes(s, w), s.ID()), lookback, step)
		gd.activity[s.ID()] = seen
		if seen.err != "" && gd.unknown == "" {
			gd.unknown = s.ID() + ": " + seen.err
		}
		wl := schedule.Workload{Name: s.ID(), Activity: seen.at, Current: current(o), Ready: count(o, workload.ReadyReplicas),
			Min: sp.Replicas.Min, AtStart: sp.Replicas.AtStart, Idle: sp.Idle.After.D(), Loc: loc,
			// Beside an HPA it writes only 0 and atStart: a step to 1
			// would never be taken, and it would never sleep.
			Gradual: sp.Idle.Gradual && !hasHPA(w, obs)}
		for _, e := range sp.IdleAfterByTime {
			if tod, err := schedule.ParseTimeOfDay(e.From); err == nil {
				wl.ByTime = append(wl.ByTime, schedule.TimeoutFrom{From: tod, After: e.After.D()})
			}
		}
		for _, s := range sp.WakeUp {
			if tod, err := schedule.ParseTimeOfDay(s); err == nil {
				wl.WakeUps = append(wl.WakeUps, tod)
			}
		}
		for _, d := range sp.DependsOn {
			da := dependency(w, d)
			if sid, ok := byWorkload[da]; ok {
				wl.DependsOn = append(wl.DependsOn, sid)
				continue
			}
			// A dependency without a Schedule of its own: a workload of
			// its own name in the decision, with its readiness and no
			// activity of its own.
			key := "dependency " + da.String()
			wl.DependsOn = append(wl.DependsOn, key)
			if _, dup := byWorkload[da]; !dup {
				byWorkload[da] = key
				do := obs.Objects[da]
				ws = append(ws, schedule.Workload{Name: key, Current: current(do), Ready: count(do, workload.ReadyReplicas), Idle: math.MaxInt64})
			}
		}
		ws = append(ws, wl)
	}
	gd.zero = schedule.DecideZero(t.Now, ws)
	return gd
}

// hasHPA reports whether an HPA scales a Deployment.
func hasHPA(w addrs.Object, obs engine.Observation) bool {
	hpas, _ := hpasOf(w, obs)
	return len(hpas) > 0
}

// longestTimeout is the longest idle timeout a Schedule ever has in force.
func longestTimeout(s *spec.Schedule) time.Duration {
	l := s.Spec.Idle.After.D()
	for _, e := range s.Spec.IdleAfterByTime {
		l = max(l, e.After.D())
	}
	return l
}

// stepFor is the resolution activity is looked for at: about 60 points
// over the lookback, at least 5 s.
func stepFor(lookback time.Duration) time.Duration {
	return max((lookback / 60).Round(time.Second), 5*time.Second)
}

// ActivityQuery is the PromQL that finds the last activity: the latest
// evaluation time, over lookback at step, at which expr was above 0.
func ActivityQuery(expr string, lookback, step time.Duration) string {
	return fmt.Sprintf("max_over_time(timestamp(%s > 0)[%s:%s])", wrappable(expr), promDuration(lookback), promDuration(step))
}

// NowQuery is above 0 for each series of expr that is above 0 now.
func NowQuery(expr string) string { return wrappable(expr) + " > 0" }

// wrappable is expr as one parenthesised vector expression: re-printed
// by the parser (no comment can swallow what follows it), a scalar made
// a vector.
func wrappable(expr string) string {
	if e, err := spec.ParsePromQL(expr); err == nil {
		expr = e
	}
	if spec.PromQLIsScalar(expr) {
		expr = "vector(" + expr + ")"
	}
	return "(" + expr + ")"
}

// defaultActivity is the gateway's counter over a range of at least the
// step (a shorter range could fall between two steps).
func defaultActivity(step time.Duration) string {
	r := max(step, time.Minute)
	return fmt.Sprintf("sum by (%s) (increase(%s[%s]))", gatewayBy, gatewayCounter, promDuration(r))
}

func promDuration(d time.Duration) string {
	if d%time.Minute == 0 {
		return fmt.Sprintf("%dm", int(d/time.Minute))
	}
	return fmt.Sprintf("%ds", int(d/time.Second))
}

// activityOf is a Schedule's last activity: the latest of the provider's
// signal, the activity remembered in the state (a restarted process, or
// a store that has not refilled yet), the latest lookback step the query
// was above 0, and now if it is above 0 now (the lookback knows activity
// only to its step; a request must wake a workload at once). A query
// that fails is an error said in the plan (nothing is put to sleep on
// it); a query with no activity in the lookback is no activity.
func activityOf(t *engine.Tick, s *spec.Schedule, o providers.Object, remembered time.Time, lookback, step time.Duration) activitySeen {
	seen := activitySeen{at: remembered}
	if a, ok := o.Annotations[ActivityAnnotation]; ok {
		if at, err := time.Parse(time.RFC3339Nano, a); err == nil && !at.After(t.Now) && at.After(seen.at) {
			seen.at = at
		}
	}
	expr, grouped := s.Spec.Idle.Activity, false
	if expr == "" {
		expr, grouped = defaultActivity(step), true
	}
	key := s.Metadata.Namespace + "/" + s.Spec.Target.Name
	// latest reads one query's answer for this workload: the largest
	// value of its series (the grouped default: this workload's).
	latest := func(q string) (float64, bool, error) {
		if grouped {
			m, _, err := t.By(q, "namespace", "service")
			v, ok := m[key]
			return v, ok, err
		}
		r, err := t.Query(q)
		var v float64
		found := false
		for _, smp := range r.Samples {
			v, found = max(v, smp.Value), true
		}
		return v, found, err
	}
	v, found, err := latest(ActivityQuery(expr, lookback, step))
	if err != nil {
		seen.err = err.Error()
		return seen
	}
	if found && !math.IsNaN(v) && !math.IsInf(v, 0) && v > 0 {
		if at := time.UnixMilli(int64(v * 1000)); at.After(seen.at) && !at.After(t.Now) {
			seen.at = at
		}
	}
	if _, active, err := latest(NowQuery(expr)); err == nil && active {
		seen.at = t.Now
	}
	return seen
}

// Rules are the gate's rules for a Schedule: its mode and pause, and its
// policy (the HPA behavior's windows and change log, the grace period).
func (decider) Rules(doc spec.Document, reads []addrs.Object, d intent.Dimension, obs engine.Observation) gate.Rules {
	s := doc.(*spec.Schedule)
	sp := s.Spec
	r := gate.Rules{Mode: sp.Enforcement.Replicas}
	switch {
	case sp.Paused:
		r.Paused, r.PauseReason = true, "spec.paused at "+s.Src.PosOf("spec.paused").String()
	case obs.Objects[reads[0]].Annotations[engine.PausedAnnotation] == "true":
		r.Paused, r.PauseReason = true, engine.PausedAnnotation+` is "true" on the target`
	}
	if sp.Enforcement.Replicas == spec.ModeOff {
		r.Mode = spec.ModeEnforce // restores only, at once
		return r
	}
	r.Cap, r.CapField = values.CountOf(int64(sp.Replicas.Max)), "replicas.max"
	r.Policy = Policy{Behavior: BehaviorOf(s), Blocked: blocked(s, reads[0], obs)}
	return r
}

// BehaviorOf is a Schedule's behavior with the HPA's defaults where the
// spec leaves policies out: up, 100% or 4 pods per 15 s, the larger;
// down, 100% per 15 s.
func BehaviorOf(s *spec.Schedule) schedule.Behavior {
	b := s.Spec.Behavior
	conv := func(r spec.ScaleRules, def []schedule.Policy) schedule.Rules {
		out := schedule.Rules{Stabilization: r.Stabilization.D(), Select: schedule.Select(r.Select), Policies: def}
		if r.Policies != nil {
			out.Policies = []schedule.Policy{}
			for _, p := range *r.Policies {
				out.Policies = append(out.Policies, schedule.Policy{Type: schedule.PolicyType(p.Type), Value: p.Value, Period: p.Period.D()})
			}
		}
		return out
	}
	return schedule.Behavior{
		Up:   conv(b.ScaleUp, []schedule.Policy{{Type: schedule.Percent, Value: 100, Period: 15 * time.Second}, {Type: schedule.Pods, Value: 4, Period: 15 * time.Second}}),
		Down: conv(b.ScaleDown, []schedule.Policy{{Type: schedule.Percent, Value: 100, Period: 15 * time.Second}}),
	}
}
