package load

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
)

// TestCompiledChecksAgreeWithCUE: every identity field's compiled check
// says of a string what CUE says of it in its place, over hand-picked edge
// cases and random strings of the characters that matter.
func TestCompiledChecksAgreeWithCUE(t *testing.T) {
	l := newLoader(t)
	type field struct {
		where string
		def   cue.Value
		id    idField
	}
	var fields []field
	add := func(where string, s section) {
		for _, id := range s.ids {
			def := s.def.LookupPath(cue.MakePath(cue.Str(id.name)))
			if !def.Exists() {
				def = s.def.LookupPath(cue.MakePath(cue.Str(id.name).Required()))
			}
			fields = append(fields, field{where + "." + id.name, def, id})
		}
	}
	for kind, ks := range l.sections {
		add(kind+".metadata", ks.metadata)
		for name, s := range ks.spec {
			add(kind+".spec."+name, s)
		}
	}
	add("#SimWorkload", l.simWorkload)
	want := map[string]bool{"NFR.metadata.name": true, "NFR.metadata.namespace": true, "NFR.spec.target.name": true, "#SimWorkload.name": true, "#SimWorkload.namespace": true}
	for _, f := range fields {
		delete(want, f.where)
		if !f.def.Exists() {
			t.Fatalf("%s: no schema", f.where)
		}
	}
	if len(want) > 0 {
		t.Fatalf("identity fields not compiled: %v", want)
	}
	probes := []string{"", "a", "default", "Default", "a-b", "-a", "a-", "a.b", "a..b", ".a", "a.", "a_b", "é", "a b", "0", "9z",
		strings.Repeat("a", 63), strings.Repeat("a", 64), strings.Repeat("a", 253), strings.Repeat("a", 254),
		strings.Repeat("a.", 126) + "a", "a\n", "\u202ea", idMark + "0"}
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "ab0-.A_é"
	for range 2000 {
		n := rng.IntN(12)
		var b strings.Builder
		for range n {
			b.WriteString(string([]rune(alphabet)[rng.IntN(len([]rune(alphabet)))]))
		}
		probes = append(probes, b.String())
	}
	checked := 0
	for _, f := range fields {
		for _, p := range probes {
			cueSays := f.def.Unify(l.ctx.BuildExpr(ast.NewString(p))).Validate(cue.Concrete(true)) == nil
			if got := f.id.check(p); got != cueSays {
				t.Fatalf("%s of %q: compiled %v, CUE %v", f.where, p, got, cueSays)
			}
			checked++
		}
	}
	t.Logf("%d strings checked over %d fields", checked, len(fields))
}

// TestFastPathIdentitiesAndSimWorkloads: sections validated with their
// names in placeholders, and a sim world's workloads one by one, decode
// and fail as whole documents do.
func TestFastPathIdentitiesAndSimWorkloads(t *testing.T) {
	fast, full := newLoader(t), newLoader(t)
	full.NoFastPath = true
	env := func(providers string) string {
		return "apiVersion: setpoint.dev/v1alpha1\nkind: Environment\nmetadata: {name: e}\nspec:\n  providers:" + providers + "\n"
	}
	w := func(extra string) string {
		return "{kind: Deployment, perPodRPS: 10, containers: [{name: app, request: 1Gi, limit: 1Gi, workingSet: 1Gi}]" + extra + "}"
	}
	sim := func(ws ...string) string {
		return "\n    - name: sim\n      config:\n        trace: t.csv\n        workloads: [" + strings.Join(ws, ", ") + "]"
	}
	docs := []string{
		env(" []"),
		env(sim()),
		env(sim(w(", name: a"))),
		env(sim(w(", name: a"), w(", name: b, namespace: shop"), w(", name: c.d, namespace: default"))),
		env(sim(w(", name: a"), w(", name: B"))),
		env(sim(w(", name: a"), w(", name: 12"))),
		env(sim(w(", name: a"), w(", name: b, namespace: c.d"))),
		env(sim(w(", name: a"), w(", name: "+strings.Repeat("b", 254)))),
		env(sim(w(", name: a"), w(", name: b, annotations: {x: "+idMark+"0}"))),
		env(sim(w(", name: a"), w(", name: "+idMark+"0, namespace: "+idMark+"1"))),
		env(sim(w(", name: a"), "{kind: Deployment, name: b, containers: []}")),
		env(sim(w(", name: a"), w(""))),
		env(sim(w(", name: a"), w(", name: b")) + "\n    - name: kubernetes"),
		env("\n    - name: kubernetes" + sim(w(", name: a"), w(", name: b"))),
		env(sim(w(", name: a"), w(", name: b")) + "\n        rateScale: 0"),
		env(sim(w(", name: a"), w(", name: a"))),
		"apiVersion: setpoint.dev/v1alpha1\nkind: NFR\nmetadata: {name: A}\nspec:\n  target: {kind: Deployment, name: a}\n",
		"apiVersion: setpoint.dev/v1alpha1\nkind: NFR\nmetadata: {name: a, namespace: x.y}\nspec:\n  target: {kind: Deployment, name: a}\n",
		"apiVersion: setpoint.dev/v1alpha1\nkind: NFR\nmetadata: {name: a, namespace: shop, labels: {x: " + idMark + "1}}\nspec:\n  target: {kind: Deployment, name: a.b.c}\n",
		"apiVersion: setpoint.dev/v1alpha1\nkind: NFR\nmetadata: {name: a}\nspec:\n  target: {kind: Deployment, name: A}\n",
		"apiVersion: setpoint.dev/v1alpha1\nkind: NFR\nmetadata: {name: a}\nspec:\n  target: {kind: Deployment, name: 7}\n",
		"apiVersion: setpoint.dev/v1alpha1\nkind: Fleet\nmetadata: {name: f}\nspec:\n  cloud: aws\n  regions: [r]\n  clusterTemplate: t\n  capacity: []\n  nodes: {ceiling: 3}\n",
	}
	docsSeen, diags := 0, 0
	for i, d := range docs {
		for range 2 {
			n, e := bothPaths(t, fast, full, fmt.Sprintf("doc-%d.yaml", i), []byte(d))
			docsSeen, diags = docsSeen+n, diags+e
		}
	}
	if docsSeen < 10 || diags < 20 {
		t.Fatalf("too little compared: %d documents, %d diagnostics", docsSeen, diags)
	}
}
