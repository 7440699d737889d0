package engine_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/diag"
	"github.com/setpoint-dev/setpoint/engine/gate"
	"github.com/setpoint-dev/setpoint/engine/intent"
	"github.com/setpoint-dev/setpoint/engine/plan"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
)

// A second kind, built only from what any kind brings — a schema, a Go
// type, a decider and a gate policy, registered in one call — plans and
// applies beside an NFR on the same Deployment, with no engine code of its
// own.

const toySchema = `package setpoint

#Kinds: Toy: #Toy

#Toy: {
	apiVersion: #APIVersion
	kind:       "Toy"
	metadata:   #Metadata
	spec: {
		target: {kind: "Deployment", name: #ObjectName}
		// A replicas floor.
		replicas: int & >=0 & <=1000
		mode:     *"enforce" | "observe"
		paused:   *false | bool
	}
}
`

type toy struct {
	spec.Header
	Spec struct {
		Target   spec.Target `json:"target"`
		Replicas int64       `json:"replicas"`
		Mode     spec.Mode   `json:"mode"`
		Paused   bool        `json:"paused"`
	} `json:"spec"`
}

type toyDecider struct{}

func (toyDecider) Reads(doc spec.Document, def string) []addrs.Object {
	t := doc.(*toy)
	return []addrs.Object{{Provider: def, Kind: t.Spec.Target.Kind, Namespace: t.Metadata.Namespace, Name: t.Spec.Target.Name}}
}

func (toyDecider) Decide(_ *engine.Tick, doc spec.Document, reads []addrs.Object, obs engine.Observation, _ *state.State) ([]intent.Intent, []plan.Note, []plan.Note) {
	t := doc.(*toy)
	if !obs.Objects[reads[0]].Exists {
		return nil, []plan.Note{{Severity: diag.Warning, Spec: t.ID(), Message: "no target"}}, nil
	}
	v := values.CountOf(t.Spec.Replicas)
	return []intent.Intent{{Attr: addrs.Attr{Object: reads[0], Path: addrs.MustPath("spec.replicas")}, Kind: intent.LowerBound,
		Value: v, Recommended: v, Dimension: "replicas", Rationale: "the toy's floor", Source: t.ID(), SourcePos: t.Src.PosOf("spec.replicas")}}, nil, nil
}

func (toyDecider) Rules(doc spec.Document, _ []addrs.Object, _ intent.Dimension, _ engine.Observation) gate.Rules {
	t := doc.(*toy)
	return gate.Rules{Mode: t.Spec.Mode, Paused: t.Spec.Paused, PauseReason: "the toy is paused", Policy: toyPolicy{}}
}

// toyPolicy lets everything through at once and counts its evaluations
// (bounded), to show a kind's policy keeps state of its own.
type toyPolicy struct{}

func (toyPolicy) Name() string { return "toy" }

func (toyPolicy) Evaluate(in gate.Input, prev json.RawMessage) (gate.Verdict, json.RawMessage) {
	var n int
	_ = json.Unmarshal(prev, &n)
	b, _ := json.Marshal(min(n+1, 1000))
	return gate.Verdict{Value: in.Desired}, b
}

func (toyPolicy) Coherent([]addrs.Path, func(addrs.Path) (values.Value, bool)) error { return nil }

func init() {
	engine.RegisterKind(engine.Kind{Name: "Toy", Schema: []byte(toySchema), New: func() spec.Document { return &toy{} }, Decider: toyDecider{}})
}

const plainWL = `          - {kind: Deployment, namespace: shop, name: plain, replicas: 1, perPodRPS: 100, cpuPerRequest: 5m, containers: [{name: app, request: 256Mi, limit: 512Mi, workingSet: 100Mi}]}
`

func toyDoc(replicas string) string {
	return `apiVersion: setpoint.dev/v1alpha1
kind: Toy
metadata: {name: floor, namespace: shop}
spec:
  target: {kind: Deployment, name: plain}
  replicas: ` + replicas + "\n"
}

func TestToyKindBesideAnNFR(t *testing.T) {
	// The NFR keeps its default 3-minute stability window and cooldown.
	slowNFR := strings.Replace(nfr("plain", ""), "  safety: {stability: 0s, scaleUp: stable, "+oldSafety+"}\n", "  safety: {scaleUp: stable, "+oldSafety+"}\n", 1)
	e, p := world(t, plainWL, slowNFR, toyDoc("8"))
	if len(e.Specs) != 2 {
		t.Fatalf("both specs load: %d", len(e.Specs))
	}
	ctx := context.Background()
	st := state.New()
	now := at(p, 10*time.Minute)
	dep := addrs.Attr{Object: addrs.Object{Provider: "sim", Kind: "Deployment", Namespace: "shop", Name: "plain"}, Path: addrs.MustPath("spec.replicas")}

	// Planning the Toy alone plans the NFR on the same Deployment too.
	pl := e.Plan(ctx, now, st, []string{"Toy/shop/floor"})
	c := find(pl.Changes, "spec.replicas")
	if c == nil {
		t.Fatalf("want the increase through at once (the toy's policy is the fastest):\n%s", text(pl))
	}
	if c.From != "1" || c.To != "8" || c.Spec != "Toy/shop/floor" || len(c.Contributors) != 2 || !slices.Equal(c.By, []string{"NFR/shop/plain", "Toy/shop/floor"}) {
		t.Fatalf("change: %+v", c)
	}
	if !strings.Contains(text(pl), "from NFR/shop/plain") {
		t.Fatalf("the NFR's contribution is shown:\n%s", text(pl))
	}
	if res := e.Apply(ctx, now, pl, st); len(res) != 1 || res[0].Err != "" {
		t.Fatalf("apply: %+v", res)
	}
	en, ok := st.Lookup(dep)
	if !ok || en.Applied == nil || en.Applied.Value != values.CountOf(8) || !slices.Equal(en.Applied.By, []string{"NFR/shop/plain", "Toy/shop/floor"}) {
		t.Fatalf("state: %+v", en)
	}
	if en.Policy["toy"] == nil || en.Policy["nfr"] == nil {
		t.Fatalf("each kind's policy keeps its own state: %v", en.Policy)
	}
	read := p.Read(ctx, providers.ReadRequest{Now: now, Addresses: []addrs.Object{dep.Object}})
	if o := read.Objects[0]; o.Attributes[dep.Path] != values.CountOf(8) || o.Managers[dep.Path] != "setpoint" {
		t.Fatalf("the world: %+v", o)
	}

	// The toy lowers its floor: a decrease follows the slowest contributor,
	// the NFR, whose cooldown holds it.
	e.Specs[1].(*toy).Spec.Replicas = 2
	pl = e.Plan(ctx, now.Add(30*time.Second), st, []string{"NFR/shop/plain"})
	h := find(pl.Held, "spec.replicas")
	if h == nil || h.Held.Kind != plan.HoldCooldown || pl.Due["NFR/shop/plain"].IsZero() {
		t.Fatalf("the decrease waits for the NFR's cooldown:\n%s", text(pl))
	}
	// A pause on the toy holds the attribute whoever decides it.
	e.Specs[1].(*toy).Spec.Paused = true
	e.Specs[1].(*toy).Spec.Replicas = 20
	pl = e.Plan(ctx, now.Add(40*time.Second), st, nil)
	if h := find(pl.Held, "spec.replicas"); h == nil || h.Held.Kind != plan.HoldPaused {
		t.Fatalf("paused by one contributor:\n%s", text(pl))
	}
}
