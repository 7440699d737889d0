package schedulekind_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/setpoint-dev/setpoint/cue/load"
	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/diag"
	_ "github.com/setpoint-dev/setpoint/engine/kinds/all"
	schedulekind "github.com/setpoint-dev/setpoint/engine/kinds/schedule"
	"github.com/setpoint-dev/setpoint/engine/plan"
	"github.com/setpoint-dev/setpoint/engine/signals"
	"github.com/setpoint-dev/setpoint/engine/signals/embedded"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/workload"
)

// objects is an in-memory provider: what Read returns is what the test
// put there, and Apply writes into it as setpoint's manager.
type objects struct {
	objs    map[addrs.Object]providers.Object
	applies int
	// applied, if set, hears the wall time of each Apply call.
	applied chan time.Time
}

func (o *objects) Read(_ context.Context, req providers.ReadRequest) providers.ReadResponse {
	var r providers.ReadResponse
	for _, a := range req.Addresses {
		obj, ok := o.objs[a]
		if !ok {
			obj = providers.Object{}
		}
		obj.Address = a
		r.Objects = append(r.Objects, obj)
	}
	return r
}

// List answers with the objects of the kind in the namespace, in address
// order.
func (o *objects) List(_ context.Context, req providers.ListRequest) providers.ListResponse {
	var r providers.ListResponse
	for a, obj := range o.objs {
		if a.Provider == req.Provider && a.Kind == req.Kind && a.Namespace == req.Namespace && obj.Exists {
			obj.Address = a
			r.Objects = append(r.Objects, obj)
		}
	}
	slices.SortFunc(r.Objects, func(x, y providers.Object) int { return strings.Compare(x.Address.String(), y.Address.String()) })
	return r
}

func (o *objects) PlanChange(_ context.Context, req providers.PlanChangeRequest) providers.PlanChangeResponse {
	var r providers.PlanChangeResponse
	for _, c := range req.Changes {
		r.Results = append(r.Results, providers.ObjectResult{Address: c.Address, After: c.Attributes})
	}
	return r
}

func (o *objects) Apply(_ context.Context, req providers.ApplyRequest) providers.ApplyResponse {
	if o.applied != nil {
		o.applied <- time.Now()
	}
	var r providers.ApplyResponse
	for _, c := range req.Changes {
		obj := o.objs[c.Address]
		obj.Attributes, obj.Managers = maps.Clone(obj.Attributes), maps.Clone(obj.Managers)
		for _, p := range c.Changed {
			obj.Attributes[p] = c.Attributes[p]
			obj.Managers[p] = c.Manager
		}
		o.objs[c.Address] = obj
		o.applies++
		r.Results = append(r.Results, providers.ObjectResult{Address: c.Address, After: c.Attributes})
	}
	return r
}

const env = `apiVersion: setpoint.dev/v1alpha1
kind: Environment
metadata: {name: t}
spec:
  providers: [{name: k8s, config: {}}]
`

// t0 is a whole minute, so activity steps fall on it.
var t0 = time.Date(2026, 3, 10, 9, 0, 0, 0, time.UTC)

type fixture struct {
	e     *engine.Engine
	objs  *objects
	store *embedded.Store
	st    *state.State
}

