package nodepolicykind

import (
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/cue/load"
	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/decide/nodepolicy"
	"github.com/setpoint-dev/setpoint/engine/diag"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/internal/simtest"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/nodeagent"
	"github.com/setpoint-dev/setpoint/providers/noderes"
)

const policyYAML = `apiVersion: setpoint.dev/v1alpha1
kind: NodePolicy
metadata: {name: latency}
spec:
  reserved: {cpus: "0,64"}
  pools:
    - {name: checkout, namespaces: [shop], minCPUs: 2, maxCPUs: 8, pinMemory: true}
    - name: batch
      matchLabels: {tier: batch}
      maxCPUs: 4
  memory: {fromNFR: true}
  enforcement: {cpus: enforce}
`

func loadPolicy(t *testing.T) *spec.NodePolicy {
	t.Helper()
	dir := simtest.WriteDir(t, map[string]string{"np.yaml": policyYAML,
		"env.yaml": "apiVersion: setpoint.dev/v1alpha1\nkind: Environment\nmetadata: {name: node}\nspec:\n  providers: [{name: nri, config: {}}]\n"})
	l, err := load.New()
	if err != nil {
		t.Fatal(err)
	}
	r := l.LoadDir(dir)
	if len(r.Diags) > 0 {
		t.Fatalf("specs: %v", r.Diags)
	}
	for _, d := range r.Specs() {
		if n, ok := d.(*spec.NodePolicy); ok {
			return n
		}
	}
	t.Fatal("no NodePolicy")
	return nil
}

// The spec's fields become the agent's config.
func TestResolve(t *testing.T) {
	c, err := Resolve(loadPolicy(t))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Policy
	if p.Reserved.String() != "0,64" || len(p.Pools) != 2 || p.CPUs != nodepolicy.Enforce || p.Memory != nodepolicy.Observe || !p.MemoryFromNFR {
		t.Fatalf("%+v", p)
	}
	if b := p.Pools[1]; b.Name != "batch" || b.MatchLabels["tier"] != "batch" || b.MinCPUs != 0 || b.MaxCPUs != 4 || !p.Pools[0].PinMemory {
		t.Fatalf("pools %+v", p.Pools)
	}
}

// A node's problems come back as warnings at the field they name, in
// child-process mode (the provider's status.problems) and in a cluster
// (a node agent's report, a line each).
func TestProblemsArePositioned(t *testing.T) {
	n := loadPolicy(t)
	problems, _ := values.StructuredOf([]byte(`[{"field":"spec.pools.1.maxCPUs","message":"placed in the default pool"},{"field":"spec.reserved.cpus","message":"CPU 64 is outside"}]`))
	o := providers.Object{Exists: true, Attributes: map[addrs.Path]values.Value{noderes.AttrProblems: problems}}
	notes := nodeNotes(n.ID(), n, o)
	if len(notes) != 2 || notes[0].Pos.Line != 10 || notes[1].Pos.Line != 5 {
		t.Fatalf("notes %+v, want lines 10 (batch's maxCPUs) and 5 (reserved)", notes)
	}
	// A provider running it on several nodes (the sim world): each node's
	// pools and problems, named.
	nodes, _ := values.StructuredOf([]byte(`[{"node":"a","topology":"1x4x2","pools":[{"name":"default","cpus":"1-3,5-7","requestMilli":500}]},
		{"node":"b","topology":"2x2x1","pools":[{"name":"default","cpus":"0-3"}],"problems":[{"field":"spec.reserved.cpus","message":"CPU 64 is outside"}]}]`))
	o = providers.Object{Exists: true, Attributes: map[addrs.Path]values.Value{noderes.AttrNodes: nodes}}
	notes = nodeNotes(n.ID(), n, o)
	if len(notes) != 3 || notes[0].Message != `node a: pools on 1x4x2: default: CPUs "1-3,5-7", 0 container(s), 500m requested` ||
		notes[2].Message != "node b: CPU 64 is outside" || notes[2].Pos.Line != 5 || notes[2].Severity != diag.Warning {
		t.Fatalf("nodes' notes %+v", notes)
	}
	o = providers.Object{Exists: true, Attributes: map[addrs.Path]values.Value{
		nodeagent.NodeAttr("n1", "message"): values.StringOf("spec.pools.0.minCPUs: minCPUs 2 does not fit\nspec.reserved.cpus: CPU 64 is outside"),
		nodeagent.NodeAttr("n2", "message"): values.StringOf("ok"),
	}}
	notes = clusterNotes(n.ID(), n, o)
	if len(notes) != 2 || notes[0].Pos.Line != 5 || notes[1].Pos.Line != 7 || !strings.HasPrefix(notes[1].Message, "node n1's NRI agent: minCPUs 2") {
		t.Fatalf("cluster notes %+v", notes)
	}
}
