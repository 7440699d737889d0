package load

import (
	"strings"
	"testing"
)

// scheduleDoc is a Schedule of namespace shop on Deployment name, with
// dependsOn (a YAML flow list) and the target's provider ("" for the
// Environment's first).
func scheduleDoc(name, dependsOn, provider string) string {
	p := ""
	if provider != "" {
		p = ", provider: " + provider
	}
	return "apiVersion: setpoint.dev/v1alpha1\nkind: Schedule\nmetadata: {name: " + name + ", namespace: shop}\nspec:\n  target: {kind: Deployment, name: " + name + p + "}\n  dependsOn: " + dependsOn + "\n"
}

// TestScheduleDependsOnSimWorkloads: against the sim world, a dependsOn
// entry that names no workload it declares is an error at the entry
// (line 6, the list's column for each item); names, kinds and namespaces
// all count; a Schedule on another provider is not checked (its plan
// holds the wake-up instead).
func TestScheduleDependsOnSimWorkloads(t *testing.T) {
	l := newLoader(t)
	env := simEnv("traces/t.csv", workload("web", ""), workload("db", ""),
		"{kind: KnativeService, namespace: shop, name: fn, perPodRPS: 100, knative: {targetConcurrency: 10}, containers: [{name: app, request: 1Mi, limit: 1Mi, workingSet: 1Mi}]}",
		"{kind: Deployment, namespace: other, name: cache, perPodRPS: 100, containers: [{name: app, request: 1Mi, limit: 1Mi, workingSet: 1Mi}]}")
	env += "    - {name: kubernetes, config: {}}\n"
	const expected = "(expected one of the sim world's workloads in namespace shop: KnativeService/fn, db, web)"
	for _, c := range []struct {
		name, doc string
		want      []string
	}{
		{"workloads it declares", scheduleDoc("web", "[db, KnativeService/fn, Deployment/db]", ""), nil},
		// A spec's name is not a workload's; the cache of another
		// namespace is not this one's; fn is a Knative Service, not a
		// Deployment.
		{"names that are no workload", scheduleDoc("web", "[db-schedule, cache, Deployment/fn, db]", ""), []string{
			"s.yaml:6:15: spec.dependsOn.0: no workload Deployment/shop/db-schedule in the sim world: dependsOn names workloads (a name alone is a Deployment), not specs " + expected,
			"s.yaml:6:28: spec.dependsOn.1: no workload Deployment/shop/cache in the sim world: dependsOn names workloads (a name alone is a Deployment), not specs " + expected,
			"s.yaml:6:35: spec.dependsOn.2: no workload Deployment/shop/fn in the sim world: dependsOn names workloads (a name alone is a Deployment), not specs " + expected,
		}},
		{"another provider's Schedule", scheduleDoc("web", "[nowhere]", "kubernetes"), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{"env.yaml": env, "traces/t.csv": "second,rate\n0,1\n", "s.yaml": c.doc})
			r := l.LoadDir(dir)
			var got []string
			for _, d := range r.Diags {
				got = append(got, strings.ReplaceAll(d.Error(), dir+"/", ""))
			}
			checkDiags(t, got, c.want)
		})
	}
}