// newFixture loads the specs (YAML documents) beside an Environment whose
// one provider is the in-memory one holding objs.
func newFixture(t testing.TB, objs map[addrs.Object]providers.Object, docs ...string) *fixture {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{"env.yaml": env}
	for i, d := range docs {
		files[filepath.Join(dir, fmt.Sprintf("spec-%04d.yaml", i))] = d
	}
	for name, body := range files {
		if !filepath.IsAbs(name) {
			name = filepath.Join(dir, name)
		}
		if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l, err := load.New()
	if err != nil {
		t.Fatal(err)
	}
	r := l.LoadDir(dir)
	if len(r.Diags) > 0 {
		t.Fatalf("specs: %v", r.Diags)
	}
	store := embedded.NewStore(time.Hour)
	f := &fixture{objs: &objects{objs: objs}, store: store, st: state.New()}
	f.e = &engine.Engine{Env: r.Environment(), Specs: r.Specs(), Providers: map[string]providers.Provider{"k8s": f.objs}, Signals: embedded.NewSource(store)}
	return f
}

func (f *fixture) plan(t testing.TB, now time.Time) *plan.Plan {
	t.Helper()
	return f.e.Plan(context.Background(), now, f.st, nil)
}

// apply plans and applies at now.
func (f *fixture) apply(t testing.TB, now time.Time) *plan.Plan {
	t.Helper()
	p := f.plan(t, now)
	for _, r := range f.e.Apply(context.Background(), now, p, f.st) {
		if r.Err != "" {
			t.Fatalf("apply: %s", r.Err)
		}
	}
	return p
}

// requests writes a gateway counter for ns/svc every 15 s over [from,
// until], increased by one at each of at.
func (f *fixture) requests(t *testing.T, ns, svc string, from, until time.Time, at ...time.Time) {
	t.Helper()
	l := labels.FromStrings("__name__", "gateway_requests_total", "namespace", ns, "service", svc)
	for ts := from; !ts.After(until); ts = ts.Add(15 * time.Second) {
		n := 0
		for _, a := range at {
			if !a.After(ts) {
				n++
			}
		}
		if _, err := f.store.Append(l, ts.UnixMilli(), float64(n)); err != nil {
			t.Fatal(err)
		}
	}
}

func deployment(ns, name string, replicas, ready int, annotations map[string]string) (addrs.Object, providers.Object) {
	a := addrs.Object{Provider: "k8s", Kind: workload.Deployment, Namespace: ns, Name: name}
	return a, providers.Object{Address: a, Exists: true, Generation: 1,
		Attributes:  map[addrs.Path]values.Value{workload.Replicas: values.CountOf(int64(replicas)), workload.ReadyReplicas: values.CountOf(int64(ready))},
		Managers:    map[addrs.Path]string{workload.Replicas: "kubectl"},
		Annotations: annotations}
}

// hpa is an HPA named name that scales the Deployment scales.
func hpa(ns, name, scales string) (addrs.Object, providers.Object) {
	a := addrs.Object{Provider: "k8s", Kind: workload.HPA, Namespace: ns, Name: name}
	return a, providers.Object{Address: a, Exists: true, Generation: 1,
		Attributes: map[addrs.Path]values.Value{workload.MinReplicas: values.CountOf(2), workload.MaxReplicas: values.CountOf(10),
			workload.ScaleTargetKind: values.StringOf(workload.Deployment), workload.ScaleTargetName: values.StringOf(scales)},
		Managers: map[addrs.Path]string{workload.MinReplicas: "kubectl"}}
}

func lastActivity(at time.Time) map[string]string {
	return map[string]string{schedulekind.ActivityAnnotation: at.Format(time.RFC3339Nano)}
}

// change finds the plan's change (applied or held) of an attribute.
func change(p *plan.Plan, a addrs.Object, path addrs.Path) *plan.Change {
	for _, cs := range [][]plan.Change{p.Changes, p.Held} {
		for i := range cs {
			if cs[i].Address == a && cs[i].Attribute == path {
				return &cs[i]
			}
		}
	}
	return nil
}

func schedule(body string) string { return scheduleNamed("api", body) }

func scheduleNamed(name, body string) string {
	return "apiVersion: setpoint.dev/v1alpha1\nkind: Schedule\nmetadata: {name: " + name + ", namespace: shop}\nspec:\n" + body
}

// TestIdleIsStrict: with the provider's activity signal at t0 and a 5 m
// timeout, the workload is active at t0+5m (lastActivity + timeout < now
// is false) and idle one nanosecond later; the due time is that instant.
func TestIdleIsStrict(t *testing.T) {
	a, d := deployment("shop", "api", 2, 2, lastActivity(t0))
	f := newFixture(t, map[addrs.Object]providers.Object{a: d}, schedule(`  target: {kind: Deployment, name: api}
  replicas: {min: 0, atStart: 1, max: 5}
  idle: {after: 5m, grace: 0s, activity: "vector(0)"}
  enforcement: {replicas: enforce}
`))
	p := f.plan(t, t0.Add(5*time.Minute))
	if c := change(p, a, workload.Replicas); c != nil {
		t.Fatalf("at t0+5m: %s → %s (%s); want no change", c.From, c.To, c.Reason)
	}
	if due := p.Due["Schedule/shop/api"]; !due.Equal(t0.Add(5*time.Minute + time.Nanosecond)) {
		t.Errorf("due %v, want t0+5m+1ns", due)
	}
	p = f.plan(t, t0.Add(5*time.Minute+time.Nanosecond))
	c := change(p, a, workload.Replicas)
	if c == nil || c.To != "0" || c.Held != nil || !strings.Contains(c.Reason, "idle: last activity") {
		t.Fatalf("at t0+5m+1ns: %+v; want 2 → 0 applied, idle", c)
	}
}

// TestWakeUpIsDue: a wake-up at 08:00 Europe/Paris is the due time of a
// sleeping workload, and at 08:00:00 exactly it wakes to atStart.
func TestWakeUpIsDue(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	a, d := deployment("shop", "api", 0, 0, nil)
	f := newFixture(t, map[addrs.Object]providers.Object{a: d}, schedule(`  target: {kind: Deployment, name: api}
  replicas: {min: 0, atStart: 3, max: 5}
  idle: {after: 30m, activity: "vector(0)"}
  timeZone: Europe/Paris
  wakeUp: ["08:00"]
  enforcement: {replicas: enforce}
`))
	eight := time.Date(2026, 3, 30, 8, 0, 0, 0, paris) // the day after the spring change
	p := f.plan(t, eight.Add(-time.Second))
	if c := change(p, a, workload.Replicas); c != nil {
		t.Fatalf("at 07:59:59: %s → %s; want no change", c.From, c.To)
	}
	if due := p.Due["Schedule/shop/api"]; !due.Equal(eight) {
		t.Errorf("due %v, want %v", due, eight)
	}
	p = f.apply(t, eight)
	c := change(p, a, workload.Replicas)
	if c == nil || c.From != "0" || c.To != "3" || c.Held != nil || !strings.Contains(c.Reason, "wake-up at 08:00") {
		t.Fatalf("at 08:00: %+v; want 0 → 3 applied for the wake-up", c)
	}
	if got := f.objs.objs[a].Attributes[workload.Replicas]; got != values.CountOf(3) {
		t.Errorf("applied %s, want 3", got)
	}
}

// TestActivityFromTheGateway: one request at t0+30s on the gateway's
// counter (the default activity query) keeps the workload awake for the
// timeout after it; well past that it sleeps.
func TestActivityFromTheGateway(t *testing.T) {
	a, d := deployment("shop", "api", 2, 2, nil)
	f := newFixture(t, map[addrs.Object]providers.Object{a: d}, schedule(`  target: {kind: Deployment, name: api}
  idle: {after: 5m, grace: 0s}
  enforcement: {replicas: enforce}
`))
	f.requests(t, "shop", "api", t0.Add(-10*time.Minute), t0.Add(10*time.Minute), t0.Add(30*time.Second))
	if c := change(f.plan(t, t0.Add(4*time.Minute)), a, workload.Replicas); c != nil {
		t.Fatalf("4m after the request: %s → %s (%s); want awake", c.From, c.To, c.Reason)
	}
	c := change(f.plan(t, t0.Add(7*time.Minute)), a, workload.Replicas)
	if c == nil || c.To != "0" {
		t.Fatalf("7m after the request: %+v; want asleep", c)
	}
	// The activity seen is the request's, to the lookback's step.
	if !strings.Contains(c.Reason, "last activity 2026-03-10 09:00:") && !strings.Contains(c.Reason, "last activity 2026-03-10 09:01:") {
		t.Errorf("reason %q: want the request's time", c.Reason)
	}
}

// TestBesideAnHPA: the Schedule moves spec.replicas only between 0 and
// atStart and leaves the count between to the HPA; with triggers it is a
// conflict naming both autoscalers. The HPA is the one whose
// scaleTargetRef names the Deployment, here of another name, beside an
// HPA named api that scales something else.
func TestBesideAnHPA(t *testing.T) {
	for _, tc := range []struct {
		name            string
		replicas, ready int
		active          bool
		wantTo          string // "" for no change
	}{
		{"idle running: to 0", 4, 4, false, "0"},
		{"active at 0: to atStart", 0, 0, true, "2"},
		{"active running: the HPA's", 4, 4, true, ""},
		{"idle at 0: nothing", 0, 0, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			act := "vector(0)"
			if tc.active {
				act = "vector(1)"
			}
			a, d := deployment("shop", "api", tc.replicas, tc.ready, nil)
			d.Managers[workload.Replicas] = "horizontal-pod-autoscaler"
			h, ho := hpa("shop", "api-autoscaler", "api")
			o, oo := hpa("shop", "api", "api-v1")
			f := newFixture(t, map[addrs.Object]providers.Object{a: d, h: ho, o: oo}, schedule(`  target: {kind: Deployment, name: api}
  replicas: {min: 0, atStart: 2, max: 10}
  idle: {after: 5m, grace: 0s, activity: "`+act+`"}
  enforcement: {replicas: enforce}
`))
			p := f.plan(t, t0)
			c := change(p, a, workload.Replicas)
			switch {
			case tc.wantTo == "" && c != nil:
				t.Fatalf("%s → %s (%s); want no change", c.From, c.To, c.Reason)
			case tc.wantTo != "" && (c == nil || c.To != tc.wantTo || c.Held != nil):
				t.Fatalf("%+v; want → %s applied", c, tc.wantTo)
			}
			if c != nil && !c.Force {
				t.Errorf("the change takes spec.replicas from the HPA: want Force")
			}
			for _, ch := range append(p.Changes, p.Held...) {
				if ch.Address.Kind == workload.HPA {
					t.Errorf("the Schedule wrote an HPA: %s %s", ch.Address, ch.Attribute)
				}
			}
		})
	}
	a, d := deployment("shop", "api", 4, 4, nil)
	h, ho := hpa("shop", "api-autoscaler", "api")
	o, oo := hpa("shop", "api", "api-v1")
	body := `  target: {kind: Deployment, name: api}
  idle: {activity: "vector(1)"}
  triggers: [{name: q, query: "vector(50)", target: 10}]
  enforcement: {replicas: enforce}
`
	f := newFixture(t, map[addrs.Object]providers.Object{a: d, h: ho, o: oo}, schedule(body))
	p := f.plan(t, t0)
	if len(p.Changes)+len(p.Held) != 0 {
		t.Errorf("two autoscalers: want nothing planned, got %+v %+v", p.Changes, p.Held)
	}
	if len(p.Errors) != 1 || !strings.Contains(p.Errors[0].Message, "two autoscalers") || !strings.Contains(p.Errors[0].Message, h.String()) ||
		strings.Contains(p.Errors[0].Message, o.String()+" ") || p.Errors[0].Spec != "Schedule/shop/api" {
		t.Errorf("errors %+v: want one naming the Schedule and %s (not %s)", p.Errors, h, o)
	}
	// Only the HPA named api, which scales another Deployment: the
	// triggers size api alone, 4 → ceil(50 / 10) = 5.
	f = newFixture(t, map[addrs.Object]providers.Object{a: d, o: oo}, schedule(body))
	p = f.plan(t, t0)
	if c := change(p, a, workload.Replicas); len(p.Errors) != 0 || c == nil || c.To != "5" {
		t.Errorf("errors %+v, change %+v: want 4 → 5 by the triggers", p.Errors, c)
	}
	// HPAs that cannot be listed are not absent: nothing is decided.
	f = newFixture(t, map[addrs.Object]providers.Object{a: d}, schedule(body))
	f.e.Providers["k8s"] = unlistable{f.objs}
	p = f.plan(t, t0)
	if len(p.Changes)+len(p.Held) != 0 || len(p.Errors) != 1 || !strings.Contains(p.Errors[0].Message, "listing the HorizontalPodAutoscalers of shop") || !strings.Contains(p.Errors[0].Message, "forbidden") {
		t.Errorf("unlistable HPAs: changes %+v %+v, errors %+v; want only an error saying so", p.Changes, p.Held, p.Errors)
	}
}

