package gate

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/plan"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/engine/values"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

var gitops = []string{"argocd-controller", "kustomize-controller", "helm-controller"}

func nfrPolicy() Stability {
	return Stability{Key: "nfr", Stability: 180 * time.Second, Tolerance: 0.1, Cooldown: 120 * time.Second, MaxStep: 0.3}
}

func enforce() Rules {
	return Rules{Spec: "NFR/shop/a", Mode: spec.ModeEnforce, Policy: nfrPolicy()}
}

func replicaChange(cur, want int64) Change {
	return Change{Current: values.CountOf(cur), HasCurrent: true, Desired: values.CountOf(want), Manager: "kubectl-client-side-apply"}
}

func window(t *testing.T, e *state.Entry, key string) *Window {
	t.Helper()
	raw, ok := e.Policy[key]
	if !ok {
		return nil
	}
	var w Window
	if err := json.Unmarshal(raw, &w); err != nil {
		t.Fatal(err)
	}
	return &w
}

func setWindow(e *state.Entry, key string, w Window) {
	b, _ := json.Marshal(w)
	e.Policy = map[string]json.RawMessage{key: b}
}

func held(d Decision) string {
	if d.Hold == nil {
		return ""
	}
	return d.Hold.String()
}

func TestStabilityWindow(t *testing.T) {
	r := enforce()
	e := &state.Entry{}
	step := func(sec int, want int64) Decision {
		return Evaluate(t0.Add(time.Duration(sec)*time.Second), gitops, []Rules{r}, 0, replicaChange(2, want), e)
	}
	if d := step(0, 6); d.Apply || held(d) != "stable 0 s of 180 s" || d.Value != values.CountOf(3) || !d.Due.Equal(t0.Add(180*time.Second)) {
		t.Fatalf("t=0: %+v", d)
	}
	// 6 → 7 is within ±1 of 6 (10% of 6 is 0.6, at least 1): same window.
	if d := step(110, 7); d.Apply || held(d) != "stable 110 s of 180 s" || d.Hold.Kind != plan.HoldStability || d.Hold.Elapsed != 110*time.Second {
		t.Fatalf("t=110: %+v", d)
	}
	// The latest recommendation is applied once the window is old enough.
	if d := step(180, 7); !d.Apply || d.Value != values.CountOf(3) || !d.Force || !strings.Contains(bounds(d.Bounds), "takes the field from kubectl-client-side-apply") {
		t.Fatalf("t=180: %+v", d)
	}
	// A value outside the tolerance reopens the window.
	setWindow(e, "nfr", Window{OpenedAt: t0, Anchor: values.CountOf(6)})
	if d := step(170, 9); d.Apply || held(d) != "stable 0 s of 180 s" || !window(t, e, "nfr").OpenedAt.Equal(t0.Add(170*time.Second)) {
		t.Fatalf("reopen: %+v", d)
	}
}

func TestCooldownThenFreshWindow(t *testing.T) {
	e := &state.Entry{Applied: &state.Applied{Value: values.CountOf(3), At: t0}}
	setWindow(e, "nfr", Window{OpenedAt: t0.Add(-time.Hour), Anchor: values.CountOf(6)})
	d := Evaluate(t0.Add(45*time.Second), gitops, []Rules{enforce()}, 0, replicaChange(3, 6), e)
	if d.Apply || held(d) != "cooldown 45 s of 120 s since the last apply" || window(t, e, "nfr") != nil || !d.Due.Equal(t0.Add(120*time.Second)) {
		t.Fatalf("cooldown: %+v, window %+v", d, window(t, e, "nfr"))
	}
	// After the cooldown a fresh window opens, even though 6 was stable long
	// before the apply.
	d = Evaluate(t0.Add(121*time.Second), gitops, []Rules{enforce()}, 0, replicaChange(3, 6), e)
	if d.Apply || held(d) != "stable 0 s of 180 s" {
		t.Fatalf("after cooldown: %+v", d)
	}
	if d = Evaluate(t0.Add(301*time.Second), gitops, []Rules{enforce()}, 0, replicaChange(3, 6), e); !d.Apply || d.Value != values.CountOf(4) {
		t.Fatalf("after the fresh window: %+v", d)
	}
	// A window opened before the last apply does not count after it, even
	// without a cooldown.
	e = &state.Entry{Applied: &state.Applied{Value: values.CountOf(3), At: t0}}
	setWindow(e, "nfr", Window{OpenedAt: t0.Add(-time.Hour), Anchor: values.CountOf(6)})
	r := enforce()
	pol := nfrPolicy()
	pol.Cooldown = 0
	r.Policy = pol
	if d := Evaluate(t0.Add(time.Second), gitops, []Rules{r}, 0, replicaChange(3, 6), e); d.Apply {
		t.Fatalf("a window used by the last apply was reused: %+v", d)
	}
}

