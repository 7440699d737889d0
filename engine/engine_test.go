package engine_test

import (
	"context"
	"fmt"
	"maps"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/gate"
	_ "github.com/setpoint-dev/setpoint/engine/kinds/nfr"
	"github.com/setpoint-dev/setpoint/engine/plan"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/internal/simtest"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/sim"
	"github.com/setpoint-dev/setpoint/providers/workload"
)

// world writes an Environment over a constant 300 req/s trace with the
// given workloads (YAML list items) and the NFRs, and returns an engine on
// the real sim world and embedded store.
func world(t *testing.T, workloads string, nfrs ...string) (*engine.Engine, *sim.Provider) {
	t.Helper()
	var trace strings.Builder
	trace.WriteString("second,rate\n")
	for i := 0; i < 3600; i++ {
		fmt.Fprintf(&trace, "%d,300\n", i)
	}
	files := map[string]string{
		"trace.csv": trace.String(),
		"env.yaml": `apiVersion: setpoint.dev/v1alpha1
kind: Environment
metadata: {name: t}
spec:
  providers:
    - name: sim
      config:
        trace: trace.csv
        start: 10m
        workloads:
` + workloads,
	}
	for i, n := range nfrs {
		files[fmt.Sprintf("nfr-%d.yaml", i)] = n
	}
	return simtest.Engine(t, simtest.WriteDir(t, files))
}

const checkoutWL = `          - {kind: Deployment, namespace: shop, name: checkout, replicas: 2, hpa: {min: 2, max: 50, targetCPU: 70%}, perPodRPS: 100, cpuPerRequest: 5m, startup: 20s, containers: [{name: function, request: 256Mi, limit: 512Mi, workingSet: 110Mi}]EXTRA}
`

func checkout(extra string) string { return strings.Replace(checkoutWL, "EXTRA", extra, 1) }

func nfr(name, extra string) string {
	return `apiVersion: setpoint.dev/v1alpha1
kind: NFR
metadata: {name: ` + name + `, namespace: shop}
spec:
  target: {kind: Deployment, name: ` + name + `}
  policy: reference
  throughput: {minRPS: 400}
  enforcement: {replicas: enforce, memory: observe}
  safety: {stability: 0s, scaleUp: stable, ` + oldSafety + `}
` + extra
}

// oldSafety are the step and band these tests were written for, before
// the defaults were chosen from make bench-control: a step of 30% (of 2
// pods, one) whichever the direction, no minimum, no period.
const oldSafety = "tolerance: 10%, cooldown: 2m, maxReplicaStep: 30%, maxReplicaStepUp: 30%, minReplicaStepUp: 1, stepPeriod: 0s"

func at(p *sim.Provider, d time.Duration) time.Time { return p.World.Start().Add(d) }

func find(cs []plan.Change, attr string) *plan.Change {
	for i := range cs {
		if strings.HasSuffix(cs[i].Attribute.String(), attr) {
			return &cs[i]
		}
	}
	return nil
}