// unlistable refuses to list.
type unlistable struct{ *objects }

func (unlistable) List(context.Context, providers.ListRequest) providers.ListResponse {
	return providers.ListResponse{Diagnostics: []providers.Diagnostic{{Severity: diag.Error, Message: "horizontalpodautoscalers is forbidden"}}}
}

// TestKnative: a Knative Service gets min-scale (atStart awake, min idle)
// and max-scale (replicas.max).
func TestKnative(t *testing.T) {
	for _, tc := range []struct {
		act     string
		wantMin string
	}{{"vector(1)", "2"}, {"vector(0)", "0"}} {
		a := addrs.Object{Provider: "k8s", Kind: workload.Knative, Namespace: "shop", Name: "api"}
		o := providers.Object{Address: a, Exists: true, Generation: 1,
			Attributes: map[addrs.Path]values.Value{workload.MinScale: values.CountOf(1), workload.ReadyReplicas: values.CountOf(1)},
			Managers:   map[addrs.Path]string{workload.MinScale: "kubectl"}}
		f := newFixture(t, map[addrs.Object]providers.Object{a: o}, schedule(`  target: {kind: KnativeService, name: api}
  replicas: {min: 0, atStart: 2, max: 7}
  idle: {after: 5m, grace: 0s, activity: "`+tc.act+`"}
  enforcement: {replicas: enforce}
`))
		p := f.plan(t, t0)
		if c := change(p, a, workload.MinScale); c == nil || c.To != tc.wantMin {
			t.Errorf("%s: min-scale %+v, want → %s", tc.act, c, tc.wantMin)
		}
		if c := change(p, a, workload.MaxScale); c == nil || c.To != "7" {
			t.Errorf("%s: max-scale %+v, want → 7", tc.act, c)
		}
	}
}

