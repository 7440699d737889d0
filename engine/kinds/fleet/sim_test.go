package fleetkind_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/cue/load"
	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	_ "github.com/setpoint-dev/setpoint/engine/kinds/all"
	"github.com/setpoint-dev/setpoint/engine/plan"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/internal/simtest"
)

// run loads dir's specs on the real sim world and reconciles every 5 s
// of virtual time from its start to until, returning every plan.
func run(t *testing.T, dir string, until time.Duration) []*plan.Plan {
	t.Helper()
	e, p := simtest.Engine(t, dir)
	st := state.New()
	var plans []*plan.Plan
	start := p.World.Start()
	for at := start.Add(5 * time.Second); !at.After(start.Add(until)); at = at.Add(5 * time.Second) {
		pl := e.Plan(context.Background(), at, st, nil)
		for _, res := range e.Apply(context.Background(), at, pl, st) {
			if res.Err != "" {
				t.Fatalf("%s: apply: %s", at.Sub(start), res.Err)
			}
		}
		plans = append(plans, pl)
	}
	return plans
}

func writeDir(t *testing.T, files map[string]string) string {
	t.Helper()
	return simtest.WriteDir(t, files)
}

const fleetEnv = `apiVersion: setpoint.dev/v1alpha1
kind: Environment
metadata: {name: fl}
spec:
  providers:
    - name: sim
      config:
        trace: trace.csv
        workloads:
          - {kind: Deployment, name: a, perPodRPS: 100, containers: [{name: c, request: 64Mi, limit: 64Mi, workingSet: 32Mi}]}
        fleets:
          - name: streaming
            cloud: aws
            perNode: {connections: 3000, partitions: 1000}
            perInstance: {connections: 3000, partitions: 1000}
            templates: [streaming-standard]
            joinTime: 2m
            drainTime: 1m
            provisionTime: 5m
            clusters:
              - {name: east-a, region: us-east-1, nodes: 6}
              - {name: east-b, region: us-east-1, nodes: 3}
            arrivals: {perHour: 150, swing: 0.9, period: 1h, peakAt: 0.4, lifetime: 8m}
            initialInstances: 6
`

const fleetSpec = `apiVersion: setpoint.dev/v1alpha1
kind: Fleet
metadata: {name: streaming}
spec:
  cloud: aws
  regions: [us-east-1]
  clusterTemplate: streaming-standard
  capacity:
    - {name: connections, perInstance: 3000, perNode: 3000}
    - {name: partitions, perInstance: 1000, perNode: 1000}
  nodes: {step: 2, floor: 3, ceiling: 13, workloadMinimum: 3}
  remaining:
    connections: sum by (cluster) (fleet_remaining{fleet="streaming", dimension="connections"})
    partitions: sum by (cluster) (fleet_remaining{fleet="streaming", dimension="partitions"})
  instances: sum by (cluster) (fleet_instances{fleet="streaming"})
  clusters: {createWhenAllFull: true, delete: DELETE, emptyFor: 5m}
  enforcement: {nodes: enforce, clusters: enforce}
`

// trace is an hour of one request a second (the fleet has its own
// arrivals; the world needs a trace to run).
func trace() string {
	var b strings.Builder
	b.WriteString("second,rate\n")
	for i := 0; i < 3600; i++ {
		fmt.Fprintf(&b, "%d,1\n", i)
	}
	return b.String()
}

// TestFleetOnTheSimWorld: over an hour whose arrivals peak at 24 min, the
// fleet steps its clusters' nodes in multiples of 3 (step 2 rounded up)
// within the restricted ceiling 12 (13 rounded down), never while a step
// is in progress (nodes take 2m to join, 1m to drain), and adds a cluster
// when both are full; the world refuses nothing setpoint asks.
func TestFleetOnTheSimWorld(t *testing.T) {
	spec := strings.Replace(fleetSpec, "DELETE", "true", 1)
	dir := writeDir(t, map[string]string{"env.yaml": fleetEnv, "fleet.yaml": spec, "trace.csv": trace()})
	creates := 0
	last := map[string]time.Time{}
	for _, p := range run(t, dir, 58*time.Minute) {
		for _, c := range p.Changes {
			switch c.Action {
			case action.Create:
				creates++
			case action.Update:
				n := c.Value.Int()
				if n%3 != 0 || n > 12 || n < 3 {
					t.Fatalf("%s: %s → %s: want a multiple of 3 within [3, 12]", p.At, c.Address, c.To)
				}
				if c.From != "" && abs(n-mustInt(t, c.From)) != 3 {
					t.Fatalf("%s: %s %s → %s: want one step of 3", p.At, c.Address, c.From, c.To)
				}
				if at, ok := last[c.Address.String()]; ok && p.At.Sub(at) < time.Minute {
					t.Fatalf("%s: %s stepped again %s after its last step", p.At, c.Address, p.At.Sub(at))
				}
				last[c.Address.String()] = p.At
			}
		}
		for _, h := range p.Held {
			if h.Held.Kind == plan.HoldRejected {
				t.Fatalf("%s: the world refuses %s: %s", p.At, h.Address, h.Held)
			}
		}
	}
	if creates != 1 {
		t.Errorf("%d clusters created; want one at the peak", creates)
	}
}