// TestPlanAndApplyOnTheSimWorld: a plan on the real world, applied, then
// planned again after the cooldown; the state remembers the user's value.
func TestPlanAndApplyOnTheSimWorld(t *testing.T) {
	e, p := world(t, checkout(""), nfr("checkout", ""))
	st := state.New()
	ctx := context.Background()
	now := at(p, 10*time.Minute)
	pl := e.Plan(ctx, now, st, nil)
	c := find(pl.Changes, "spec.minReplicas")
	if c == nil {
		t.Fatalf("want a minReplicas change:\n%s", text(pl))
	}
	// 300 req/s at 5m CPU each: 1.5 cores + idle; 400/300 × ~1504m/500m.
	// The world's arrivals are Poisson: the measured rate is 300 ± 11 (5
	// sd of a minute), and the reason's arithmetic must hold for it.
	var rps, cpu float64
	var n int
	if _, err := fmt.Sscanf(c.Reason, "ceil((400/%g) × (%gm/500m)) = %d", &rps, &cpu, &n); err != nil || math.Abs(rps-300) > 11 ||
		float64(n) != math.Ceil(400/rps*cpu/500-1e-9) {
		t.Fatalf("reason %q: rps %v cpu %v = %d (%v)", c.Reason, rps, cpu, n, err)
	}
	if c.From != "2" || c.To != "3" || len(c.Bounds) != 2 || c.Bounds[0].Kind != plan.BoundStep || c.Bounds[0].Of != values.CountOf(2) || c.Bounds[0].String() != "bounded to +30% of 2, at least 1" {
		t.Fatalf("change: %+v", c)
	}
	if c.Bounds[1].Kind != plan.BoundTakeover || c.Bounds[1].Manager != "kubectl-client-side-apply" || !c.Force {
		t.Fatalf("ownership missing: %+v", c.Bounds)
	}
	if m := find(pl.Held, "requests.memory"); m == nil || held(m) != "observe mode" || m.Held.Kind != plan.HoldMode || m.To != "192Mi" {
		t.Fatalf("memory should be held in observe mode at 192Mi: %+v", pl.Held)
	}
	results := e.Apply(ctx, now, pl, st)
	if len(results) != 1 || results[0].Err != "" {
		t.Fatalf("apply: %+v", results)
	}
	key := addrs.Attr{Object: c.Address, Path: c.Attribute}
	if en, ok := st.Lookup(key); !ok || *en.User != values.CountOf(2) || en.Applied.Value != values.CountOf(3) || len(en.Applied.By) != 1 || en.Applied.By[0] != "NFR/shop/checkout" {
		t.Fatalf("state: %+v", en)
	}
	// Inside the cooldown the next step is held, with the numbers.
	pl = e.Plan(ctx, now.Add(30*time.Second), st, nil)
	if h := find(pl.Held, "spec.minReplicas"); h == nil || held(h) != "cooldown 30 s of 120 s since the last apply" || h.Held.Kind != plan.HoldCooldown || h.From != "3" {
		t.Fatalf("cooldown: %s", text(pl))
	}
	pl = e.Plan(ctx, now.Add(125*time.Second), st, nil)
	if c := find(pl.Changes, "spec.minReplicas"); c == nil || c.From != "3" || c.To != "4" {
		t.Fatalf("after the cooldown: %s", text(pl))
	}
	// Enforcement turned off: the user's value comes back in one step, and
	// setpoint forgets the attribute.
	e.Specs[0].(*spec.NFR).Spec.Enforcement.Replicas = spec.ModeOff
	pl = e.Plan(ctx, now.Add(130*time.Second), st, nil)
	c = find(pl.Changes, "spec.minReplicas")
	if c == nil || c.From != "3" || c.To != "2" || !c.Restore || !strings.Contains(c.Reason, "restoring the user's value 2") {
		t.Fatalf("restore: %s", text(pl))
	}
	if res := e.Apply(ctx, now.Add(130*time.Second), pl, st); len(res) != 1 || res[0].Err != "" {
		t.Fatalf("restore apply: %+v", res)
	}
	if _, ok := st.Lookup(key); ok {
		t.Fatal("the restored attribute should be forgotten")
	}
	if pl = e.Plan(ctx, now.Add(135*time.Second), st, nil); find(pl.Changes, "spec.minReplicas") != nil || find(pl.Held, "spec.minReplicas") != nil {
		t.Fatalf("nothing left to do after the restore: %s", text(pl))
	}
}

// held is a change's hold as text ("" when it is not held).
func held(c *plan.Change) string {
	if c == nil || c.Held == nil {
		return ""
	}
	return c.Held.String()
}

func text(p *plan.Plan) string {
	var b strings.Builder
	p.Text(&b)
	return b.String()
}

