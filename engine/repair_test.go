package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/plan"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
)

// recorded is the sim world that keeps the changes it is asked to apply.
type recorded struct {
	altered
	applied *[]providers.ObjectChange
}

func (r recorded) Apply(ctx context.Context, req providers.ApplyRequest) providers.ApplyResponse {
	*r.applied = append(*r.applied, req.Changes...)
	return r.altered.Apply(ctx, req)
}

// cutOff reports the objects of kind as left midway by an apply.
func cutOff(kind string) func([]providers.Object) {
	return func(objs []providers.Object) {
		for i, o := range objs {
			if o.Address.Kind == kind {
				objs[i].Repair = "an apply was cut off"
			}
		}
	}
}

// TestRepairAppliesAgain: an object its provider reports left midway by
// an apply is applied again with nothing changed, even when the diff has
// nothing to do there (inside a cooldown), and the apply's record (and so
// the cooldown) stands; an object with a change planned is finished by
// that change; one setpoint owns nothing on gets a note, not a change.
func TestRepairAppliesAgain(t *testing.T) {
	e, p := world(t, checkout(""), nfr("checkout", ""))
	var applied []providers.ObjectChange
	e.Providers["sim"] = recorded{altered{p, cutOff("HorizontalPodAutoscaler")}, &applied}
	st := state.New()
	ctx := context.Background()
	now := at(p, 10*time.Minute)
	pl := e.Plan(ctx, now, st, nil)
	if c := find(pl.Changes, "spec.minReplicas"); c == nil || c.Repair || len(pl.Changes) != 1 {
		t.Fatalf("with a change to make, the change is the repair:\n%s", text(pl))
	}
	engine.Journal(pl, st, now)
	if res := e.Apply(ctx, now, pl, st); len(res) != 1 || res[0].Err != "" {
		t.Fatalf("apply: %+v", res)
	}
	key := addrs.Attr{Object: pl.Changes[0].Address, Path: pl.Changes[0].Attribute}

	later := now.Add(30 * time.Second)
	pl = e.Plan(ctx, later, st, nil)
	c := find(pl.Changes, "spec.minReplicas")
	if c == nil || !c.Repair || c.From != "3" || c.To != "3" || c.Reason != "repair: an apply was cut off" || find(pl.Held, "spec.minReplicas") == nil {
		t.Fatalf("inside the cooldown, want the step held and a repair at 3:\n%s", text(pl))
	}
	if out := text(pl); !strings.Contains(out, "spec.minReplicas: 3 (applied again, unchanged, to finish an apply that was cut off)   (repair: an apply was cut off)") {
		t.Fatalf("the repair's line:\n%s", out)
	}
	applied = nil
	engine.Journal(pl, st, later)
	if res := e.Apply(ctx, later, pl, st); len(res) != 1 || res[0].Err != "" {
		t.Fatalf("repair apply: %+v", res)
	}
	if len(applied) != 1 || applied[0].Address != key.Object || applied[0].Attributes[key.Path] != values.CountOf(3) {
		t.Fatalf("the provider was handed %+v, want the HPA at minReplicas 3", applied)
	}
	if en, ok := st.Lookup(key); !ok || en.Pending != nil || !en.Applied.At.Equal(now) || en.Applied.Value != values.CountOf(3) {
		t.Fatalf("the repair moved the record of the last apply: %+v", en)
	}

	// Setpoint owns nothing on the Deployment (memory is observed only).
	e.Providers["sim"] = altered{p, cutOff("Deployment")}
	pl = e.Plan(ctx, later, st, nil)
	for _, c := range pl.Changes {
		if c.Address.Kind == "Deployment" {
			t.Fatalf("a repair of an object setpoint owns nothing on:\n%s", text(pl))
		}
	}
	if out := text(pl); !strings.Contains(out, "an apply was cut off; no spec decides a field setpoint owns there, to apply it again with: mend it by hand") {
		t.Fatalf("want a note:\n%s", out)
	}

	// The HPA again, its real change held by the dry run: the repair is
	// still made.
	e.Providers["sim"] = unanswered{altered{p, cutOff("HorizontalPodAutoscaler")}}
	pl = e.Plan(ctx, now.Add(125*time.Second), st, nil)
	if c := find(pl.Changes, "spec.minReplicas"); c == nil || !c.Repair || find(pl.Held, "spec.minReplicas") == nil {
		t.Fatalf("the change held by the dry run, want the repair still:\n%s", text(pl))
	}
	// A spec that no longer enforces holds its repair as any change.
	e.Providers["sim"] = altered{p, cutOff("HorizontalPodAutoscaler")}
	e.Specs[0].(*spec.NFR).Spec.Enforcement.Replicas = spec.ModeObserve
	pl = e.Plan(ctx, later, st, nil)
	if c := find(pl.Changes, "spec.minReplicas"); c != nil {
		t.Fatalf("a repair for a spec in observe mode was planned:\n%s", text(pl))
	}
	var h *plan.Change
	for i := range pl.Held {
		if pl.Held[i].Repair {
			h = &pl.Held[i]
		}
	}
	if h == nil || h.Held.Kind != plan.HoldMode || !strings.Contains(text(pl), "apply again, unchanged: 3 (repair: an apply was cut off): observe mode") {
		t.Fatalf("want the repair held by the mode:\n%s", text(pl))
	}
}

// unanswered answers no dry run (every change is held as rejected).
type unanswered struct{ altered }

func (unanswered) PlanChange(context.Context, providers.PlanChangeRequest) providers.PlanChangeResponse {
	return providers.PlanChangeResponse{}
}