// TestDependsOn: api needs db. Asleep both, a request for api wakes db
// first (it counts api's activity as its own) and api only once db has a
// ready replica.
func TestDependsOn(t *testing.T) {
	a, d := deployment("shop", "api", 0, 0, lastActivity(t0))
	b, db := deployment("shop", "db", 0, 0, nil)
	objs := map[addrs.Object]providers.Object{a: d, b: db}
	f := newFixture(t, objs, schedule(`  target: {kind: Deployment, name: api}
  idle: {after: 5m, grace: 0s, activity: "vector(0)"}
  dependsOn: [db]
  enforcement: {replicas: enforce}
`), scheduleNamed("db", `  target: {kind: Deployment, name: db}
  idle: {after: 3m, grace: 0s, activity: "vector(0)"}
  enforcement: {replicas: enforce}
`))
	now := t0.Add(2 * time.Minute) // db has no activity of its own
	p := f.apply(t, now)
	if c := change(p, b, workload.Replicas); c == nil || c.To != "1" || !strings.Contains(c.Reason, "dependent Schedule/shop/api") {
		t.Fatalf("db: %+v; want woken by its dependent", c)
	}
	if c := change(p, a, workload.Replicas); c != nil {
		t.Fatalf("api: %s → %s; want it to wait for db", c.From, c.To)
	}
	waiting := false
	for _, n := range p.Notes {
		waiting = waiting || strings.Contains(n.Message, "waiting for Schedule/shop/db")
	}
	if !waiting {
		t.Errorf("notes %+v: want api waiting for db", p.Notes)
	}
	db = f.objs.objs[b]
	db.Attributes[workload.ReadyReplicas] = values.CountOf(1)
	f.objs.objs[b] = db
	if c := change(f.plan(t, now.Add(time.Second)), a, workload.Replicas); c == nil || c.To != "1" {
		t.Fatalf("api with db ready: %+v; want woken", c)
	}
}