func TestFaultsAndHolds(t *testing.T) {
	wls := checkout(", managers: {spec.minReplicas: argocd-controller}") +
		`          - {kind: Deployment, namespace: shop, name: paused, replicas: 1, perPodRPS: 100, share: 0, containers: [{name: app, request: 256Mi, limit: 512Mi, workingSet: 100Mi}], annotations: {setpoint.dev/paused: "true"}}
          - {kind: Deployment, namespace: shop, name: plain, replicas: 1, perPodRPS: 100, containers: [{name: app, request: 256Mi, limit: 512Mi, workingSet: 100Mi}]}
`
	e, p := world(t, wls,
		nfr("checkout", ""),
		nfr("paused", ""),
		nfr("ghost", ""),
		nfr("plain", "  autoscaler: {create: true, maxReplicas: 10}\n"),
	)
	ctx := context.Background()
	st := state.New()
	pl := e.Plan(ctx, at(p, 10*time.Minute), st, nil)
	out := text(pl)
	// A GitOps-owned field is a conflict unless takeOverFrom lists it.
	if h := find(pl.Held, "spec.minReplicas"); h == nil || h.Held.Kind != plan.HoldConflict || h.Held.Manager != "argocd-controller" {
		t.Errorf("conflict: %s", out)
	}
	// A target that does not exist: said, nothing created.
	if !strings.Contains(out, "target sim:Deployment/shop/ghost does not exist: nothing to do") {
		t.Errorf("ghost: %s", out)
	}
	// Paused by annotation; with no traffic there is also nothing to say
	// about replicas, and the memory change is held as paused.
	pausedHolds := 0
	for _, h := range pl.Held {
		if strings.Contains(h.Address.String(), "/paused") {
			pausedHolds++
			if h.Held.Kind != plan.HoldPaused || !strings.HasPrefix(h.Held.String(), "paused (setpoint.dev/paused") {
				t.Errorf("paused: %+v", h)
			}
		}
	}
	if pausedHolds == 0 {
		t.Errorf("the paused target's memory changes should be listed as held: %s", out)
	}
	if !strings.Contains(out, "NFR/shop/paused") || !strings.Contains(out, "~0") {
		t.Errorf("no traffic should hold the replicas decision: %s", out)
	}
	// An HPA is created only because the spec asks for it.
	c := find(pl.Changes, "spec.minReplicas")
	if c == nil || c.Action != action.Create || c.Create[addrs.MustPath("spec.maxReplicas")] != values.CountOf(10) || !strings.HasSuffix(c.Address.String(), "HorizontalPodAutoscaler/shop/plain") {
		t.Fatalf("create: %s", out)
	}
	if !strings.Contains(out, "+ sim:HorizontalPodAutoscaler/shop/plain") {
		t.Errorf("text: %s", out)
	}
	res := e.Apply(ctx, at(p, 10*time.Minute), pl, st)
	for _, r := range res {
		if r.Err != "" {
			t.Fatalf("apply: %+v", r)
		}
	}
	created := addrs.Object{Provider: "sim", Kind: "HorizontalPodAutoscaler", Namespace: "shop", Name: "plain"}
	if en, ok := st.Lookup(addrs.Attr{Object: created, Path: addrs.MustPath("spec.maxReplicas")}); !ok || en.Applied == nil || en.Applied.Value != values.CountOf(10) {
		t.Fatalf("every attribute of a created object is setpoint's: %+v", en)
	}
	read := p.Read(ctx, providers.ReadRequest{Now: at(p, 10*time.Minute), Addresses: []providers.Address{{Provider: "sim", Kind: "HorizontalPodAutoscaler", Namespace: "shop", Name: "plain"}}})
	if o := read.Objects[0]; !o.Exists || o.Managers[addrs.MustPath("spec.minReplicas")] != "setpoint" {
		t.Fatalf("created HPA: %+v", o)
	}
}

// failing wraps the real sim provider and fails what a test names: a
// provider error on one address must not stop the rest.
type failing struct {
	*sim.Provider
	readFail, applyFail string
}

func (f failing) Read(ctx context.Context, req providers.ReadRequest) providers.ReadResponse {
	resp := f.Provider.Read(ctx, req)
	for i, a := range req.Addresses {
		if strings.Contains(a.String(), f.readFail) {
			resp.Objects[i] = providers.Object{}
			aa := a
			resp.Diagnostics = append(resp.Diagnostics, providers.Diagnostic{Severity: providers.Error, Message: "connection reset", Address: &aa})
		}
	}
	return resp
}

func (f failing) Apply(ctx context.Context, req providers.ApplyRequest) providers.ApplyResponse {
	var keep []providers.ObjectChange
	var failedAt []int
	for i, c := range req.Changes {
		if strings.Contains(c.Address.String(), f.applyFail) {
			failedAt = append(failedAt, i)
			continue
		}
		keep = append(keep, c)
	}
	inner := f.Provider.Apply(ctx, providers.ApplyRequest{Now: req.Now, Changes: keep})
	out := providers.ApplyResponse{}
	j := 0
	for i, c := range req.Changes {
		if len(failedAt) > 0 && failedAt[0] == i {
			failedAt = failedAt[1:]
			out.Results = append(out.Results, providers.ObjectResult{Address: c.Address, Err: "admission webhook denied the request"})
			continue
		}
		out.Results = append(out.Results, inner.Results[j])
		j++
	}
	return out
}