func TestHoldReasons(t *testing.T) {
	stable := func() *state.Entry {
		e := &state.Entry{}
		setWindow(e, "nfr", Window{OpenedAt: t0.Add(-time.Hour), Anchor: values.CountOf(6)})
		return e
	}
	cases := []struct {
		name  string
		r     func(*Rules)
		c     func(*Change)
		held  string
		kind  plan.HoldKind
		apply bool
		notes string
		value int64
	}{
		{"observe", func(r *Rules) { r.Mode = spec.ModeObserve }, nil, "observe mode", plan.HoldMode, false, "", 3},
		{"paused", func(r *Rules) { r.Paused, r.PauseReason = true, "spec.paused" }, nil, "paused (spec.paused)", plan.HoldPaused, false, "", 3},
		{"gitops conflict", nil, func(c *Change) { c.Manager = "argocd-controller" }, "conflict: the field is managed by argocd-controller", plan.HoldConflict, false, "", 3},
		{"gitops taken over", func(r *Rules) { r.TakeOverFrom = []string{"argocd-controller"} }, func(c *Change) { c.Manager = "argocd-controller" }, "", plan.HoldNone, true, "takes the field from argocd-controller", 3},
		{"already ours", nil, func(c *Change) { c.Manager = SetpointManager }, "", plan.HoldNone, true, "", 3},
		{"capped", func(r *Rules) {
			r.Cap, r.CapField = values.CountOf(4), "safety.maxReplicas"
			p := nfrPolicy()
			p.MaxStep = 1
			r.Policy = p
		}, nil, "", plan.HoldNone, true, "capped at 4 by safety.maxReplicas", 4},
		{"new object: no step", nil, func(c *Change) { c.HasCurrent = false }, "", plan.HoldNone, true, "", 6},
		{"no policy: through unbounded", func(r *Rules) { r.Policy = nil }, nil, "", plan.HoldNone, true, "", 6},
	}
	for _, c := range cases {
		r := enforce()
		if c.r != nil {
			c.r(&r)
		}
		ch := replicaChange(2, 6)
		if c.c != nil {
			c.c(&ch)
		}
		d := Evaluate(t0, gitops, []Rules{r}, 0, ch, stable())
		kind := plan.HoldNone
		if d.Hold != nil {
			kind = d.Hold.Kind
		}
		if d.Apply != c.apply || !strings.HasPrefix(held(d), c.held) || kind != c.kind || !strings.Contains(bounds(d.Bounds), c.notes) || d.Value != values.CountOf(c.value) {
			t.Errorf("%s: %+v", c.name, d)
		}
	}
}