// TestGracePeriod: no sleep within idle.grace of setpoint's first plan of
// the workload; the end of the grace is the due time; after it, sleep.
func TestGracePeriod(t *testing.T) {
	a, d := deployment("shop", "api", 2, 2, nil)
	f := newFixture(t, map[addrs.Object]providers.Object{a: d}, schedule(`  target: {kind: Deployment, name: api}
  idle: {after: 1m, grace: 10m, activity: "vector(0)"}
  enforcement: {replicas: enforce}
`))
	p := f.plan(t, t0)
	if c := change(p, a, workload.Replicas); c != nil {
		t.Fatalf("in the grace period: %s → %s", c.From, c.To)
	}
	if due := p.Due["Schedule/shop/api"]; !due.Equal(t0.Add(10 * time.Minute)) {
		t.Errorf("due %v, want the end of the grace", due)
	}
	if c := change(f.plan(t, t0.Add(9*time.Minute)), a, workload.Replicas); c != nil {
		t.Fatalf("still in the grace period: %s → %s", c.From, c.To)
	}
	if c := change(f.plan(t, t0.Add(10*time.Minute)), a, workload.Replicas); c == nil || c.To != "0" {
		t.Fatalf("after the grace: %+v; want → 0", c)
	}
}

// TestBehaviorWindowsSurviveARestart: a scale-down waits out the 5m
// scale-down window of the recommendation 6 seen at t0, also when the
// state went through its file between two runs.
func TestBehaviorWindowsSurviveARestart(t *testing.T) {
	a, d := deployment("shop", "api", 6, 6, nil)
	f := newFixture(t, map[addrs.Object]providers.Object{a: d}, schedule(`  target: {kind: Deployment, name: api}
  replicas: {min: 0, atStart: 1, max: 10}
  idle: {activity: "vector(1)"}
  triggers: [{name: load, query: "sum(load)", target: 10}]
  behavior: {scaleDown: {stabilization: 5m}}
  enforcement: {replicas: enforce}
`))
	l := labels.FromStrings("__name__", "load")
	for ts := t0.Add(-time.Minute); ts.Before(t0.Add(10 * time.Minute)); ts = ts.Add(15 * time.Second) {
		v := 20.0 // 2 replicas' worth
		if ts.Before(t0.Add(30 * time.Second)) {
			v = 60 // 6 replicas' worth
		}
		if _, err := f.store.Append(l, ts.UnixMilli(), v); err != nil {
			t.Fatal(err)
		}
	}
	f.plan(t, t0) // recommends 6: the window remembers it
	c := change(f.plan(t, t0.Add(time.Minute)), a, workload.Replicas)
	if c == nil || c.Held == nil || c.Held.Kind != plan.HoldPolicy || !strings.Contains(c.Held.Detail, "stabilized 6") {
		t.Fatalf("at t0+1m: %+v; want held by the scale-down window at 6", c)
	}
	// A restart: the state goes to its file and comes back.
	dir := t.TempDir()
	be := state.NewFile(filepath.Join(dir, "state.json"))
	if _, err := be.Save(context.Background(), f.st); err != nil {
		t.Fatal(err)
	}
	st, err := be.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	f.st = st
	c = change(f.plan(t, t0.Add(2*time.Minute)), a, workload.Replicas)
	if c == nil || c.Held == nil || !strings.Contains(c.Held.Detail, "stabilized 6") {
		t.Fatalf("after the restart: %+v; want still held by the window", c)
	}
	c = change(f.plan(t, t0.Add(5*time.Minute+time.Second)), a, workload.Replicas)
	if c == nil || c.Held != nil || c.To != "2" {
		t.Fatalf("after the window: %+v; want 6 → 2", c)
	}
}