func TestProviderErrorsNameTheSpec(t *testing.T) {
	wls := checkout("") +
		`          - {kind: Deployment, namespace: shop, name: a, replicas: 1, perPodRPS: 100, containers: [{name: app, request: 256Mi, limit: 512Mi, workingSet: 100Mi}]}
          - {kind: Deployment, namespace: shop, name: b, replicas: 1, perPodRPS: 100, containers: [{name: app, request: 256Mi, limit: 512Mi, workingSet: 100Mi}]}
`
	e, p := world(t, wls, nfr("checkout", ""), nfr("a", ""), nfr("b", ""))
	e.Providers["sim"] = failing{Provider: p, readFail: "Deployment/shop/a", applyFail: "Deployment/shop/b"}
	ctx := context.Background()
	st := state.New()
	now := at(p, 10*time.Minute)
	pl := e.Plan(ctx, now, st, nil)
	if len(pl.Errors) != 1 || !strings.Contains(pl.Errors[0].Message, "connection reset") || !strings.Contains(pl.Errors[0].Pos.String(), "nfr-1.yaml:5:3") {
		t.Fatalf("read error: %+v", pl.Errors)
	}
	res := e.Apply(ctx, now, pl, st)
	var ok, bad int
	for _, r := range res {
		if r.Err == "" {
			ok++
			continue
		}
		bad++
		if !strings.Contains(r.Err, "nfr-2.yaml:") || !strings.Contains(r.Err, "admission webhook denied") {
			t.Errorf("apply error should name the spec: %s", r.Err)
		}
		if en, ok := st.Lookup(addrs.Attr{Object: r.Change.Address, Path: r.Change.Attribute}); ok && en.Applied != nil {
			t.Errorf("a failed change was recorded as applied: %+v", en)
		}
	}
	if ok != 1 || bad != 1 {
		t.Fatalf("want checkout applied and b failed: %+v", res)
	}
}

func TestNoDataHolds(t *testing.T) {
	e, p := world(t, checkout(""), nfr("checkout", ""))
	// At the start nothing has been measured: nothing is decided.
	pl := e.Plan(context.Background(), at(p, 0), state.New(), nil)
	out := text(pl)
	if len(pl.Changes) != 0 || len(pl.Held) != 0 || !strings.Contains(out, "replicas: no replicas recommendation: requests per second missing") || !strings.Contains(out, "memory: container function: no memory recommendation") {
		t.Fatalf("decided without data: %s", out)
	}
	// Five seconds in, one scrape: no rate window has two samples yet, so
	// the replicas decision holds (memory has its first sample).
	pl = e.Plan(context.Background(), at(p, 5*time.Second), state.New(), nil)
	if find(pl.Changes, "spec.minReplicas") != nil || find(pl.Held, "spec.minReplicas") != nil || !strings.Contains(text(pl), "requests per second missing") {
		t.Fatalf("replicas decided from one sample: %s", text(pl))
	}
}