// TestContributorsMergePerDirection: with a fast contributor (no
// stability) and a slow one (180 s), an increase passes at once and a
// decrease waits for the slow one; a pause on either holds.
func TestContributorsMergePerDirection(t *testing.T) {
	fast := Rules{Spec: "Toy/shop/a", Mode: spec.ModeEnforce, Policy: Stability{Key: "toy"}}
	slow := enforce()
	up := Evaluate(t0, gitops, []Rules{slow, fast}, 0, replicaChange(2, 3), &state.Entry{})
	if !up.Apply || up.Value != values.CountOf(3) {
		t.Fatalf("an increase must follow the fastest contributor: %+v", up)
	}
	down := Evaluate(t0, gitops, []Rules{slow, fast}, 0, replicaChange(3, 2), &state.Entry{})
	if down.Apply || down.Hold.Kind != plan.HoldStability || !down.Due.Equal(t0.Add(180*time.Second)) {
		t.Fatalf("a decrease must follow the slowest contributor: %+v", down)
	}
	// The fast one bounds nothing, the slow one 30%: an increase takes the
	// larger value (10 → 20: fast says 20, slow says 13).
	slowNoWindow := enforce()
	p := nfrPolicy()
	p.Stability, p.Cooldown = 0, 0
	slowNoWindow.Policy = p
	if d := Evaluate(t0, gitops, []Rules{slowNoWindow, fast}, 0, replicaChange(10, 20), &state.Entry{}); !d.Apply || d.Value != values.CountOf(20) {
		t.Fatalf("increase value: %+v", d)
	}
	// A decrease takes the larger (slower) value: 10 → 2: fast 2, slow 7.
	if d := Evaluate(t0, gitops, []Rules{slowNoWindow, fast}, 0, replicaChange(10, 2), &state.Entry{}); !d.Apply || d.Value != values.CountOf(7) {
		t.Fatalf("decrease value: %+v", d)
	}
	// A contributor without a policy lets an increase through at once.
	if d := Evaluate(t0, gitops, []Rules{slow, {Spec: "Toy/shop/b", Mode: spec.ModeEnforce}}, 0, replicaChange(2, 3), &state.Entry{}); !d.Apply {
		t.Fatalf("a contributor without a policy is the fastest: %+v", d)
	}
	paused := fast
	paused.Paused, paused.PauseReason = true, "spec.paused at toy.yaml:9:3"
	if d := Evaluate(t0, gitops, []Rules{slowNoWindow, paused}, 0, replicaChange(2, 3), &state.Entry{}); d.Apply || d.Hold.Kind != plan.HoldPaused {
		t.Fatalf("a pause on any contributor holds: %+v", d)
	}
	// Caps: the tightest.
	capped := fast
	capped.Cap, capped.CapField = values.CountOf(5), "spec.max"
	if d := Evaluate(t0, gitops, []Rules{slowNoWindow, capped}, 0, replicaChange(2, 9), &state.Entry{}); !d.Apply || d.Value != values.CountOf(5) {
		t.Fatalf("cap of another contributor: %+v", d)
	}
	// Each policy keeps its own state.
	e := &state.Entry{}
	Evaluate(t0, gitops, []Rules{slow, fast}, 0, replicaChange(2, 3), e)
	if window(t, e, "nfr") == nil || window(t, e, "toy") == nil {
		t.Fatalf("each policy's state: %v", e.Policy)
	}
}

