package load

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/cue/spec"
)

// diagsAt returns "line:col message" of the diagnostics at path, sorted by
// position.
func diagsAt(r *Result, path string) []string {
	var out []string
	for _, d := range r.Diags {
		if d.Path == path {
			out = append(out, fmt.Sprintf("%d:%d %s", d.Pos.Line, d.Pos.Col, d.Message))
		}
	}
	return out
}

// NodePolicies whose selectors can take one node are refused at the later
// one's nodeSelector, naming the first it overlaps by file:line:col; a
// selector that requires another value for a label, or another provider,
// keeps two apart, and a namespace does not.
func TestNodePolicyOverlap(t *testing.T) {
	l := newLoader(t)
	const f = "../../testdata/sets/nodepolicy-overlap.yaml"
	r := l.Load(f)
	a, b := f+":7:3", f+":15:3"
	want := []string{
		"23:3 nodeSelector pool=compute can take the same nodes as NodePolicy default/compute-a (nodeSelector pool=compute,zone=a) at " + a + ": a node labelled pool=compute,zone=a would run both",
		"30:1 without a nodeSelector, it can take the same nodes as NodePolicy default/compute-a (nodeSelector pool=compute,zone=a) at " + a + ": a node labelled pool=compute,zone=a would run both",
		"38:3 nodeSelector tier=db can take the same nodes as NodePolicy default/compute-a (nodeSelector pool=compute,zone=a) at " + a + ": a node labelled pool=compute,tier=db,zone=a would run both",
		"46:3 nodeSelector pool=compute,zone=b can take the same nodes as NodePolicy default/compute-b (nodeSelector pool=compute,zone=b) at " + b + ": a node labelled pool=compute,zone=b would run both",
	}
	if got := diagsAt(r, "spec.nodeSelector"); !slices.Equal(got, want) {
		t.Fatalf("got\n%s\nwant\n%s\nall: %v", strings.Join(got, "\n"), strings.Join(want, "\n"), r.Diags)
	}
	if len(r.Diags) != len(want) || len(r.Documents) != 7 {
		t.Fatalf("want only the overlaps and every document decoded, got %d documents and %v", len(r.Documents), r.Diags)
	}

	// Each given a zone of its own, none overlaps.
	src, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	fixed := strings.NewReplacer(
		"nodeSelector: {pool: compute}", "nodeSelector: {pool: compute, zone: c}",
		"  pools: [{name: web, namespaces: [shop], maxCPUs: 4}]\n---\n# Other", "  nodeSelector: {zone: d}\n  pools: [{name: web, namespaces: [shop], maxCPUs: 4}]\n---\n# Other",
		"nodeSelector: {tier: db}", "nodeSelector: {tier: db, zone: e}",
		"nodeSelector: {zone: b, pool: compute}", "nodeSelector: {zone: f, pool: compute}",
	).Replace(string(src))
	p := filepath.Join(t.TempDir(), "n.yaml")
	if err := os.WriteFile(p, []byte(fixed), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := l.Load(p); len(r.Diags) > 0 || len(r.Documents) != 7 {
		t.Fatalf("disjoint selectors: %d documents, %v", len(r.Documents), r.Diags)
	}
}

// A policy that names the Environment's first provider is on the same
// nodes as one that names none.
func TestNodePolicyOverlapDefaultProvider(t *testing.T) {
	l := newLoader(t)
	pol := func(name, target string) string {
		return "apiVersion: setpoint.dev/v1alpha1\nkind: NodePolicy\nmetadata: {name: " + name + "}\nspec:\n" + target +
			"  nodeSelector: {pool: compute}\n  pools: [{name: web, namespaces: [shop], maxCPUs: 4}]\n"
	}
	dir := writeFiles(t, map[string]string{"env.yaml": env,
		"a.yaml": pol("a", ""), "b.yaml": pol("b", "  target: {provider: kubernetes}\n")})
	r := l.LoadDir(dir)
	want := "b.yaml:6:3: spec.nodeSelector: nodeSelector pool=compute can take the same nodes as NodePolicy default/a (nodeSelector pool=compute) at " + filepath.Join(dir, "a.yaml") + ":5:3"
	if len(r.Diags) != 1 || !strings.Contains(r.Diags[0].Error(), want) {
		t.Fatalf("want %q, got %v", want, r.Diags)
	}
}

// The grouped search finds, for each policy, the first earlier one a
// pairwise comparison finds.
func TestNodePolicyOverlapMatchesPairwise(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	keys := []string{"pool", "zone", "tier", "rack"}
	for round := range 200 {
		var docs []spec.Document
		n := 2 + rng.IntN(12)
		for i := range n {
			p := &spec.NodePolicy{}
			p.Kind, p.Metadata.Namespace, p.Metadata.Name = "NodePolicy", "default", fmt.Sprintf("p%d", i)
			p.Src = spec.NewSource(spec.Pos{File: p.Metadata.Name, Line: 1, Col: 1}, nil)
			if rng.IntN(3) == 0 {
				p.Spec.Target.Provider = "sim"
			}
			for _, k := range keys {
				if rng.IntN(2) == 0 {
					if p.Spec.NodeSelector == nil {
						p.Spec.NodeSelector = map[string]string{}
					}
					p.Spec.NodeSelector[k] = fmt.Sprint(rng.IntN(2))
				}
			}
			docs = append(docs, p)
		}
		var want []string
		for i, d := range docs {
			p := d.(*spec.NodePolicy)
			for _, e := range docs[:i] {
				q := e.(*spec.NodePolicy)
				if spec.ProviderOr(p.Spec.Target.Provider, "kubernetes") != spec.ProviderOr(q.Spec.Target.Provider, "kubernetes") {
					continue
				}
				if _, ok := spec.SelectorsOverlap(p.Spec.NodeSelector, q.Spec.NodeSelector); ok {
					want = append(want, p.Metadata.Name+" "+q.Metadata.Name)
					break
				}
			}
		}
		// Each document's file is its name, so a diagnostic's position
		// says whose it is and the position it quotes whom it names.
		var got []string
		for _, d := range nodePolicyOverlaps(docs, "kubernetes") {
			_, at, _ := strings.Cut(d.Message, ") at ")
			other, _, _ := strings.Cut(at, ":")
			got = append(got, d.Pos.File+" "+other)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: got %v, want %v", round, got, want)
		}
	}
}

// Many policies on disjoint nodes are checked without comparing every
// pair: 20,000 one-node selectors, then one more on the first's node.
func TestNodePolicyOverlapScales(t *testing.T) {
	var docs []spec.Document
	for i := range 20001 {
		p := &spec.NodePolicy{}
		p.Kind, p.Metadata.Namespace, p.Metadata.Name = "NodePolicy", "default", fmt.Sprintf("p%d", i)
		p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": fmt.Sprintf("node-%d", i%20000), "pool": "compute"}
		docs = append(docs, p)
	}
	ds := nodePolicyOverlaps(docs, "")
	if len(ds) != 1 || !strings.Contains(ds[0].Message, "NodePolicy default/p0 ") {
		t.Fatalf("want p20000 refused for p0's node, got %v", ds)
	}
}

// RouteGroups on one VIP, compared parsed, on one provider, are refused at
// the later one's VIP, naming the first by file:line:col; the same address
// and port over another protocol, or on another provider, is another VIP.
func TestRouteGroupVIPs(t *testing.T) {
	l := newLoader(t)
	const f = "../../testdata/sets/routegroup-vips.yaml"
	r := l.Load(f)
	want := []string{
		"15:3 VIP 127.100.0.1:08080/tcp (127.100.0.1:8080/tcp) is also the VIP of RouteGroup default/checkout at " + f + ":7:3: each loop would undo the other's slot table every tick",
		"41:3 VIP 127.100.0.1:8080/tcp is also the VIP of RouteGroup default/checkout-sim at " + f + ":32:3: each loop would undo the other's slot table every tick",
	}
	if got := diagsAt(r, "spec.vip"); !slices.Equal(got, want) {
		t.Fatalf("got\n%s\nwant\n%s\nall: %v", strings.Join(got, "\n"), strings.Join(want, "\n"), r.Diags)
	}
	if len(r.Diags) != len(want) || len(r.Documents) != 5 {
		t.Fatalf("want only the shared VIPs and every document decoded, got %d documents and %v", len(r.Documents), r.Diags)
	}
	src, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	fixed := strings.NewReplacer("vip: 127.100.0.1:08080/tcp", "vip: 127.100.0.2:8080/tcp",
		"vip: 127.100.0.1:8080/tcp\n  backends: {selector:", "vip: 127.100.0.3:8080/tcp\n  backends: {selector:").Replace(string(src))
	p := filepath.Join(t.TempDir(), "r.yaml")
	if err := os.WriteFile(p, []byte(fixed), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := l.Load(p); len(r.Diags) > 0 || len(r.Documents) != 5 {
		t.Fatalf("distinct VIPs: %d documents, %v", len(r.Documents), r.Diags)
	}
}

// A RouteGroup that names the Environment's first provider is on the same
// VIPs as one that names none.
func TestRouteGroupVIPDefaultProvider(t *testing.T) {
	l := newLoader(t)
	rg := func(name, target string) string {
		return "apiVersion: setpoint.dev/v1alpha1\nkind: RouteGroup\nmetadata: {name: " + name + "}\nspec:\n" + target +
			"  vip: 127.100.0.1:8080/tcp\n  backends: {endpoints: [127.0.0.1:9001]}\n"
	}
	dir := writeFiles(t, map[string]string{"env.yaml": env,
		"a.yaml": rg("a", ""), "b.yaml": rg("b", "  target: {provider: kubernetes}\n")})
	r := l.LoadDir(dir)
	want := "b.yaml:6:3: spec.vip: VIP 127.100.0.1:8080/tcp is also the VIP of RouteGroup default/a at " + filepath.Join(dir, "a.yaml") + ":5:3"
	if len(r.Diags) != 1 || !strings.Contains(r.Diags[0].Error(), want) {
		t.Fatalf("want %q, got %v", want, r.Diags)
	}
}