// TestCoupledMemoryMovesTogether: a container's request and limit are one
// group — when one is held the other is too — and no plan leaves a
// request above its limit.
func TestCoupledMemoryMovesTogether(t *testing.T) {
	ctx := context.Background()
	memNFR := func(name, extra string) string {
		return strings.Replace(nfr(name, extra), "enforcement: {replicas: enforce, memory: observe}", "enforcement: {replicas: observe, memory: enforce}", 1)
	}
	// The limit belongs to a GitOps controller: the request, which could
	// move alone, is held with it.
	wl := `          - {kind: Deployment, namespace: shop, name: coupled, replicas: 2, perPodRPS: 100, containers: [{name: app, request: 256Mi, limit: 512Mi, workingSet: 110Mi}], managers: {"spec.template.spec.containers[name=app].resources.limits.memory": argocd-controller}}
`
	e, p := world(t, wl, memNFR("coupled", ""))
	pl := e.Plan(ctx, at(p, 10*time.Minute), state.New(), nil)
	lim, req := find(pl.Held, "limits.memory"), find(pl.Held, "requests.memory")
	if lim == nil || lim.Held.Kind != plan.HoldConflict || req == nil || req.Held.Kind != plan.HoldCoupled || !strings.Contains(req.Held.String(), "limits.memory") {
		t.Fatalf("want the request held with its limit:\n%s", text(pl))
	}
	if len(pl.Changes) != 0 {
		t.Fatalf("nothing of the group may apply:\n%s", text(pl))
	}

	// The limit is pinned at 512Mi and the working set grew: the request's
	// bounded step (480Mi + 25% = 592Mi... rounded toward the current)
	// would pass the limit, so the group is held and nothing is sent.
	wl = `          - {kind: Deployment, namespace: shop, name: pinned, replicas: 2, perPodRPS: 100, containers: [{name: app, request: 480Mi, limit: 512Mi, workingSet: 700Mi}]}
`
	e, p = world(t, wl, memNFR("pinned", "  memory: {limit: 512Mi}\n"))
	pl = e.Plan(ctx, at(p, 10*time.Minute), state.New(), nil)
	req = find(pl.Held, "requests.memory")
	if req == nil || req.Held.Kind != plan.HoldInvalid || !strings.Contains(req.Held.String(), "request 592Mi would exceed limit 512Mi") {
		t.Fatalf("want the request held as invalid with its limit:\n%s", text(pl))
	}
	if len(pl.Changes) != 0 {
		t.Fatalf("a request above its limit must never be planned:\n%s", text(pl))
	}
}

// TestUnreadHPAIsNotAbsent: an HPA that could not be read is not an HPA
// that does not exist — the bound must not go to the Deployment's replicas.
func TestUnreadHPAIsNotAbsent(t *testing.T) {
	e, p := world(t, checkout(""), nfr("checkout", ""))
	e.Providers["sim"] = failing{Provider: p, readFail: "HorizontalPodAutoscaler/shop/checkout"}
	pl := e.Plan(context.Background(), at(p, 10*time.Minute), state.New(), nil)
	if len(pl.Changes)+len(pl.Held) != 0 || len(pl.Errors) != 1 || !strings.Contains(pl.Errors[0].Message, "HorizontalPodAutoscaler/shop/checkout: connection reset") {
		t.Fatalf("want only an error naming the HPA:\n%s", text(pl))
	}
}

// TestCappedAtCurrentIsNoChange: a cap equal to the current value leaves
// nothing to apply (not a "2 → 2" applied every tick).
func TestCappedAtCurrentIsNoChange(t *testing.T) {
	e, p := world(t, checkout(""), nfr("checkout", ""))
	e.Specs[0].(*spec.NFR).Spec.Safety.MaxReplicas = 2
	pl := e.Plan(context.Background(), at(p, 10*time.Minute), state.New(), nil)
	if c := find(pl.Changes, "spec.minReplicas"); c != nil {
		t.Fatalf("a change to where it is: %+v", c)
	}
	if h := find(pl.Held, "spec.minReplicas"); h != nil {
		t.Fatalf("a hold of a change to where it is: %+v", h)
	}
}

// altered is the sim world with what it serves changed by alter, in reads
// and lists alike (deciders find an HPA by listing).
type altered struct {
	*sim.Provider
	alter func([]providers.Object)
}

func (a altered) Read(ctx context.Context, req providers.ReadRequest) providers.ReadResponse {
	resp := a.Provider.Read(ctx, req)
	a.alter(resp.Objects)
	return resp
}

func (a altered) List(ctx context.Context, req providers.ListRequest) providers.ListResponse {
	resp := a.Provider.List(ctx, req)
	a.alter(resp.Objects)
	return resp
}

// retype serves one attribute as a string, as a broken provider might.
func retype(objs []providers.Object) {
	min := addrs.MustPath("spec.minReplicas")
	for i, o := range objs {
		if v, ok := o.Attributes[min]; ok {
			attrs := maps.Clone(o.Attributes)
			attrs[min] = values.StringOf(v.String())
			objs[i].Attributes = attrs
		}
	}
}