// TestGateProperties drives random sequences and checks the safety rules:
// observe and paused never apply, a cooldown is never violated, a
// GitOps-owned field is never taken without takeOverFrom, and an apply
// never happens before the window is stable.
func TestGateProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for run := 0; run < 2000; run++ {
		rules := enforce()
		pol := nfrPolicy()
		rules.Mode = []spec.Mode{spec.ModeObserve, spec.ModeEnforce, spec.ModeEnforce}[r.IntN(3)]
		rules.Paused = r.IntN(5) == 0
		pol.Stability = time.Duration(r.IntN(4)) * 60 * time.Second
		pol.Cooldown = time.Duration(r.IntN(4)) * 60 * time.Second
		rules.Policy = pol
		manager := []string{"kubectl-client-side-apply", "argocd-controller", "helm-controller", SetpointManager}[r.IntN(4)]
		if r.IntN(2) == 0 {
			rules.TakeOverFrom = []string{"helm-controller"}
		}
		e := &state.Entry{}
		cur := int64(1 + r.IntN(20))
		now := t0
		for tick := 0; tick < 100; tick++ {
			now = now.Add(time.Duration(1+r.IntN(30)) * time.Second)
			want := int64(1 + r.IntN(30))
			if w := window(t, e, "nfr"); r.IntN(3) > 0 && w != nil {
				want = w.Anchor.Int() // mostly stable recommendations
			}
			before := window(t, e, "nfr")
			d := Evaluate(now, gitops, []Rules{rules}, 0, Change{Current: values.CountOf(cur), HasCurrent: true, Desired: values.CountOf(want), Manager: manager}, e)
			if !d.Apply || d.Value.Int() == cur {
				// Held, or nothing to change (the engine writes nothing).
				continue
			}
			w := window(t, e, "nfr")
			switch {
			case rules.Mode != spec.ModeEnforce:
				t.Fatalf("applied in %s mode", rules.Mode)
			case rules.Paused:
				t.Fatal("applied while paused")
			case gitOwned(manager, rules):
				t.Fatalf("took a field from %s without takeOverFrom %v", manager, rules.TakeOverFrom)
			case e.Applied != nil && now.Sub(e.Applied.At) < pol.Cooldown:
				t.Fatalf("applied %s after the last apply, cooldown %s", now.Sub(e.Applied.At), pol.Cooldown)
			case pol.Stability > 0 && (w == nil || now.Sub(w.OpenedAt) < pol.Stability):
				t.Fatalf("applied before the window was stable (%+v, before %+v)", w, before)
			}
			if d := d.Value.Int() - cur; max(d, -d) > max(1, int64(0.3*float64(cur))) {
				t.Fatalf("step %d by %d exceeds the bound", cur, d)
			}
			e.Applied = &state.Applied{Value: d.Value, At: now}
			cur = d.Value.Int()
		}
	}
}

// gitOwned: the manager is a GitOps controller the spec did not list.
func gitOwned(manager string, r Rules) bool {
	for _, g := range gitops {
		if g == manager {
			for _, ok := range r.TakeOverFrom {
				if ok == manager {
					return false
				}
			}
			return true
		}
	}
	return false
}

// greedy keeps more state than a policy may.
type greedy struct{}

func (greedy) Name() string { return "greedy" }
func (greedy) Evaluate(in Input, _ json.RawMessage) (Verdict, json.RawMessage) {
	return Verdict{Value: in.Desired}, json.RawMessage(`"` + strings.Repeat("x", MaxPolicyState) + `"`)
}
func (greedy) Coherent([]addrs.Path, func(addrs.Path) (values.Value, bool)) error { return nil }

func TestPolicyStateIsBounded(t *testing.T) {
	e := &state.Entry{Policy: map[string]json.RawMessage{"greedy": json.RawMessage(`"old"`)}}
	// An increase, beside a contributor that would let it through.
	rules := []Rules{{Spec: "X/a/b", Mode: spec.ModeEnforce, Policy: greedy{}}, {Spec: "Y/a/b", Mode: spec.ModeEnforce}}
	d := Evaluate(t0, gitops, rules, 0, replicaChange(2, 3), e)
	if d.Apply || d.Hold.Kind != plan.HoldPolicy || !strings.Contains(d.Hold.String(), "over the bound") {
		t.Fatalf("an oversized policy state must hold: %+v", d)
	}
	if string(e.Policy["greedy"]) != `"old"` {
		t.Fatalf("the last good state must be kept, not %d bytes", len(e.Policy["greedy"]))
	}
}

func bounds(bs []plan.Bound) string {
	var out []string
	for _, b := range bs {
		out = append(out, b.String())
	}
	return strings.Join(out, "; ")
}