// TestOffRestores: enforcement off hands back the user's value of what
// the Schedule wrote.
func TestOffRestores(t *testing.T) {
	a, d := deployment("shop", "api", 3, 3, nil)
	body := `  target: {kind: Deployment, name: api}
  idle: {after: 1m, grace: 0s, activity: "vector(0)"}
  enforcement: {replicas: %s}
`
	f := newFixture(t, map[addrs.Object]providers.Object{a: d}, schedule(strings.Replace(body, "%s", "enforce", 1)))
	f.apply(t, t0)
	if got := f.objs.objs[a].Attributes[workload.Replicas]; got != values.CountOf(0) {
		t.Fatalf("asleep: %s, want 0", got)
	}
	off := newFixture(t, f.objs.objs, schedule(strings.Replace(body, "%s", "off", 1)))
	off.st = f.st
	c := change(off.apply(t, t0.Add(time.Minute)), a, workload.Replicas)
	if c == nil || c.To != "3" || !c.Restore {
		t.Fatalf("%+v; want the user's 3 restored", c)
	}
}

// TestActivityRemembered: activity seen once is kept in the state, so a
// restarted process whose store has no history yet (here: the provider's
// signal gone) does not take the workload for idle within its timeout.
func TestActivityRemembered(t *testing.T) {
	a, d := deployment("shop", "api", 2, 2, lastActivity(t0))
	f := newFixture(t, map[addrs.Object]providers.Object{a: d}, schedule(`  target: {kind: Deployment, name: api}
  idle: {after: 5m, grace: 0s, activity: "vector(0)"}
  enforcement: {replicas: enforce}
`))
	f.plan(t, t0.Add(time.Minute))
	o := f.objs.objs[a]
	o.Annotations = nil
	f.objs.objs[a] = o
	if c := change(f.plan(t, t0.Add(4*time.Minute)), a, workload.Replicas); c != nil {
		t.Fatalf("%s → %s (%s): want it awake on the remembered activity", c.From, c.To, c.Reason)
	}
	if c := change(f.plan(t, t0.Add(6*time.Minute)), a, workload.Replicas); c == nil || c.To != "0" {
		t.Fatalf("%+v: want asleep once the remembered activity is 5m old", c)
	}
}

// failing is a signal source that fails every query naming the gateway.
type failing struct{ signals.Source }

func (f failing) Query(ctx context.Context, expr string, at time.Time) (signals.Result, error) {
	if strings.Contains(expr, "gateway") {
		return signals.Result{}, errors.New("connection refused")
	}
	return f.Source.Query(ctx, expr, at)
}

// TestActivityUnknownHolds: when api's activity cannot be read nothing
// of its group sleeps: not api, nor db, whose activity is api's too (its
// own query answers: never active), and the plan says why.
func TestActivityUnknownHolds(t *testing.T) {
	a, d := deployment("shop", "api", 2, 2, nil)
	b, db := deployment("shop", "db", 1, 1, nil)
	f := newFixture(t, map[addrs.Object]providers.Object{a: d, b: db}, schedule(`  target: {kind: Deployment, name: api}
  idle: {after: 5m, grace: 0s}
  dependsOn: [db]
  enforcement: {replicas: enforce}
`), scheduleNamed("db", `  target: {kind: Deployment, name: db}
  idle: {after: 1m, grace: 0s, activity: "vector(0)"}
  enforcement: {replicas: enforce}
`))
	f.e.Signals = failing{f.e.Signals}
	p := f.plan(t, t0.Add(time.Hour))
	if len(p.Changes)+len(p.Held) != 0 {
		t.Fatalf("changes %+v %+v: want nothing put to sleep", p.Changes, p.Held)
	}
	said := false
	for _, n := range p.Notes {
		said = said || strings.Contains(n.Message, "connection refused") && n.Spec == "Schedule/shop/api"
	}
	if !said {
		t.Errorf("notes %+v: want the outage said", p.Notes)
	}
}

