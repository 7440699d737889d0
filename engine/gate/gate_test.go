package gate

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/intent"
	"github.com/setpoint-dev/setpoint/engine/state"
)

const mi = int64(1 << 20)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestStepTable(t *testing.T) {
	cases := []struct {
		name           string
		u              intent.Unit
		cur, want, got int64
		pct            float64
	}{
		// Replicas: max(1, floor(30% × cur)).
		{"design example 2 → 6", intent.Count, 2, 6, 3, 0.3},
		{"10 → 20 moves 3", intent.Count, 10, 20, 13, 0.3},
		{"10 → 12 within", intent.Count, 10, 12, 12, 0.3},
		{"10 → 2 moves 3 down", intent.Count, 10, 2, 7, 0.3},
		{"0 → 5 moves 1", intent.Count, 0, 5, 1, 0.3},
		{"3 → 1: floor(0.9)=0 → at least 1", intent.Count, 3, 1, 2, 0.3},
		{"100 → 200 at 50%", intent.Count, 100, 200, 150, 0.5},
		// Memory: 25% of current, rounded to 16Mi toward the current.
		{"design example 256Mi → 144Mi", intent.Bytes, 256 * mi, 144 * mi, 192 * mi, 0.25},
		{"192Mi → 144Mi within 25%", intent.Bytes, 192 * mi, 144 * mi, 144 * mi, 0.25},
		{"256Mi → 1Gi: +64Mi", intent.Bytes, 256 * mi, 1024 * mi, 320 * mi, 0.25},
		// 100Mi: +25Mi = 125Mi → down to 112Mi (toward 100Mi).
		{"100Mi up, unaligned", intent.Bytes, 100 * mi, 400 * mi, 112 * mi, 0.25},
		// 100Mi: −25Mi = 75Mi → up to 80Mi (toward 100Mi).
		{"100Mi down, unaligned", intent.Bytes, 100 * mi, 10 * mi, 80 * mi, 0.25},
		// 64Mi: 25% is exactly 16Mi.
		{"64Mi → 128Mi: +16Mi", intent.Bytes, 64 * mi, 128 * mi, 80 * mi, 0.25},
		// Below 64Mi no 16Mi multiple fits: the unrounded bound.
		{"20Mi → 100Mi: +5Mi", intent.Bytes, 20 * mi, 100 * mi, 25 * mi, 0.25},
	}
	for _, c := range cases {
		got, _ := Step(c.u, c.cur, c.want, c.pct)
		if got != c.got {
			t.Errorf("%s: Step(%d, %d) = %d, want %d", c.name, c.cur, c.want, got, c.got)
		}
	}
	if _, note := Step(intent.Count, 2, 6, 0.3); note != "bounded to +30% of 2, at least 1" {
		t.Errorf("note %q", note)
	}
	if _, note := Step(intent.Bytes, 256*mi, 144*mi, 0.25); note != "step bounded to 25% of 256Mi" {
		t.Errorf("note %q", note)
	}
}

// TestStepProperty: the bound always holds, every step makes progress
// toward the wish and never passes it.
func TestStepProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200000; i++ {
		u := intent.Count
		cur, want := r.Int64N(500), r.Int64N(500)
		pct := []float64{0.1, 0.25, 0.3, 0.5, 1}[r.IntN(5)]
		if i%2 == 1 {
			u = intent.Bytes
			cur, want = (1+r.Int64N(8192))*mi/4, (1+r.Int64N(8192))*mi/4
		}
		v, _ := Step(u, cur, want, pct)
		d, w := abs(v-cur), abs(want-cur)
		var bound float64
		if u == intent.Count {
			bound = max(1, float64(int64(pct*float64(cur)+1e-9)))
		} else {
			bound = pct * float64(cur)
		}
		if float64(d) > bound+1e-6 {
			t.Fatalf("%s %d → %d at %g: moved %d, bound %g", u, cur, want, pct, d, bound)
		}
		if d > w || (want > cur) != (v > cur) && v != cur {
			t.Fatalf("%s %d → %d: step to %d overshoots or goes the wrong way", u, cur, want, v)
		}
		if w > 0 && d == 0 {
			t.Fatalf("%s %d → %d: no progress", u, cur, want)
		}
		if u == intent.Bytes && pct >= 0.25 && cur >= 64*mi && cur%(16*mi) == 0 && w >= 16*mi && d < 16*mi {
			t.Fatalf("%d → %d: a 16Mi step exists above 64Mi, moved only %d", cur, want, d)
		}
	}
}