// TestAsymmetricGate: with ImmediateUp an increase passes at once, inside
// a cooldown and with no window, bounded by MaxStepUp; a decrease still
// waits out the cooldown and a whole window, and then goes only as far as
// the highest recommendation the window saw.
func TestAsymmetricGate(t *testing.T) {
	r := enforce()
	pol := nfrPolicy()
	pol.ImmediateUp, pol.MaxStepUp = true, 1.0
	r.Policy = pol
	e := &state.Entry{Applied: &state.Applied{Value: values.CountOf(4), At: t0}}
	at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
	// 10 s after an apply, 4 → 9: up at once, bounded to +100% of 4 = 8.
	d := Evaluate(at(10), gitops, []Rules{r}, 0, replicaChange(4, 9), e)
	if !d.Apply || d.Value != values.CountOf(8) || !strings.Contains(bounds(d.Bounds), "+100% of 4") {
		t.Fatalf("increase: %+v", d)
	}
	e.Applied = &state.Applied{Value: values.CountOf(8), At: at(10)}
	// A decrease: held by the cooldown, then by a fresh window.
	if d := Evaluate(at(60), gitops, []Rules{r}, 0, replicaChange(8, 5), e); d.Apply || d.Hold.Kind != plan.HoldCooldown {
		t.Fatalf("decrease in cooldown: %+v", d)
	}
	if d := Evaluate(at(130), gitops, []Rules{r}, 0, replicaChange(8, 5), e); d.Apply || d.Hold.Kind != plan.HoldStability {
		t.Fatalf("decrease, window just open: %+v", d)
	}
	// The recommendation flips to the current value's neighbour and back:
	// 6 is within ±1 of the anchor 5, so the window goes on, and it is
	// the window's highest.
	if d := Evaluate(at(200), gitops, []Rules{r}, 0, replicaChange(8, 6), e); d.Apply || held(d) != "stable 70 s of 180 s" {
		t.Fatalf("flip: %+v", d)
	}
	// After the window: down to its highest, 6 (not the latest, 5).
	d = Evaluate(at(310), gitops, []Rules{r}, 0, replicaChange(8, 5), e)
	if !d.Apply || d.Value != values.CountOf(6) {
		t.Fatalf("decrease after the window: %+v", d)
	}
	// The same decrease without ImmediateUp's counterpart is unchanged,
	// and an increase without ImmediateUp waits like a decrease.
	r.Policy = nfrPolicy()
	e = &state.Entry{}
	if d := Evaluate(at(0), gitops, []Rules{r}, 0, replicaChange(4, 9), e); d.Apply || d.Hold.Kind != plan.HoldStability {
		t.Fatalf("stable increase: %+v", d)
	}
}

// TestWindowSurvivesCurrentValue: a recommendation equal to the current
// value (no change wanted) keeps the window it is within tolerance of; a
// window whose highest is the current value starts over when it ends, so
// an old high does not hold a decrease back for ever.
func TestWindowSurvivesCurrentValue(t *testing.T) {
	r := enforce()
	e := &state.Entry{}
	at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
	Evaluate(at(0), gitops, []Rules{r}, 0, replicaChange(5, 4), e)
	Evaluate(at(60), gitops, []Rules{r}, 0, replicaChange(5, 5), e) // no change wanted
	if w := window(t, e, "nfr"); w == nil || !w.OpenedAt.Equal(t0) || w.High != values.CountOf(5) {
		t.Fatalf("window after a recommendation of the current value: %+v", w)
	}
	// At 180 s the window ends with its highest 5 = current: nothing to
	// do, and a new window opens at the latest (4).
	d := Evaluate(at(180), gitops, []Rules{r}, 0, replicaChange(5, 4), e)
	if d.Value != values.CountOf(5) {
		t.Fatalf("the window's high should hold the value: %+v", d)
	}
	if w := window(t, e, "nfr"); w == nil || !w.OpenedAt.Equal(at(180)) || w.High != values.CountOf(4) {
		t.Fatalf("the window should start over: %+v", w)
	}
	// Stable at 4 for a whole window: down to 4.
	if d := Evaluate(at(360), gitops, []Rules{r}, 0, replicaChange(5, 4), e); !d.Apply || d.Value != values.CountOf(4) {
		t.Fatalf("decrease after a clean window: %+v", d)
	}
}

// TestDecreaseNeverAboveCapOrCurrent: the window's high is kept after the
// cap, and a decrease never turns into an increase.
func TestDecreaseNeverAboveCapOrCurrent(t *testing.T) {
	r := enforce()
	r.Cap, r.CapField = values.CountOf(100), "safety.maxReplicas"
	e := &state.Entry{}
	at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
	Evaluate(at(0), gitops, []Rules{r}, 0, replicaChange(100, 105), e)
	d := Evaluate(at(200), gitops, []Rules{r}, 0, replicaChange(100, 97), e)
	if d.Value.Int() > 100 {
		t.Fatalf("a decrease went to %s, above the cap and the current 100", d.Value)
	}
}

