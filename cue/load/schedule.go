package load

import (
	"fmt"
	"slices"
	"strings"

	"github.com/setpoint-dev/setpoint/cue/spec"
)

var _ = spec.RegisterCheck(spec.Check{Kind: "Schedule", Path: "spec.dependsOn.*", What: "against the sim world, dependsOn names a workload it declares", Why: spec.WhySpans, Example: "checks/depends-on-unknown.yaml"})

// scheduleDependencies refuses, at its position, a dependsOn entry of a
// Schedule run against the sim world that names no workload the world
// declares. dependsOn names workloads, not specs: one that does not exist
// never has ready replicas, so the Schedule would wait for it, asleep, for
// ever. Only the sim world's workloads are known before a run; on a real
// provider the plan holds the wake-up and says why.
func scheduleDependencies(docs []spec.Document) Diagnostics {
	var env *spec.Environment
	for _, d := range docs {
		if e, ok := d.(*spec.Environment); ok {
			env = e
			break
		}
	}
	if env == nil || len(env.Spec.Providers) == 0 {
		return nil
	}
	def := env.Spec.Providers[0].Name
	// The sim world's workloads by namespace, "Kind/name" each; a sim
	// config that does not decode is reported by the Environment's checks.
	var worlds map[string][]string
	for _, p := range env.Spec.Providers {
		if p.Name != "sim" {
			continue
		}
		c, err := p.SimConfig()
		if err != nil {
			continue
		}
		worlds = map[string][]string{}
		for _, w := range c.Workloads {
			worlds[w.Namespace] = append(worlds[w.Namespace], w.Kind+"/"+w.Name)
		}
	}
	if worlds == nil {
		return nil
	}
	var out Diagnostics
	for _, d := range docs {
		s, ok := d.(*spec.Schedule)
		if !ok || spec.ProviderOr(s.Spec.Target.Provider, def) != "sim" {
			continue
		}
		ns := s.Metadata.Namespace
		have := worlds[ns]
		for i, dep := range s.Spec.DependsOn {
			kind, name := spec.SplitDependency(dep)
			if slices.Contains(have, kind+"/"+name) {
				continue
			}
			path := fmt.Sprintf("spec.dependsOn.%d", i)
			out = append(out, Diagnostic{Pos: s.Src.PosOf(path), Path: path,
				Message:  fmt.Sprintf("no workload %s/%s/%s in the sim world: dependsOn names workloads (a name alone is a Deployment), not specs", kind, ns, name),
				Expected: expectedWorkloads(ns, have)})
		}
	}
	return out
}

// expectedWorkloads says which workloads of the namespace a dependency
// can name, in the form dependsOn takes them.
func expectedWorkloads(ns string, have []string) string {
	if len(have) == 0 {
		return "a workload of namespace " + ns + " that the sim world declares (it declares none there)"
	}
	names := make([]string, len(have))
	for i, h := range have {
		names[i] = strings.TrimPrefix(h, "Deployment/")
	}
	slices.Sort(names)
	return "one of the sim world's workloads in namespace " + ns + ": " + strings.Join(names, ", ")
}