// TestMissingDependencyHoldsTheWakeUp: api needs db-schedule, a name that
// is no workload (a spec's name, say). Asked for, api does not sleep on
// without a word: its wake-up is planned and held, the plan saying the
// dependency is not found; once a Deployment of that name is there and
// ready, the wake-up goes.
func TestMissingDependencyHoldsTheWakeUp(t *testing.T) {
	a, d := deployment("shop", "api", 0, 0, lastActivity(t0))
	f := newFixture(t, map[addrs.Object]providers.Object{a: d}, schedule(`  target: {kind: Deployment, name: api}
  replicas: {min: 0, atStart: 2, max: 5}
  idle: {after: 5m, grace: 0s, activity: "vector(0)"}
  dependsOn: [db-schedule]
  enforcement: {replicas: enforce}
`))
	p := f.apply(t, t0.Add(time.Minute))
	c := change(p, a, workload.Replicas)
	const why = "dependsOn k8s:Deployment/shop/db-schedule not found (dependsOn names workloads, not specs)"
	if c == nil || c.From != "0" || c.To != "2" || c.Held == nil || c.Held.Kind != plan.HoldPolicy || !strings.Contains(c.Held.Detail, why) || !strings.Contains(c.Reason, why) {
		t.Fatalf("%+v; want 0 → 2 held, saying why", c)
	}
	if got := f.objs.objs[a].Attributes[workload.Replicas]; got != values.CountOf(0) {
		t.Fatalf("applied %s, want still 0", got)
	}
	b, db := deployment("shop", "db-schedule", 1, 1, nil)
	f.objs.objs[b] = db
	if c := change(f.apply(t, t0.Add(2*time.Minute)), a, workload.Replicas); c == nil || c.To != "2" || c.Held != nil {
		t.Fatalf("with the dependency there: %+v; want 0 → 2 applied", c)
	}
}

// TestReplicaFailureHoldsTheRaise: a Deployment whose pods cannot be
// created (its ReplicaFailure condition, a quota exceeded) is not woken
// nor scaled up blindly: the change is held with the condition's message;
// a scale-down still goes; without the condition the wake-up goes.
func TestReplicaFailureHoldsTheRaise(t *testing.T) {
	const quota = `pods "api-7c9f-x2x" is forbidden: exceeded quota: compute`
	failing := func(replicas, ready int) (addrs.Object, providers.Object) {
		a, d := deployment("shop", "api", replicas, ready, lastActivity(t0))
		d.Attributes[workload.ReplicaFailure] = values.StringOf("True")
		d.Attributes[workload.ReplicaFailureMessage] = values.StringOf(quota)
		return a, d
	}
	body := func(trigger string) string {
		return `  target: {kind: Deployment, name: api}
  replicas: {min: 0, atStart: 2, max: 10}
  idle: {after: 5m, grace: 0s, activity: "vector(0)"}
` + trigger + `  enforcement: {replicas: enforce}
`
	}
	for _, tc := range []struct {
		name            string
		replicas, ready int
		trigger         string
		failed          bool
		from, to        string
		held            bool
	}{
		{"wake-up", 0, 0, "", true, "0", "2", true},
		{"scale-up", 2, 0, "  triggers: [{name: q, query: \"vector(50)\", target: 10}]\n", true, "2", "5", true},
		{"scale-down", 8, 0, "  triggers: [{name: q, query: \"vector(30)\", target: 10}]\n  behavior: {scaleDown: {stabilization: 0s}}\n", true, "8", "3", false},
		{"wake-up without the condition", 0, 0, "", false, "0", "2", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, d := failing(tc.replicas, tc.ready)
			if !tc.failed {
				a, d = deployment("shop", "api", tc.replicas, tc.ready, lastActivity(t0))
			}
			f := newFixture(t, map[addrs.Object]providers.Object{a: d}, schedule(body(tc.trigger)))
			c := change(f.plan(t, t0.Add(time.Minute)), a, workload.Replicas)
			if c == nil || c.From != tc.from || c.To != tc.to || (c.Held != nil) != tc.held {
				t.Fatalf("%+v; want %s → %s, held %v", c, tc.from, tc.to, tc.held)
			}
			if tc.held && (c.Held.Kind != plan.HoldPolicy || !strings.Contains(c.Held.Detail, "its pods cannot be created (ReplicaFailure: "+quota+")")) {
				t.Errorf("held %s; want the condition's message", c.Held)
			}
		})
	}
}

// records returns the Schedule's times kept in the state entry of api's
// spec.replicas, by key.
func records(st *state.State, a addrs.Object) map[string]string {
	out := map[string]string{}
	e, ok := st.Lookup(addrs.Attr{Object: a, Path: workload.Replicas})
	if !ok {
		return out
	}
	for k, v := range e.Policy {
		if strings.HasPrefix(k, "schedule.") {
			out[k] = string(v)
		}
	}
	return out
}