// TestObservedTypeMustMatch: a value of another type than the one decided
// is an error, never stepped or compared across types.
func TestObservedTypeMustMatch(t *testing.T) {
	e, p := world(t, checkout(""), nfr("checkout", ""))
	e.Providers["sim"] = altered{p, retype}
	pl := e.Plan(context.Background(), at(p, 10*time.Minute), state.New(), nil)
	if find(pl.Changes, "spec.minReplicas") != nil || find(pl.Held, "spec.minReplicas") != nil {
		t.Fatalf("a string compared with a count:\n%s", text(pl))
	}
	found := false
	for _, e := range pl.Errors {
		found = found || strings.Contains(e.Message, "the provider reports a string, the spec decides a count")
	}
	if !found {
		t.Fatalf("want an error naming the types:\n%s", text(pl))
	}
}

// silentDryRun answers no dry run.
type silentDryRun struct{ *sim.Provider }

func (silentDryRun) PlanChange(context.Context, providers.PlanChangeRequest) providers.PlanChangeResponse {
	return providers.PlanChangeResponse{}
}

// TestUnansweredDryRunHolds: a change the provider's dry run did not
// answer is held, not taken for accepted.
func TestUnansweredDryRunHolds(t *testing.T) {
	e, p := world(t, checkout(""), nfr("checkout", ""))
	e.Providers["sim"] = silentDryRun{p}
	pl := e.Plan(context.Background(), at(p, 10*time.Minute), state.New(), nil)
	h := find(pl.Held, "spec.minReplicas")
	if len(pl.Changes) != 0 || h == nil || h.Held.Kind != plan.HoldRejected || !strings.Contains(h.Held.String(), "did not answer") {
		t.Fatalf("want the change held as rejected:\n%s", text(pl))
	}
}

// rollOut reports the HPA as mid-rollout: its controller has not acted
// on its latest generation.
func rollOut(objs []providers.Object) {
	for i, o := range objs {
		if o.Address.Kind == "HorizontalPodAutoscaler" {
			objs[i].Generation, objs[i].ObservedGeneration = 3, 2
		}
	}
}

// TestMidRolloutHolds: a change to an object whose observedGeneration is
// behind its generation is held with both numbers; caught up, it goes.
func TestMidRolloutHolds(t *testing.T) {
	e, p := world(t, checkout(""), nfr("checkout", ""))
	now := at(p, 10*time.Minute)
	e.Providers["sim"] = altered{p, rollOut}
	pl := e.Plan(context.Background(), now, state.New(), nil)
	h := find(pl.Held, "spec.minReplicas")
	if h == nil || h.Held.Kind != plan.HoldRollout || h.Held.String() != "mid-rollout: observedGeneration 2 is behind generation 3" {
		t.Fatalf("want a rollout hold:\n%s", text(pl))
	}
	e.Providers["sim"] = p
	pl = e.Plan(context.Background(), now, state.New(), nil)
	if c := find(pl.Changes, "spec.minReplicas"); c == nil {
		t.Fatalf("caught up, the change should go:\n%s", text(pl))
	}
}

// TestGroups: specs sharing a target (an NFR and a Toy on plain) are one
// group, named by its least address; the others are their own.
func TestGroups(t *testing.T) {
	e, _ := world(t, checkout("")+plainWL, nfr("checkout", ""), nfr("plain", ""), toyDoc("8"))
	g := e.Groups()
	if len(g) != 3 {
		t.Fatalf("groups: %v", g)
	}
	if g["NFR/shop/plain"] != g["Toy/shop/floor"] || g["NFR/shop/plain"] != "sim:Deployment/shop/plain" {
		t.Fatalf("two specs on plain: %v", g)
	}
	if g["NFR/shop/checkout"] != "sim:Deployment/shop/checkout" {
		t.Fatalf("checkout: %v", g)
	}
}

