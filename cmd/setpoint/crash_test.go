package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// stateAttr is one attribute of `state show --json`.
type stateAttr struct {
	Path     string   `json:"path"`
	User     string   `json:"user"`
	Applied  string   `json:"applied"`
	By       []string `json:"by"`
	Released string   `json:"released"`
	Pending  string   `json:"pending"`
}

// showState returns `state show --json` by address and path.
func showState(t *testing.T, dir string) map[string]stateAttr {
	t.Helper()
	out, errOut, code := runCLI(t, "state", "show", "--json", dir)
	if code != 0 {
		t.Fatalf("state show: %s", errOut)
	}
	var objs []struct {
		Address    string      `json:"address"`
		Attributes []stateAttr `json:"attributes"`
	}
	if err := json.Unmarshal([]byte(out), &objs); err != nil {
		t.Fatal(err)
	}
	m := map[string]stateAttr{}
	for _, o := range objs {
		for _, a := range o.Attributes {
			m[o.Address+" "+a.Path] = a
		}
	}
	return m
}

// TestKilledMidApplyEveryKind kills apply on the sim world at each step
// of every kind's apply: once the journal is saved but before any provider
// is called, and once the providers applied but before the state recorded
// it. The next run settles the journal from what the world reads back:
// what happened is recorded as setpoint's (created configs too, never
// adopted as the user's), what did not is planned again, and a spec
// deleted afterwards releases what the killed run created.
func TestKilledMidApplyEveryKind(t *testing.T) {
	// One address per kind, with what the killed apply writes.
	want := map[string]string{
		"sim:HorizontalPodAutoscaler/shop/checkout spec.minReplicas":                                             "NFR/shop/checkout",
		`sim:KnativeService/default/fib spec.template.metadata.annotations["autoscaling.knative.dev/min-scale"]`: "NFR/default/fib",
		"sim:Cluster/streaming/east-a spec.nodes":                                                                "Fleet/streaming/streaming",
		"sim:RouteGroup/shop/checkout-vip config":                                                                "RouteGroup/shop/checkout-vip",
		"sim:NodePolicy/default/latency-critical config":                                                         "NodePolicy/default/latency-critical",
	}
	for _, step := range []string{crashBeforeProviderEnv, crashAfterApplyEnv} {
		t.Run(step, func(t *testing.T) {
			// reports wakes to 2 at once: a Schedule's apply too.
			dir := copySpecs(t, append(quick, [3]string{"reports.schedule.yaml", "atStart: 1", "atStart: 2"})...)
			cmd := exec.Command(binary, "apply", "--auto-approve", dir)
			cmd.Env = append(os.Environ(), step+"=1")
			out, _ := cmd.CombinedOutput()
			if cmd.ProcessState.ExitCode() != crashExitCode {
				t.Fatalf("the killed apply: exit %d\n%s", cmd.ProcessState.ExitCode(), out)
			}
			st := showState(t, dir)
			for a := range want {
				if st[a].Pending == "" || st[a].Applied != "" {
					t.Fatalf("%s after the kill: %+v (want the journal's mark, no record)", a, st[a])
				}
			}
			planOut, errOut, code := runCLI(t, "plan", dir)
			if code != 0 {
				t.Fatalf("plan after the kill: %d %s", code, errOut)
			}
			st = showState(t, dir)
			for a, by := range want {
				got := st[a]
				if got.Pending != "" {
					t.Fatalf("%s: the journal was not settled: %+v", a, got)
				}
				happened := step == crashAfterApplyEnv
				if happened != (got.Applied != "") {
					t.Fatalf("%s after %s: %+v", a, step, got)
				}
				if happened && (len(got.By) != 1 || got.By[0] != by) {
					t.Fatalf("%s recorded for %v, want %s", a, got.By, by)
				}
				if strings.HasSuffix(a, " config") && got.User != "" {
					t.Fatalf("%s: setpoint's own config adopted as the user's: %+v", a, got)
				}
			}
			if strings.Contains(planOut, "cut off before it was recorded") != (step == crashAfterApplyEnv) {
				t.Fatalf("the plan must say what it found applied (and only then):\n%s", planOut)
			}
			if step == crashBeforeProviderEnv {
				if !strings.Contains(planOut, "+ sim:RouteGroup/shop/checkout-vip") || !strings.Contains(planOut, "spec.minReplicas: 2 → 3") {
					t.Fatalf("nothing happened: the plan does it again:\n%s", planOut)
				}
				return
			}
			if hpa := st["sim:HorizontalPodAutoscaler/shop/checkout spec.minReplicas"]; hpa.User != "2" || hpa.Applied != "3" {
				t.Fatalf("the HPA: user %q applied %q, want 2 and 3", hpa.User, hpa.Applied)
			}
			// What the killed run created is released when its spec goes.
			for _, f := range []string{"checkout-vip.routegroup.yaml", "latency-critical.nodepolicy.yaml"} {
				if err := os.Remove(filepath.Join(dir, f)); err != nil {
					t.Fatal(err)
				}
			}
			planOut, _, _ = runCLI(t, "plan", dir)
			if !strings.Contains(planOut, "2 to release") {
				t.Fatalf("the configs the killed run created must be released:\n%s", planOut)
			}
			// What the releases stop is said, as the node agents say it.
			for _, want := range []string{"config stops the route group", "config stops the node policy"} {
				if !strings.Contains(planOut, want) {
					t.Fatalf("the plan must warn that the release %s:\n%s", want, planOut)
				}
			}
		})
	}
}