// TestStepPeriod: with a period, the step bounds the change since the
// period began (at its first move), not one apply: under watch the next
// apply follows the last within a second, and without the period 3 → 4 →
// 5 went through in 0.7 s. 30% of 3 is 0.9, at least 1: 3 → 4 in the
// period, then from the new period's 4, 30% is 1.2, at least 1: 4 → 5.
// Down from 10: 30% is 3: 10 → 7, held at 7 for the period, then 7 → 5
// (30% of 7 = 2.1, floor 2).
func TestStepPeriod(t *testing.T) {
	type step struct {
		at        time.Duration
		cur, want int64
		got       int64
		bound     string
		outside   bool // cur was set by someone else since the last step
	}
	run := func(name string, pol Stability, steps []step) {
		t.Helper()
		var prev json.RawMessage
		var applied *state.Applied
		for i, s := range steps {
			if s.outside {
				applied = &state.Applied{Value: values.CountOf(s.cur - 1), At: t0}
			}
			v, next := pol.Evaluate(Input{Now: t0.Add(s.at), Current: values.CountOf(s.cur), HasCurrent: true, Desired: values.CountOf(s.want), Applied: applied}, prev)
			prev = next
			if v.Value.Int() != s.cur {
				applied = &state.Applied{Value: v.Value, At: t0.Add(s.at)}
			}
			bound := ""
			if len(v.Bounds) == 1 {
				bound = v.Bounds[0].String()
			}
			if v.Value.Int() != s.got || bound != s.bound || v.Hold != nil {
				t.Errorf("%s, step %d (%s, %d → %d): %s, %q, hold %v; want %d, %q", name, i, s.at, s.cur, s.want, v.Value, bound, v.Hold, s.got, s.bound)
			}
		}
	}
	up := Stability{Key: "nfr", ImmediateUp: true, MaxStep: 0.3, Period: 15 * time.Second}
	run("up", up, []step{
		// Evaluations without a move open no period: the first move does.
		{0, 3, 3, 3, "", false},
		{10 * time.Second, 3, 10, 4, "bounded to +30% of 3 per 15s, at least 1", false},
		{10*time.Second + 700*time.Millisecond, 4, 10, 4, "bounded to +30% of 3 per 15s, at least 1", false},
		{24 * time.Second, 4, 10, 4, "bounded to +30% of 3 per 15s, at least 1", false},
		{25 * time.Second, 4, 10, 5, "bounded to +30% of 4 per 15s, at least 1", false},
		// Within the new period a move that fits is not bounded: 30% of
		// 4 is 1.2, at least 1, so 5 still fits the period from 4.
		{26 * time.Second, 5, 5, 5, "", false},
	})
	// Without a period each apply is bounded alone: the watch's 3 → 4 → 5.
	run("no period", Stability{Key: "nfr", ImmediateUp: true, MaxStep: 0.3}, []step{
		{0, 3, 10, 4, "bounded to +30% of 3, at least 1", false},
		{700 * time.Millisecond, 4, 10, 5, "bounded to +30% of 4, at least 1", false},
	})
	run("down", Stability{Key: "nfr", MaxStep: 0.3, Period: 15 * time.Second}, []step{
		{0, 10, 2, 7, "bounded to -30% of 10 per 15s, at least 1", false},
		{time.Second, 7, 2, 7, "bounded to -30% of 10 per 15s, at least 1", false},
		{15 * time.Second, 7, 2, 5, "bounded to -30% of 7 per 15s, at least 1", false},
		// A clock that went back keeps the period (from 7): no extra step.
		{14 * time.Second, 5, 2, 5, "bounded to -30% of 7 per 15s, at least 1", false},
	})
	// The defaults' shape: 50% down, 100% and at least 4 up. A decrease
	// 10 → 5, then a rise to 6 a second later goes to 6, not past it to
	// the period's 10 + 4; a rise 3 → 7, then a fall to 5 lands on 5, not
	// below it.
	dflt := Stability{Key: "nfr", ImmediateUp: true, MaxStep: 0.5, MaxStepUp: 1, MinStepUp: 4, Period: 15 * time.Second}
	run("never past the target", dflt, []step{
		{0, 10, 5, 5, "", false},
		{time.Second, 5, 6, 6, "", false},
	})
	run("never below the target", dflt, []step{
		{0, 3, 9, 7, "bounded to +100% of 3 per 15s, at least 4", false},
		{time.Second, 7, 5, 5, "", false},
	})
	// A value someone else set starts a new period from it: 100 → 10 is
	// bounded to 50% of 100, not let through because the period began at
	// 10.
	run("set outside", dflt, []step{
		{0, 20, 10, 10, "", false},
		{time.Second, 100, 10, 50, "bounded to -50% of 100 per 15s, at least 1", true},
	})
}