// TestLostApplyRecordIsFoundInTheWorld: a process killed between the
// provider's apply and the state's save left the user's value and the
// journal's mark in the state (saved before applying) but not the apply.
// The next plan neither repeats the change nor forgets it: the mark is
// settled from the world, where the field's manager is setpoint and the
// value the one marked. Without the mark nothing is claimed.
func TestLostApplyRecordIsFoundInTheWorld(t *testing.T) {
	e, p := world(t, checkout(""), nfr("checkout", ""))
	ctx := context.Background()
	now := at(p, 10*time.Minute)
	st := state.New()
	// Step by step (each bounded), until an apply reaches the wanted
	// value: that last apply's record is the one lost.
	var c *plan.Change
	var user values.Value
	for i := 0; ; i++ {
		pl := e.Plan(ctx, now, st, nil)
		c = find(pl.Changes, "spec.minReplicas")
		if c == nil || i == 10 {
			t.Fatalf("no change that reaches the wanted value:\n%s", text(pl))
		}
		user = *st.Entry(addrs.Attr{Object: c.Address, Path: c.Attribute}).User
		for _, r := range e.Apply(ctx, now, pl, st) {
			if r.Err != "" {
				t.Fatal(r.Err)
			}
		}
		if c.To == c.Wanted {
			break
		}
		now = now.Add(5 * time.Minute) // past the cooldown
	}
	attr := addrs.Attr{Object: c.Address, Path: c.Attribute}
	// Without a journal mark, a value setpoint's manager holds is not
	// claimed as applied (nor adopted: the plan wants it as it is).
	unmarked := state.New()
	unmarked.Entry(attr).User = &user
	e.Plan(ctx, now, unmarked, nil)
	if en, _ := unmarked.Lookup(attr); en == nil || en.Applied != nil {
		t.Fatalf("claimed without a journal mark: %+v", en)
	}
	// What the pre-apply save kept: the user's value and the journal's
	// mark, no apply.
	lost := state.New()
	lost.Entry(attr).User = &user
	engine.Journal(&plan.Plan{Changes: []plan.Change{*c}}, lost, now)
	pl := e.Plan(ctx, now, lost, nil)
	if again := find(pl.Changes, "spec.minReplicas"); again != nil {
		t.Fatalf("the change was repeated: %+v", again)
	}
	en, ok := lost.Lookup(attr)
	if !ok || en.Applied == nil || en.Applied.Value != c.Value || *en.User != user {
		t.Fatalf("state after the plan: %+v (want applied %s, user %s)", en, c.Value, user)
	}
}

// Enforcement turned off while the field already reads the user's value:
// a field no longer setpoint's (the user wrote it back) is forgotten, so a
// later write of the user's is never "restored" over; one still
// setpoint's is handed back, moving no value.
func TestRestoreOfAValueAlreadyThere(t *testing.T) {
	e, p := world(t, checkout(""), nfr("checkout", ""))
	st := state.New()
	ctx := context.Background()
	now := at(p, 10*time.Minute)
	pl := e.Plan(ctx, now, st, nil)
	if res := e.Apply(ctx, now, pl, st); len(res) != 1 || res[0].Err != "" {
		t.Fatalf("apply: %+v", res)
	}
	hpa := find(pl.Changes, "spec.minReplicas").Address
	key := addrs.Attr{Object: hpa, Path: workload.MinReplicas}
	write := func(v int64, manager string) {
		t.Helper()
		r := p.Apply(ctx, providers.ApplyRequest{Now: now, Changes: []providers.ObjectChange{{Address: hpa, Action: action.Update, Manager: manager, Force: true,
			Attributes: map[addrs.Path]values.Value{workload.MinReplicas: values.CountOf(v), workload.MaxReplicas: values.CountOf(50)}, Changed: []addrs.Path{workload.MinReplicas}}}})
		if r.Results[0].Err != "" {
			t.Fatal(r.Results[0].Err)
		}
	}
	e.Specs[0].(*spec.NFR).Spec.Enforcement.Replicas = spec.ModeOff
	// Still setpoint's, with the user's value: handed back, 2 → 2.
	write(2, gate.SetpointManager)
	pl = e.Plan(ctx, now.Add(time.Minute), st, nil)
	if c := find(pl.Changes, "spec.minReplicas"); c == nil || !c.Restore || c.From != "2" || c.To != "2" {
		t.Fatalf("a restore that moves no value must still hand the field back: %s", text(pl))
	}
	// The user wrote it back themselves: the restore is done.
	write(2, "kubectl")
	pl = e.Plan(ctx, now.Add(2*time.Minute), st, nil)
	if c := find(pl.Changes, "spec.minReplicas"); c != nil {
		t.Fatalf("nothing to restore: %s", text(pl))
	}
	if _, ok := st.Lookup(key); ok {
		t.Fatal("a restore found done must forget the attribute")
	}
	// A later write of the user's stands.
	write(5, "kubectl")
	pl = e.Plan(ctx, now.Add(3*time.Minute), st, nil)
	if c := find(pl.Changes, "spec.minReplicas"); c != nil {
		t.Fatalf("the user's later value was restored over: %s", text(pl))
	}
}