// TestRecordsOnlyWhenEnforcing: in observe mode a Schedule keeps nothing
// in the state (no adoption, no activity); enforcing, it keeps both,
// named after itself; turned off, it forgets them.
func TestRecordsOnlyWhenEnforcing(t *testing.T) {
	a, d := deployment("shop", "api", 2, 2, lastActivity(t0))
	body := `  target: {kind: Deployment, name: api}
  idle: {after: 5m, activity: "vector(0)"}
  enforcement: {replicas: %s}
`
	f := newFixture(t, map[addrs.Object]providers.Object{a: d}, schedule(strings.Replace(body, "%s", "observe", 1)))
	f.plan(t, t0.Add(time.Minute))
	if got := records(f.st, a); len(got) != 0 {
		t.Fatalf("observe mode kept %v", got)
	}
	on := newFixture(t, f.objs.objs, schedule(strings.Replace(body, "%s", "enforce", 1)))
	on.st = f.st
	on.plan(t, t0.Add(2*time.Minute))
	got := records(on.st, a)
	if got["schedule.adopted"] != `{"at":"2026-03-10T09:02:00Z","by":"Schedule/shop/api"}` || got["schedule.activity"] != `{"at":"2026-03-10T09:00:00Z","by":"Schedule/shop/api"}` {
		t.Fatalf("enforcing kept %v", got)
	}
	off := newFixture(t, f.objs.objs, schedule(strings.Replace(body, "%s", "off", 1)))
	off.st = f.st
	off.plan(t, t0.Add(3*time.Minute))
	if got := records(off.st, a); len(got) != 0 {
		t.Fatalf("turned off, it still keeps %v", got)
	}
}

// TestRecordsOfADeletedSchedule: api's Schedule adopted the workload and
// saw activity at t0, then was deleted (it never changed anything, so no
// release forgot the entry) and another Schedule took the target. It
// inherits neither: its grace period runs from its own first plan (so a
// workload idle for 20 minutes is not put to sleep at once), and the
// records are its own.
func TestRecordsOfADeletedSchedule(t *testing.T) {
	a, d := deployment("shop", "api", 2, 2, lastActivity(t0))
	old := newFixture(t, map[addrs.Object]providers.Object{a: d}, schedule(`  target: {kind: Deployment, name: api}
  idle: {after: 5m, grace: 0s, activity: "vector(0)"}
  enforcement: {replicas: enforce}
`))
	old.plan(t, t0.Add(time.Minute))
	d.Annotations = nil
	old.objs.objs[a] = d
	f := newFixture(t, old.objs.objs, scheduleNamed("api-nights", `  target: {kind: Deployment, name: api}
  idle: {after: 1m, grace: 10m, activity: "vector(0)"}
  enforcement: {replicas: enforce}
`))
	f.st = old.st
	p := f.plan(t, t0.Add(20*time.Minute))
	if c := change(p, a, workload.Replicas); c != nil {
		t.Fatalf("%s → %s (%s); want no sleep in its own grace period", c.From, c.To, c.Reason)
	}
	got := records(f.st, a)
	if got["schedule.adopted"] != `{"at":"2026-03-10T09:20:00Z","by":"Schedule/shop/api-nights"}` || got["schedule.activity"] != "" {
		t.Fatalf("records %v; want only its own adoption", got)
	}
}

// TestRecordsFromBeforeOwners: an adoption kept as a bare time (before
// records named their spec) still counts as the Schedule's own: the grace
// period that ran from it is over.
func TestRecordsFromBeforeOwners(t *testing.T) {
	a, d := deployment("shop", "api", 2, 2, nil)
	f := newFixture(t, map[addrs.Object]providers.Object{a: d}, schedule(`  target: {kind: Deployment, name: api}
  idle: {after: 1m, grace: 10m, activity: "vector(0)"}
  enforcement: {replicas: enforce}
`))
	e := f.st.Entry(addrs.Attr{Object: a, Path: workload.Replicas})
	e.Policy = map[string]json.RawMessage{"schedule.adopted": json.RawMessage(`"2026-03-10T08:00:00Z"`)}
	if c := change(f.plan(t, t0), a, workload.Replicas); c == nil || c.To != "0" {
		t.Fatalf("%+v; want asleep, the grace from 08:00 over", c)
	}
	if got := records(f.st, a)["schedule.adopted"]; got != `"2026-03-10T08:00:00Z"` && got != `{"at":"2026-03-10T08:00:00Z","by":"Schedule/shop/api"}` {
		t.Fatalf("adoption %s", got)
	}
}