// TestNoCooldownAfterUp: after an increase, a decrease is not held by the
// cooldown when NoCooldownAfterUp says so (burst memory decides how long
// an increase's pods stay); after a decrease the cooldown holds the next.
func TestNoCooldownAfterUp(t *testing.T) {
	pol := Stability{Key: "nfr", ImmediateUp: true, Cooldown: 2 * time.Minute, MaxStep: 2, NoCooldownAfterUp: true}
	var prev json.RawMessage
	eval := func(at time.Duration, cur, want int64, applied *state.Applied) Verdict {
		v, next := pol.Evaluate(Input{Now: t0.Add(at), Current: values.CountOf(cur), HasCurrent: true, Desired: values.CountOf(want), Applied: applied}, prev)
		prev = next
		return v
	}
	// 3 → 8, applied at 0; a decrease to 4 a minute later goes through.
	if v := eval(0, 3, 8, nil); v.Value.Int() != 8 || v.Hold != nil {
		t.Fatalf("up: %+v", v)
	}
	if v := eval(time.Minute, 8, 4, &state.Applied{Value: values.CountOf(8), At: t0}); v.Value.Int() != 4 || v.Hold != nil {
		t.Fatalf("down after up: %+v", v)
	}
	// 8 → 4 applied at 1m; another decrease at 2m is in its cooldown.
	if v := eval(2*time.Minute, 4, 2, &state.Applied{Value: values.CountOf(4), At: t0.Add(time.Minute)}); v.Hold == nil || v.Hold.Kind != plan.HoldCooldown {
		t.Fatalf("down after down: %+v", v)
	}
	// Without the option, the cooldown holds a decrease after an increase.
	pol.NoCooldownAfterUp, prev = false, nil
	eval(0, 3, 8, nil)
	if v := eval(time.Minute, 8, 4, &state.Applied{Value: values.CountOf(8), At: t0}); v.Hold == nil || v.Hold.Kind != plan.HoldCooldown {
		t.Fatalf("down after up, cooldown kept: %+v", v)
	}
}

// TestNoStabilityNoHigh: with no stability window, a decrease is not held
// at the high of a window a plan made earlier (3 seen, then 2 wanted
// within the tolerance's ±1): it goes to 2.
func TestNoStabilityNoHigh(t *testing.T) {
	pol := Stability{Key: "nfr", Tolerance: 0.05, MaxStep: 1}
	applied := &state.Applied{Value: values.CountOf(3), At: t0}
	_, prev := pol.Evaluate(Input{Now: t0.Add(time.Minute), Current: values.CountOf(3), HasCurrent: true, Desired: values.CountOf(3), Applied: applied}, nil)
	v, _ := pol.Evaluate(Input{Now: t0.Add(2 * time.Minute), Current: values.CountOf(3), HasCurrent: true, Desired: values.CountOf(2), Applied: applied}, prev)
	if v.Value.Int() != 2 || v.Hold != nil {
		t.Fatalf("%+v, want 2 at once", v)
	}
}
