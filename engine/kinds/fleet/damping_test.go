package fleetkind_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/cue/load"
	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/action"
	fleetkind "github.com/setpoint-dev/setpoint/engine/kinds/fleet"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/internal/simtest"
)

// demoEnv is the shipped demo's fleet (specs/setpoint.yaml: seed 1, the
// same clusters, arrivals and delays) without its other workloads, which
// draw from generators of their own: the fleet steps as it does in
// `setpoint sim specs/`.
const demoEnv = `apiVersion: setpoint.dev/v1alpha1
kind: Environment
metadata: {name: demo}
spec:
  providers:
    - name: sim
      config:
        trace: trace.csv
        seed: 1
        workloads:
          - {kind: Deployment, name: a, perPodRPS: 100, containers: [{name: c, request: 64Mi, limit: 64Mi, workingSet: 32Mi}]}
        fleets:
          - name: streaming
            namespace: streaming
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

// demoFleetID is the demo Fleet's spec id.
const demoFleetID = "Fleet/streaming/streaming"

// fleetRun is what a run did to each cluster: when each node step was
// applied, into the run, and how long the Fleet saw the cluster short
// (some dimension below one instance's need: compute_node_scaling_up or
// full), in all and in its longest stretch; and the scale-down reasons,
// the notes of scale-downs held, and the requeues they asked for.
type fleetRun struct {
	steps          map[string][]time.Duration
	short, longest map[string]time.Duration
	// refused counts the instances no cluster had room for.
	refused          float64
	creates, deletes int
	downs, held      []string
	// requeued: every tick that held a scale-down asked to be planned
	// again no later than when the first such would go.
	requeued bool
}

// mostInAnHour is the most steps in any hour of at (sorted).
func mostInAnHour(at []time.Duration) int {
	most := 0
	for i := range at {
		j := i
		for j < len(at) && at[j]-at[i] < time.Hour {
			j++
		}
		most = max(most, j-i)
	}
	return most
}

// runFleet reconciles the files every 5 s of virtual time for until.
func runFleet(t *testing.T, files map[string]string, until time.Duration) fleetRun {
	t.Helper()
	e, p := simtest.Engine(t, simtest.WriteDir(t, files))
	st := state.New()
	start := p.World.Start()
	r := fleetRun{steps: map[string][]time.Duration{}, short: map[string]time.Duration{}, longest: map[string]time.Duration{}, requeued: true}
	stretch := map[string]time.Duration{}
	for at := start.Add(5 * time.Second); !at.After(start.Add(until)); at = at.Add(5 * time.Second) {
		pl := e.Plan(context.Background(), at, st, nil)
		heldNow := false
		for _, n := range pl.Notes {
			if n.Spec != demoFleetID {
				continue
			}
			if strings.Contains(n.Message, ": held, scale down") {
				r.held = append(r.held, n.Message)
				heldNow = true
			}
			statuses, ok := fleetkind.StatusesNoted(n)
			if !ok {
				continue
			}
			for name, status := range statuses {
				if fleetkind.Short(status) {
					r.short[name] += 5 * time.Second
					stretch[name] += 5 * time.Second
					r.longest[name] = max(r.longest[name], stretch[name])
				} else {
					stretch[name] = 0
				}
			}
		}
		if due, ok := pl.Due[demoFleetID]; heldNow && (!ok || due.After(at.Add(5*time.Minute))) {
			r.requeued = false
		}
		for _, res := range e.Apply(context.Background(), at, pl, st) {
			if res.Err != "" {
				t.Fatalf("%s: apply: %s", at.Sub(start), res.Err)
			}
			switch c := res.Change; {
			case c.Action == action.Create:
				r.creates++
			case c.Action == action.Delete:
				r.deletes++
			case c.Address.Kind == "Cluster":
				r.steps[c.Address.Name] = append(r.steps[c.Address.Name], at.Sub(start))
				if strings.Contains(c.Reason, "scale down") {
					r.downs = append(r.downs, c.Reason)
				}
			}
		}
	}
	res, err := e.Signals.Query(context.Background(), "sum(fleet_instances_refused_total)", start.Add(until))
	if err != nil || len(res.Samples) != 1 {
		t.Fatalf("refused instances: %v, %v", res, err)
	}
	r.refused = res.Samples[0].Value
	return r
}

// TestFleetDampsChurn: the demo's fleet, whose instances come and go (8
// minutes each, on average) around a peak at 24 minutes. Under the
// reference rule (spareFor: 0s), a step of nodes freed for a moment is
// removed and added again: some cluster takes more than 6 node steps in
// the hour. With the shipped spec (spareFor, default 5m), none takes more
// than 6; none is short (as its Fleet saw it) for longer in all than
// under the reference rule, and no more instances are refused. Every
// scale-down says its spare step lasted 5m; the ones waiting are said,
// and planned again when they would go.
func TestFleetDampsChurn(t *testing.T) {
	shipped, err := os.ReadFile("../../../specs/streaming.fleet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(shipped), "spareFor") {
		t.Fatal("the demo spec sets spareFor: the test is of the default")
	}
	reference := strings.Replace(string(shipped), "workloadMinimum: 6}", "workloadMinimum: 6, spareFor: 0s}", 1)
	if reference == string(shipped) {
		t.Fatal("the demo spec's nodes changed: put spareFor: 0s in them another way")
	}
	const until = 58*time.Minute + 20*time.Second // the demo's trace, from its start
	runs := map[string]fleetRun{}
	for name, fleet := range map[string]string{"reference": reference, "damped": string(shipped)} {
		r := runFleet(t, map[string]string{"env.yaml": demoEnv, "fleet.yaml": fleet, "trace.csv": trace()}, until)
		runs[name] = r
		for _, c := range clustersOf(r) {
			t.Logf("%-9s %-22s %2d steps (at most %2d in an hour), short %-7s (longest %s)", name, c, len(r.steps[c]), mostInAnHour(r.steps[c]), r.short[c], r.longest[c])
		}
		t.Logf("%-9s %d clusters created, %d deleted, %.0f instances refused", name, r.creates, r.deletes, r.refused)
	}
	ref, damped := runs["reference"], runs["damped"]
	flaps := false
	for _, c := range clustersOf(ref) {
		flaps = flaps || mostInAnHour(ref.steps[c]) > 6
	}
	if !flaps {
		t.Fatal("no cluster takes more than 6 steps in an hour under the reference rule: the test proves nothing")
	}
	for _, c := range clustersOf(damped) {
		if n := mostInAnHour(damped.steps[c]); n > 6 {
			t.Errorf("%s: %d node steps in an hour (%v); want at most 6", c, n, damped.steps[c])
		}
		if was, ok := ref.short[c]; ok && damped.short[c] > was {
			t.Errorf("%s: short for %s; %s under the reference rule", c, damped.short[c], was)
		}
	}
	if damped.refused > ref.refused {
		t.Errorf("%.0f instances refused; %.0f under the reference rule", damped.refused, ref.refused)
	}
	if len(damped.downs) == 0 || len(damped.held) == 0 {
		t.Fatalf("%d scale-downs, %d held: want both", len(damped.downs), len(damped.held))
	}
	for _, why := range damped.downs {
		if !strings.Contains(why, "nodes' worth for 5m of 5m: ") {
			t.Errorf("scale-down %q: want the spare step's 5m of 5m", why)
		}
	}
	if !damped.requeued {
		t.Error("a tick holding a scale-down did not ask to be planned again by the time it would go")
	}
}

func clustersOf(r fleetRun) []string {
	var names []string
	for n := range r.steps {
		names = append(names, n)
	}
	for n := range r.short {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// TestSpareForValidated: spareFor defaults to 5m, and is refused at its
// field beyond 1h (0s, at once, and 1h are allowed).
func TestSpareForValidated(t *testing.T) {
	base := strings.Replace(fleetSpec, "DELETE", "false", 1)
	for _, c := range []struct {
		set, want string // want: the error at spec.nodes.spareFor, "" for none
		is        time.Duration
	}{
		{"", "", 5 * time.Minute},
		{", spareFor: 0s", "", 0},
		{", spareFor: 1h", "", time.Hour},
		{", spareFor: 61m", "spareFor 1h1m: a scale-down would wait that long for a spare step to last (expected between 0s and 1h: under churn", 0},
	} {
		l, err := load.New()
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Replace(base, "workloadMinimum: 3}", "workloadMinimum: 3"+c.set+"}", 1)
		r := l.LoadDir(writeDir(t, map[string]string{"env.yaml": fleetEnv, "fleet.yaml": f, "trace.csv": trace()}))
		var got []string
		for _, d := range r.Diags {
			got = append(got, d.Path+": "+d.Error())
		}
		switch {
		case c.want == "" && len(r.Diags) > 0:
			t.Errorf("%q: %v", c.set, got)
		case c.want != "" && (len(r.Diags) != 1 || r.Diags[0].Path != "spec.nodes.spareFor" || !strings.Contains(r.Diags[0].Error(), c.want)):
			t.Errorf("%q: %v; want only %q at spec.nodes.spareFor", c.set, got, c.want)
		case c.want == "":
			for _, d := range r.Specs() {
				if f, ok := d.(*spec.Fleet); ok && f.Spec.Nodes.SpareFor.D() != c.is {
					t.Errorf("%q: spareFor %s, want %s", c.set, f.Spec.Nodes.SpareFor, c.is)
				}
			}
		}
	}
}
