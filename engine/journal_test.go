package engine_test

import (
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/plan"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/engine/values"
)

// TestJournaled: after a save that failed in part, only the changes whose
// journal mark the backend holds may be applied.
func TestJournaled(t *testing.T) {
	o := addrs.Object{Provider: "sim", Kind: "Deployment", Namespace: "shop", Name: "a"}
	gone := addrs.Object{Provider: "sim", Kind: "Cluster", Namespace: "f", Name: "x"}
	replicas := addrs.Attr{Object: o, Path: addrs.MustPath("spec.replicas")}
	mem := addrs.Attr{Object: o, Path: addrs.MustPath("spec.memory")}
	p := &plan.Plan{Changes: []plan.Change{
		{Address: o, Attribute: replicas.Path, Action: action.Update, Value: values.CountOf(3)},
		{Address: o, Attribute: mem.Path, Action: action.Update, Release: true, Value: values.BytesOf(1 << 30)},
		{Address: gone, Action: action.Delete},
	}}
	now := time.Unix(0, 0)
	st := state.New()
	st.Entry(addrs.Attr{Object: gone, Path: addrs.MustPath("spec.nodes")}).Applied = &state.Applied{Value: values.CountOf(3)}
	engine.Journal(p, st, now)
	if got := engine.Journaled(p, st); got[0] != true || got[1] != true || got[2] != true {
		t.Fatalf("every mark held: %v", got)
	}
	// The backend holds an older state: no mark for replicas, the release
	// marked as something else, the delete's attribute unmarked.
	durable := state.New()
	durable.Entry(mem).Pending = &state.Pending{Action: state.IntentApply, Value: values.BytesOf(1 << 30)}
	durable.Entry(addrs.Attr{Object: gone, Path: addrs.MustPath("spec.nodes")}).Applied = &state.Applied{Value: values.CountOf(3)}
	if got := engine.Journaled(p, durable); got[0] || got[1] || got[2] {
		t.Fatalf("no durable mark: %v, want none applied", got)
	}
	// A mark of another value is not this change's.
	durable.Entry(replicas).Pending = &state.Pending{Action: state.IntentApply, Value: values.CountOf(4)}
	if got := engine.Journaled(p, durable); got[0] {
		t.Fatal("a mark of 4 does not journal a change to 3")
	}
}