// TestFleetDeletesOnlyWhenAsked: three clusters and few instances, each
// placed on the fullest cluster that fits (the smallest first): east-a,
// the biggest, stays empty, and 5 minutes after it was first seen empty
// it is deleted when deletes are enabled, held otherwise; the others
// never are.
func TestFleetDeletesOnlyWhenAsked(t *testing.T) {
	env := strings.Replace(fleetEnv, "              - {name: east-b, region: us-east-1, nodes: 3}",
		"              - {name: east-b, region: us-east-1, nodes: 3}\n              - {name: east-c, region: us-east-1, nodes: 3}", 1)
	env = strings.Replace(env, "arrivals: {perHour: 150, swing: 0.9, period: 1h, peakAt: 0.4, lifetime: 8m}", "arrivals: {perHour: 1, swing: 0, lifetime: 10h}", 1)
	for _, del := range []bool{true, false} {
		spec := strings.Replace(fleetSpec, "DELETE", fmt.Sprint(del), 1)
		dir := writeDir(t, map[string]string{"env.yaml": env, "fleet.yaml": spec, "trace.csv": trace()})
		var deleted, held []string
		for _, p := range run(t, dir, 20*time.Minute) {
			for _, c := range p.Changes {
				if c.Action == action.Delete {
					deleted = append(deleted, fmt.Sprintf("%s at %s", c.Address.Name, p.At.Format("15:04")))
				}
			}
			for _, h := range p.Held {
				if h.Action == action.Delete && h.Held.Kind == plan.HoldPolicy && !slices.Contains(held, h.Address.Name) {
					held = append(held, h.Address.Name)
				}
			}
		}
		switch {
		case del && (len(deleted) != 1 || !strings.HasPrefix(deleted[0], "east-a at 00:05") || len(held) != 0):
			t.Errorf("deletes enabled: deleted %v, held %v; want east-a deleted 5m after it was first seen empty", deleted, held)
		case !del && (len(deleted) != 0 || len(held) != 1 || held[0] != "east-a"):
			t.Errorf("deletes disabled: deleted %v, held %v; want east-a held", deleted, held)
		}
	}
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestFleetLeavesGitOpsClustersAlone: a cluster whose node count a GitOps
// controller manages is not deleted (held as a conflict), even empty.
func TestFleetLeavesGitOpsClustersAlone(t *testing.T) {
	// east-a, the fullest, takes the few instances; east-b and east-c
	// stay empty, with enough room that none needs a step.
	env := strings.Replace(fleetEnv, "              - {name: east-b, region: us-east-1, nodes: 3}",
		"              - {name: east-b, region: us-east-1, nodes: 9}\n              - {name: east-c, region: us-east-1, nodes: 9}", 1)
	env = strings.Replace(env, "arrivals: {perHour: 150, swing: 0.9, period: 1h, peakAt: 0.4, lifetime: 8m}", "arrivals: {perHour: 1, swing: 0, lifetime: 10h}", 1)
	env = strings.Replace(env, "kind: Environment\nmetadata: {name: fl}\nspec:\n", "kind: Environment\nmetadata: {name: fl}\nspec:\n  gitopsManagers: [cluster-api]\n", 1)
	spec := strings.Replace(fleetSpec, "DELETE", "true", 1)
	spec = strings.Replace(spec, "enforcement: {nodes: enforce, clusters: enforce}", "enforcement: {nodes: observe, clusters: enforce}", 1)
	dir := writeDir(t, map[string]string{"env.yaml": env, "fleet.yaml": spec, "trace.csv": trace()})
	conflicts := 0
	for _, p := range run(t, dir, 10*time.Minute) {
		for _, c := range p.Changes {
			if c.Action == action.Delete {
				t.Fatalf("%s: deleted %s, which cluster-api (a GitOps manager here) manages", p.At, c.Address)
			}
		}
		for _, h := range p.Held {
			if h.Action == action.Delete && h.Held.Kind == plan.HoldConflict {
				conflicts++
			}
		}
	}
	if conflicts == 0 {
		t.Fatal("no delete held as a conflict: the test proved nothing")
	}
}

// oneShortCluster is a world of one cluster, east-a, of 3 nodes whose 3
// instances take all of its 9000 connections: short of one instance's
// 3000, with room for a step (3 + 3 ≤ ceiling 13 → 12). Arrivals are
// rare enough not to matter.
func oneShortCluster() string {
	env := strings.Replace(fleetEnv, "              - {name: east-a, region: us-east-1, nodes: 6}\n              - {name: east-b, region: us-east-1, nodes: 3}\n",
		"              - {name: east-a, region: us-east-1, nodes: 3}\n", 1)
	env = strings.Replace(env, "arrivals: {perHour: 150, swing: 0.9, period: 1h, peakAt: 0.4, lifetime: 8m}", "arrivals: {perHour: 0.001, swing: 0, lifetime: 10h}", 1)
	return strings.Replace(env, "initialInstances: 6", "initialInstances: 3", 1)
}

// specsOf loads a directory's specs, to put in force in a running engine.
func specsOf(t *testing.T, files map[string]string) []spec.Document {
	t.Helper()
	l, err := load.New()
	if err != nil {
		t.Fatal(err)
	}
	r := l.LoadDir(writeDir(t, files))
	if len(r.Diags) > 0 {
		t.Fatal(r.Diags)
	}
	return r.Specs()
}

// TestFleetOffRestoresNodes: a node count the fleet raised (3 → 6) goes
// back to the user's 3 when enforcement of nodes turns off, at once, and
// the state forgets it (no "applied 6" left behind).
func TestFleetOffRestoresNodes(t *testing.T) {
	spec := strings.Replace(fleetSpec, "DELETE", "false", 1)
	spec = strings.Replace(spec, "enforcement: {nodes: enforce, clusters: enforce}", "enforcement: {nodes: enforce, clusters: observe}", 1)
	files := map[string]string{"env.yaml": oneShortCluster(), "fleet.yaml": spec, "trace.csv": trace()}
	e, p := simtest.Engine(t, writeDir(t, files))
	st := state.New()
	start := p.World.Start()
	step := func(at time.Time) *plan.Plan {
		pl := e.Plan(context.Background(), at, st, nil)
		for _, res := range e.Apply(context.Background(), at, pl, st) {
			if res.Err != "" {
				t.Fatalf("%s: apply: %s", at.Sub(start), res.Err)
			}
		}
		return pl
	}
	pl := step(start.Add(5 * time.Second))
	if len(pl.Changes) != 1 || pl.Changes[0].From != "3" || pl.Changes[0].To != "6" {
		t.Fatalf("first plan %+v: want east-a 3 → 6", pl.Changes)
	}
	attr := addrs.Attr{Object: pl.Changes[0].Address, Path: pl.Changes[0].Attribute}
	if en, ok := st.Lookup(attr); !ok || en.User == nil || en.User.Int() != 3 || en.Applied == nil || en.Applied.Value.Int() != 6 {
		t.Fatalf("state after the step: %+v; want user 3, applied 6", en)
	}
	// Nodes join in 2m; then nodes turn off.
	for at := start.Add(10 * time.Second); at.Before(start.Add(3 * time.Minute)); at = at.Add(5 * time.Second) {
		step(at)
	}
	files["fleet.yaml"] = strings.Replace(spec, "nodes: enforce,", "nodes: off,", 1)
	e.Specs = specsOf(t, files)
	pl = step(start.Add(3 * time.Minute))
	if len(pl.Changes) != 1 || !pl.Changes[0].Restore || pl.Changes[0].From != "6" || pl.Changes[0].To != "3" {
		t.Fatalf("with nodes off: changes %+v, held %+v; want east-a restored 6 → 3", pl.Changes, pl.Held)
	}
	if en, ok := st.Lookup(attr); ok {
		t.Fatalf("state after the restore: %+v; want the node count forgotten", en)
	}
	// Off asks nothing more of nodes, restore done. east-a, short at 3
	// with no node coming, is full, not scaling up: its region asks for a
	// new cluster (held here, clusters being observed).
	for at := start.Add(3*time.Minute + 5*time.Second); at.Before(start.Add(6 * time.Minute)); at = at.Add(5 * time.Second) {
		pl := step(at)
		creates := 0
		for _, c := range append(append([]plan.Change(nil), pl.Changes...), pl.Held...) {
			if c.Dimension != "clusters" || c.Action != action.Create || !strings.Contains(c.Reason, "east-a: full") || !strings.Contains(c.Reason, "node scaling is off") {
				t.Fatalf("%s: with nodes off: %+v; want only the region's create, east-a full", at.Sub(start), c)
			}
			creates++
		}
		if creates != 1 || len(pl.Changes) != 0 {
			t.Fatalf("%s: with nodes off: changes %+v, held %+v; want one create, held in observe", at.Sub(start), pl.Changes, pl.Held)
		}
	}
}

// TestFleetWaitsForItsReporter: east-a is short, but while its reporter
// query says 0, or has no series for it, it waits: no step, no create
// (it is not full); once the reporter says 1, it steps up.
func TestFleetWaitsForItsReporter(t *testing.T) {
	base := strings.Replace(fleetSpec, "DELETE", "false", 1)
	for _, c := range []struct {
		name, reporter string
		waits          bool
	}{
		{"reporter says 0", `sum by (cluster) (fleet_nodes_ready{fleet="streaming"}) >= bool 100`, true},
		{"no series for the cluster", `sum by (cluster) (fleet_nodes_ready{fleet="streaming", cluster="elsewhere"})`, true},
		{"reporter says 1", `sum by (cluster) (fleet_nodes_ready{fleet="streaming"}) >= bool 1`, false},
	} {
		spec := strings.Replace(base, "  clusters:", "  reporter: '"+c.reporter+"'\n  clusters:", 1)
		dir := writeDir(t, map[string]string{"env.yaml": oneShortCluster(), "fleet.yaml": spec, "trace.csv": trace()})
		changes, waiting := 0, false
		for _, p := range run(t, dir, time.Minute) {
			changes += len(p.Changes)
			for _, n := range p.Notes {
				if strings.Contains(n.Message, "east-a waiting_for_reporter") {
					waiting = true
				}
			}
		}
		if c.waits && (changes != 0 || !waiting) {
			t.Errorf("%s: %d changes, waiting noted %v; want none while it waits", c.name, changes, waiting)
		}
		if !c.waits && (changes == 0 || waiting) {
			t.Errorf("%s: %d changes, waiting noted %v; want a step up", c.name, changes, waiting)
		}
	}
}

// TestFleetCreatesCapped: clusters full at 3 nodes (ceiling 3), and
// arrivals that fill each new one as soon as it is provisioned (5m): a
// create is wanted every few minutes, and clusters.maxCreatesPerHour
// allows that many in the hour per region (1 by default), saying until
// when the next one waits.
func TestFleetCreatesCapped(t *testing.T) {
	env := strings.Replace(oneShortCluster(), "arrivals: {perHour: 0.001, swing: 0, lifetime: 10h}", "arrivals: {perHour: 600, swing: 0, lifetime: 10h}", 1)
	base := strings.Replace(fleetSpec, "DELETE", "false", 1)
	base = strings.Replace(base, "nodes: {step: 2, floor: 3, ceiling: 13, workloadMinimum: 3}", "nodes: {step: 3, floor: 3, ceiling: 3, workloadMinimum: 3}", 1)
	for _, c := range []struct {
		cap  string
		want int
	}{{"", 1}, {", maxCreatesPerHour: 3", 3}} {
		spec := strings.Replace(base, "emptyFor: 5m}", "emptyFor: 5m"+c.cap+"}", 1)
		dir := writeDir(t, map[string]string{"env.yaml": env, "fleet.yaml": spec, "trace.csv": trace()})
		creates, capped := 0, false
		for _, p := range run(t, dir, 40*time.Minute) {
			for _, ch := range p.Changes {
				if ch.Action == action.Create {
					creates++
				}
			}
			for _, n := range p.Notes {
				if strings.Contains(n.Message, "aws/us-east-1: no new cluster until") {
					capped = true
				}
			}
		}
		if creates != c.want || !capped {
			t.Errorf("cap %q: %d creates in 40 minutes, capped noted %v; want %d, then capped", c.cap, creates, capped, c.want)
		}
	}
}
