package fleetkind_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine/action"
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
