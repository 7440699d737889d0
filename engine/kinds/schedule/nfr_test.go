package schedulekind_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/plan"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/internal/simtest"
	"github.com/setpoint-dev/setpoint/providers/workload"
)

// simWorld is the real sim world over a constant 300 req/s trace, one
// Deployment without an autoscaler at replicas, an NFR on it (with its
// safety lines) and a Schedule on it (its idle lines), planned at the
// sim's start.
func simWorld(t *testing.T, replicas int, nfrExtra, idle string) (*engine.Engine, time.Time) {
	t.Helper()
	var trace strings.Builder
	trace.WriteString("second,rate\n")
	for i := 0; i < 1200; i++ {
		fmt.Fprintf(&trace, "%d,300\n", i)
	}
	files := map[string]string{
		"trace.csv": trace.String(),
		"env.yaml": fmt.Sprintf(`apiVersion: setpoint.dev/v1alpha1
kind: Environment
metadata: {name: t}
spec:
  providers:
    - name: sim
      config:
        trace: trace.csv
        start: 10m
        workloads:
          - {kind: Deployment, namespace: shop, name: api, replicas: %d, perPodRPS: 100, startup: 5s,
             containers: [{name: app, request: 128Mi, limit: 256Mi, workingSet: 64Mi}]}
`, replicas),
		"nfr.yaml": `apiVersion: setpoint.dev/v1alpha1
kind: NFR
metadata: {name: api, namespace: shop}
spec:
  target: {kind: Deployment, name: api}
  throughput: {minRPS: 300` + nfrExtra + `}
  enforcement: {replicas: enforce}
`,
		"schedule.yaml": `apiVersion: setpoint.dev/v1alpha1
kind: Schedule
metadata: {name: api, namespace: shop}
spec:
  target: {kind: Deployment, name: api}
  replicas: {min: 0, atStart: 1, max: 20}
  idle: ` + idle + `
  enforcement: {replicas: enforce}
`,
	}
	e, p := simtest.Engine(t, simtest.WriteDir(t, files))
	start := p.World.Start().Add(10 * time.Minute)
	return e, start
}

var apiAddr = addrs.Object{Provider: "sim", Kind: workload.Deployment, Namespace: "shop", Name: "api"}

func replicasChange(t *testing.T, p *plan.Plan) *plan.Change {
	t.Helper()
	c := change(p, apiAddr, workload.Replicas)
	if c == nil {
		t.Fatalf("no change of replicas; notes %+v errors %+v", p.Notes, p.Errors)
	}
	return c
}

func contributor(c *plan.Change, kind string) *plan.Contributor {
	for i := range c.Contributors {
		if strings.HasPrefix(c.Contributors[i].Spec, kind+"/") {
			return &c.Contributors[i]
		}
	}
	return nil
}

// TestBesideAnNFR: each combination of a Schedule and an NFR on one
// workload. Awake, the NFR's lower bound holds the Schedule's count up;
// idle, the Schedule's 0 wins and is not slowed by the NFR's stability
// window; with throughput.keepWarm, the NFR's bound stays; a wake-up
// passes at once although the NFR's scale-up waits for its window.
func TestBesideAnNFR(t *testing.T) {
	t.Run("awake: the NFR's bound", func(t *testing.T) {
		// The Schedule's trigger wants 1 replica (a total of 2 at 2 a pod).
		e, now := simWorld(t, 1, "", `{after: 5m, grace: 0s, activity: "vector(1)"}
  triggers: [{name: q, query: "vector(2)", target: 2}]`)
		c := replicasChange(t, e.Plan(context.Background(), now, state.New(), nil))
		nfr, sch := contributor(c, "NFR"), contributor(c, "Schedule")
		if nfr == nil || sch == nil || sch.Value != "1" || !strings.Contains(c.Reason, "raised to "+nfr.Value+" by NFR/shop/api") {
			t.Fatalf("%+v: want both, the NFR's bound deciding over the Schedule's 1", c)
		}
		if c.Wanted != nfr.Value || c.Wanted == "1" || c.Held != nil {
			t.Errorf("wanted %s, NFR %s: want the NFR's bound above atStart, applied", c.Wanted, nfr.Value)
		}
	})
	t.Run("idle: the Schedule's 0 wins at once", func(t *testing.T) {
		e, now := simWorld(t, 4, "", `{after: 5m, grace: 0s, activity: "vector(0)"}`)
		c := replicasChange(t, e.Plan(context.Background(), now, state.New(), nil))
		if c.To != "0" || c.Held != nil {
			t.Fatalf("%s → %s held %v (%s): want → 0 applied", c.From, c.To, c.Held, c.Reason)
		}
		if n := contributor(c, "NFR"); n == nil || !strings.Contains(n.Rationale, "yields") {
			t.Errorf("contributors %+v: want the NFR shown yielding", c.Contributors)
		}
	})
	t.Run("idle, keepWarm: the NFR's bound stays", func(t *testing.T) {
		e, now := simWorld(t, 1, ", keepWarm: true", `{after: 5m, grace: 0s, activity: "vector(0)"}`)
		p := e.Plan(context.Background(), now, state.New(), nil)
		c := replicasChange(t, p)
		if c.Wanted == "0" || c.To == "1" || contributor(c, "NFR") == nil && c.Spec != "NFR/shop/api" {
			t.Fatalf("%s → %s (wanted %s, by %s): want the NFR's bound above 1", c.From, c.To, c.Wanted, c.Spec)
		}
		warm := false
		for _, n := range p.Notes {
			warm = warm || strings.Contains(n.Message, "kept warm by NFR/shop/api")
		}
		if !warm && !strings.Contains(c.Reason, "kept warm by NFR/shop/api") {
			t.Errorf("nothing says it is kept warm: %+v %s", p.Notes, c.Reason)
		}
	})
	t.Run("asleep at 0: the NFR does not wake it", func(t *testing.T) {
		// Its signals say it needs pods even at 0 (as a Prometheus
		// server's would, from what is in front of it).
		e, now := simWorld(t, 4, "}\n  signals: {rps: \"vector(300)\", cpu: \"vector(3000)\"", `{after: 5m, grace: 0s, activity: "vector(0)"}`)
		st := state.New()
		for i := 0; i < 3; i++ {
			at := now.Add(time.Duration(i) * 10 * time.Second)
			p := e.Plan(context.Background(), at, st, nil)
			e.Apply(context.Background(), at, p, st)
			if c := change(p, apiAddr, workload.Replicas); i > 0 && c != nil && c.Held == nil {
				t.Fatalf("tick %d: %s → %s (%s): want it left asleep", i, c.From, c.To, c.Reason)
			}
		}
	})
	t.Run("wake-up: not delayed by the NFR's window", func(t *testing.T) {
		// The NFR's own increase waits for its stability window.
		e, now := simWorld(t, 0, "}\n  safety: {scaleUp: stable}\n  signals: {rps: \"vector(300)\", cpu: \"vector(3000)\"", `{after: 5m, grace: 0s, activity: "vector(1)"}`)
		c := replicasChange(t, e.Plan(context.Background(), now, state.New(), nil))
		if c.From != "0" || c.To == "0" || c.Held != nil {
			t.Fatalf("%s → %s held %v: want the wake-up applied now", c.From, c.To, c.Held)
		}
		if contributor(c, "NFR") == nil {
			t.Fatalf("%+v: want the NFR contributing (its window holds its own increase)", c)
		}
	})
}