func enforce() Params {
	return Params{Mode: spec.ModeEnforce, Stability: 180 * time.Second, Tolerance: 0.1, Cooldown: 120 * time.Second, MaxStep: 0.3,
		GitOps: []string{"argocd-controller", "kustomize-controller", "helm-controller"}}
}

func replicaChange(cur, want int64) Change {
	return Change{Unit: intent.Count, Current: cur, HasCurrent: true, Desired: want, Manager: "kubectl-client-side-apply"}
}

func TestStabilityWindow(t *testing.T) {
	p := enforce()
	e := &state.Entry{}
	step := func(sec int, want int64) Decision {
		d := Evaluate(t0.Add(time.Duration(sec)*time.Second), p, replicaChange(2, want), e)
		e.Window = d.Window
		return d
	}
	if d := step(0, 6); d.Apply || d.Held != "stable 0 s of 180 s" || d.Value != 3 {
		t.Fatalf("t=0: %+v", d)
	}
	// 6 → 7 is within ±1 of 6 (10% of 6 is 0.6, at least 1): same window.
	if d := step(110, 7); d.Apply || d.Held != "stable 110 s of 180 s" {
		t.Fatalf("t=110: %+v", d)
	}
	// The latest recommendation is applied once the window is old enough.
	if d := step(180, 7); !d.Apply || d.Value != 3 || !strings.Contains(strings.Join(d.Notes, ";"), "takes the field from kubectl-client-side-apply") {
		t.Fatalf("t=180: %+v", d)
	}
	// A value outside the tolerance reopens the window.
	e.Window = &state.Window{OpenedAt: t0, Anchor: 6}
	if d := step(170, 9); d.Apply || d.Held != "stable 0 s of 180 s" || !d.Window.OpenedAt.Equal(t0.Add(170*time.Second)) {
		t.Fatalf("reopen: %+v", d)
	}
	// Memory tolerance is 10% of the anchor, no unit floor.
	if Within(intent.Bytes, 100*mi, 111*mi, 0.1) || !Within(intent.Bytes, 100*mi, 110*mi, 0.1) {
		t.Fatal("memory tolerance")
	}
}

func TestCooldownThenFreshWindow(t *testing.T) {
	p := enforce()
	e := &state.Entry{Applied: &state.Applied{Value: 3, At: t0}, Window: &state.Window{OpenedAt: t0.Add(-time.Hour), Anchor: 6}}
	d := Evaluate(t0.Add(45*time.Second), p, replicaChange(3, 6), e)
	if d.Apply || d.Held != "cooldown 45 s of 120 s since the last apply" || d.Window != nil {
		t.Fatalf("cooldown: %+v", d)
	}
	e.Window = d.Window
	// After the cooldown a fresh window opens, even though 6 was stable long
	// before the apply.
	d = Evaluate(t0.Add(121*time.Second), p, replicaChange(3, 6), e)
	if d.Apply || d.Held != "stable 0 s of 180 s" {
		t.Fatalf("after cooldown: %+v", d)
	}
	e.Window = d.Window
	if d = Evaluate(t0.Add(301*time.Second), p, replicaChange(3, 6), e); !d.Apply || d.Value != 4 {
		t.Fatalf("after the fresh window: %+v", d)
	}
}

func TestHoldReasons(t *testing.T) {
	stable := &state.Entry{Window: &state.Window{OpenedAt: t0.Add(-time.Hour), Anchor: 6}}
	cases := []struct {
		name  string
		p     func(*Params)
		c     func(*Change)
		held  string
		apply bool
		notes string
		value int64
	}{
		{"observe", func(p *Params) { p.Mode = spec.ModeObserve }, nil, "observe mode", false, "", 3},
		{"paused", func(p *Params) { p.Paused, p.PauseReason = true, "spec.paused" }, nil, "paused (spec.paused)", false, "", 3},
		{"gitops conflict", nil, func(c *Change) { c.Manager = "argocd-controller" }, "conflict: the field is managed by argocd-controller", false, "", 3},
		{"gitops taken over", func(p *Params) { p.TakeOverFrom = []string{"argocd-controller"} }, func(c *Change) { c.Manager = "argocd-controller" }, "", true, "takes the field from argocd-controller", 3},
		{"already ours", nil, func(c *Change) { c.Manager = SetpointManager }, "", true, "", 3},
		{"capped", func(p *Params) { p.Cap, p.CapField = 4, "safety.maxReplicas"; p.MaxStep = 1 }, nil, "", true, "capped at 4 by safety.maxReplicas", 4},
		{"new object: no step", nil, func(c *Change) { c.HasCurrent = false }, "", true, "", 6},
	}
	for _, c := range cases {
		p := enforce()
		if c.p != nil {
			c.p(&p)
		}
		ch := replicaChange(2, 6)
		if c.c != nil {
			c.c(&ch)
		}
		d := Evaluate(t0, p, ch, stable)
		if d.Apply != c.apply || !strings.HasPrefix(d.Held, c.held) || !strings.Contains(strings.Join(d.Notes, "; "), c.notes) || d.Value != c.value {
			t.Errorf("%s: %+v", c.name, d)
		}
	}
}

// TestGateProperties drives random sequences and checks the safety rules:
// observe and paused never apply, a cooldown is never violated, a
// GitOps-owned field is never taken without takeOverFrom, and an apply
// never happens before the window is stable.
func TestGateProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for run := 0; run < 2000; run++ {
		p := enforce()
		p.Mode = []spec.Mode{spec.ModeObserve, spec.ModeEnforce, spec.ModeEnforce}[r.IntN(3)]
		p.Paused = r.IntN(5) == 0
		p.Stability = time.Duration(r.IntN(4)) * 60 * time.Second
		p.Cooldown = time.Duration(r.IntN(4)) * 60 * time.Second
		manager := []string{"kubectl-client-side-apply", "argocd-controller", "helm-controller", SetpointManager}[r.IntN(4)]
		if r.IntN(2) == 0 {
			p.TakeOverFrom = []string{"helm-controller"}
		}
		e := &state.Entry{}
		cur := int64(1 + r.IntN(20))
		now := t0
		for tick := 0; tick < 100; tick++ {
			now = now.Add(time.Duration(1+r.IntN(30)) * time.Second)
			want := int64(1 + r.IntN(30))
			if r.IntN(3) > 0 && e.Window != nil {
				want = e.Window.Anchor // mostly stable recommendations
			}
			d := Evaluate(now, p, Change{Unit: intent.Count, Current: cur, HasCurrent: true, Desired: want, Manager: manager}, e)
			e.Window = d.Window
			if !d.Apply {
				continue
			}
			switch {
			case p.Mode != spec.ModeEnforce:
				t.Fatalf("applied in %s mode", p.Mode)
			case p.Paused:
				t.Fatal("applied while paused")
			case gitOwned(manager, p):
				t.Fatalf("took a field from %s without takeOverFrom %v", manager, p.TakeOverFrom)
			case e.Applied != nil && now.Sub(e.Applied.At) < p.Cooldown:
				t.Fatalf("applied %s after the last apply, cooldown %s", now.Sub(e.Applied.At), p.Cooldown)
			case d.Window == nil || now.Sub(d.Window.OpenedAt) < p.Stability:
				t.Fatalf("applied before the window was stable")
			}
			if abs(d.Value-cur) > max(1, int64(0.3*float64(cur))) {
				t.Fatalf("step %d → %d exceeds the bound", cur, d.Value)
			}
			e.Applied = &state.Applied{Value: d.Value, At: now}
			cur = d.Value
		}
	}
}

// gitOwned: the manager is a GitOps controller the spec did not list.
func gitOwned(manager string, p Params) bool {
	for _, g := range p.GitOps {
		if g == manager {
			for _, ok := range p.TakeOverFrom {
				if ok == manager {
					return false
				}
			}
			return true
		}
	}
	return false
}
