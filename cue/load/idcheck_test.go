package load

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/token"
	cueyaml "cuelang.org/go/encoding/yaml"
)

// TestCompiledChecksAgreeWithCUE: every leaf's compiled check says of a
// literal what CUE says of it in its place, whenever it is sure, over
// hand-picked edge cases and random literals of the characters that
// matter; and it is sure of the plain ones.
func TestCompiledChecksAgreeWithCUE(t *testing.T) {
	l := newLoader(t)
	type field struct {
		where string
		def   cue.Value
		lf    leaf
	}
	var fields []field
	add := func(where string, s section) {
		for _, lf := range s.leaves {
			def := s.def.LookupPath(cue.MakePath(cue.Str(lf.name)))
			if !def.Exists() {
				def = s.def.LookupPath(cue.MakePath(cue.Str(lf.name).Required()))
			}
			if !def.Exists() {
				def = s.def.LookupPath(cue.MakePath(cue.Str(lf.name).Optional()))
			}
			fields = append(fields, field{where + "." + lf.name, def, lf})
		}
	}
	for kind, ks := range l.sections {
		add(kind+".metadata", ks.metadata)
		for name, s := range ks.spec {
			add(kind+".spec."+name, s)
		}
	}
	add("#SimWorkload", l.simWorkload)
	want := map[string]bool{"NFR.metadata.name": true, "NFR.metadata.namespace": true, "NFR.spec.target.name": true,
		"NFR.spec.throughput.minRPS": true, "NFR.spec.latency.p99": true, "NFR.spec.memory.headroom": true,
		"#SimWorkload.name": true, "#SimWorkload.namespace": true, "#SimWorkload.perPodRPS": true, "#SimWorkload.replicas": true}
	for _, f := range fields {
		delete(want, f.where)
		if !f.def.Exists() {
			t.Fatalf("%s: no schema", f.where)
		}
	}
	if len(want) > 0 {
		t.Fatalf("leaves not compiled: %v", want)
	}
	strs := []string{"", "a", "default", "Default", "a-b", "-a", "a-", "a.b", "a..b", ".a", "a.", "a_b", "é", "a b", "0", "9z",
		"250ms", "1h30m", "1.5s", "0", "0s", "-1s", "1", "ms", "1ms2s", "10%", "100%", "100.0%", "101%",
		strings.Repeat("a", 63), strings.Repeat("a", 64), strings.Repeat("a", 253), strings.Repeat("a", 254),
		strings.Repeat("a.", 126) + "a", "a\n", idMark + "0"}
	nums := []string{"0", "1", "-1", "0.0", "1.0", "0.5", "1e3", "1E3", "1e-3", "10000", "10001", "1000000", "1000001", "1e6", "1.000001e6",
		"0.0000001", "1e-400", "1e400", "123456789012345678901234567890", "2.5", "100", "100.0", "64", "64.5", "65", "-0", "-0.0"}
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "ab0-.A_é5ms%"
	for range 2000 {
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteString(string([]rune(alphabet)[rng.IntN(len([]rune(alphabet)))]))
		}
		strs = append(strs, b.String())
		nums = append(nums, strconv.FormatFloat(rng.Float64()*math.Pow(10, float64(rng.IntN(9)-3)), 'f', rng.IntN(5), 64), strconv.Itoa(rng.IntN(20000)-100))
	}
	checked, unsure := 0, 0
	for _, f := range fields {
		var lits []ast.Expr
		if f.lf.num {
			for _, n := range nums {
				kind := token.INT
				if strings.ContainsAny(n, ".eE") {
					kind = token.FLOAT
				}
				lits = append(lits, &ast.BasicLit{Kind: kind, Value: n})
			}
		} else {
			for _, p := range strs {
				lits = append(lits, ast.NewString(p))
			}
		}
		for _, lit := range lits {
			_, ok, sure := f.lf.check(lit)
			if !sure {
				unsure++
				// A plain literal (ASCII, as JSON writes it, no sign) is
				// always checked here.
				v := lit.(*ast.BasicLit).Value
				plain := isPlainJSON(v) && !strings.HasPrefix(v, "-")
				if f.lf.num {
					plain = plainNumber.MatchString(v) && !strings.HasPrefix(v, "0.000000") && !isConcreteOnly(f.def)
				}
				if plain {
					t.Fatalf("%s of %s: not sure", f.where, v)
				}
				continue
			}
			cueSays := f.def.Unify(l.ctx.BuildExpr(lit)).Validate(cue.Concrete(true)) == nil
			if ok != cueSays {
				t.Fatalf("%s of %s: compiled %v, CUE %v", f.where, lit.(*ast.BasicLit).Value, ok, cueSays)
			}
			checked++
		}
	}
	t.Logf("%d literals checked over %d fields (%d left to CUE)", checked, len(fields), unsure)
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
	nfrWith := func(section string) string {
		return "apiVersion: setpoint.dev/v1alpha1\nkind: NFR\nmetadata: {name: a, namespace: shop}\nspec:\n  target: {kind: Deployment, name: a}\n  " + section + "\n"
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
		nfrWith("throughput: {minRPS: 1e3}"), nfrWith("throughput: {minRPS: 400.0}"), nfrWith("throughput: {minRPS: '400'}"),
		nfrWith("throughput: {minRPS: -5}"), nfrWith("throughput: {minRPS: 0}"), nfrWith("throughput: {minRPS: 1e400}"),
		nfrWith("throughput: {minRPS: 987654300}"), nfrWith("throughput: {minRPS: 0x10}"), nfrWith("throughput: {minRPS: 010}"),
		nfrWith("latency: {p99: 100ms}"), nfrWith("latency: {p99: 1h}"), nfrWith("latency: {p99: abc}"), nfrWith("latency: {p99: 100}"),
		nfrWith("latency: {p99: 987654320ms}"), nfrWith("latency: {p99: \"\\u0031s\"}"),
		nfrWith("memory: {headroom: 1.0}"), nfrWith("memory: {headroom: 0.9}"), nfrWith("memory: {headroom: 10}"), nfrWith("memory: {headroom: 11}"),
		nfrWith("memory: {headroom: '1.2'}"), nfrWith("memory: {headroom: 1.2, containers: [a]}"), nfrWith("memory: {headroom: 1.00000}"),
		env(sim(w(", name: a, replicas: 2"), w(", name: b, replicas: 2.0"))),
		env(sim(w(", name: a, replicas: 10001"), w(", name: b"))),
		env(sim(w(", name: a, perPodRPS: 0"), w(", name: b"))),
		env(sim(w(", name: a"), w(", name: b, perPodRPS: 1e3"), w(", name: c, perPodRPS: 0.0000001"), w(", name: d, perPodRPS: 1.50"))),
		"apiVersion: setpoint.dev/v1alpha1\nkind: NFR\nmetadata: {name: !!binary YQ==}\nspec:\n  target: {kind: Deployment, name: a}\n",
		"apiVersion: setpoint.dev/v1alpha1\nkind: NFR\nmetadata: {name: a}\nspec:\n  target: {kind: Deployment, name: |\n    abc\n  }\n",
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
	// The fast path was taken, with leaves and split worlds: not every
	// document went to the full path.
	if c := fast.counts; c.fast < 10 || c.leaves < 30 || c.splits < 4 {
		t.Fatalf("the fast path was hardly taken: %+v", c)
	}
}

// TestLeafChecksOfDecodedLiterals: the literals the YAML decoder makes of
// what a user may write (bytes, block strings, hex, exponents, signs) are
// judged by a leaf's check as CUE judges them, or left to CUE.
func TestLeafChecksOfDecodedLiterals(t *testing.T) {
	l := newLoader(t)
	ks := l.sections["NFR"]
	type field struct {
		def cue.Value
		lf  leaf
	}
	var fields []field
	for _, s := range []section{ks.metadata, ks.spec["throughput"], ks.spec["latency"], ks.spec["memory"], l.simWorkload} {
		for _, lf := range s.leaves {
			fields = append(fields, field{s.def.LookupPath(cue.MakePath(cue.Str(lf.name).Optional())), lf})
			if !fields[len(fields)-1].def.Exists() {
				fields[len(fields)-1].def = s.def.LookupPath(cue.MakePath(cue.Str(lf.name)))
			}
			if !fields[len(fields)-1].def.Exists() {
				fields[len(fields)-1].def = s.def.LookupPath(cue.MakePath(cue.Str(lf.name).Required()))
			}
		}
	}
	scalars := []string{"!!binary YQ==", `"a"`, "'a'", "a", "|\n  abc", `"\u0031s"`, `"a\tb"`, "1e3", "0x10", "0o17", "1_000", "010",
		"-5", "+5", ".5", "1.", "100", "1.50", "0.0000001", "0.000001", "1e-999999", ".inf", "-.inf", ".nan", "true", "null", "~",
		`"1s"`, "250ms", "svc-1", "Svc", "12345678901234567890123456789012345678901234567890", "1.0", "2.0", "10", "10.0"}
	sure := 0
	for _, sc := range scalars {
		f, err := cueyaml.Extract("t.yaml", []byte("v: "+sc+"\n"))
		if err != nil {
			continue
		}
		var e ast.Expr
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.Field); ok {
				e = fd.Value
			}
		}
		for _, fd := range fields {
			_, ok, isSure := fd.lf.check(e)
			if !isSure {
				continue
			}
			sure++
			cueSays := fd.def.Unify(l.ctx.BuildExpr(e)).Validate(cue.Concrete(true)) == nil
			if ok != cueSays {
				t.Errorf("%s of %s: compiled %v, CUE %v", fd.lf.name, sc, ok, cueSays)
			}
		}
	}
	if sure < 20 {
		t.Fatalf("only %d judged here", sure)
	}
}

// isConcreteOnly says a number constraint has a concrete value among its
// values, which an int or float of the same value leaves to CUE.
func isConcreteOnly(v cue.Value) bool {
	return strings.ContainsAny(fmt.Sprint(v), "*")
}

// TestLeavesReferredToStayInCUE: a field another field's constraint refers
// to (directly or in a comprehension) is no leaf: its value changes what
// the other must be; and a section naming a definition the schema does not
// have (its source cannot be read) has none.
func TestLeavesReferredToStayInCUE(t *testing.T) {
	l := newLoader(t)
	v := l.ctx.CompileString(`
s: {
	min: int & >=1
	max: int & >=min
	mode: *"a" | "b" | =~"^x"
	if mode == "b" {extra: int}
	free: int & >=0
	name: =~"^[a-z0-9.-]+$"
}
#Other: {n: int}
t: {
	x: #Other
	free: int
}`)
	if v.Err() != nil {
		t.Fatal(v.Err())
	}
	leaves := func(path string) []string {
		var got []string
		for _, lf := range l.leaves(v.LookupPath(cue.ParsePath(path))) {
			got = append(got, lf.name)
		}
		return got
	}
	if got, want := leaves("s"), []string{"free", "name"}; !slices.Equal(got, want) {
		t.Fatalf("leaves of s %v, want %v (min and mode are referred to, max refers)", got, want)
	}
	if got := leaves("t"); len(got) != 0 {
		t.Fatalf("leaves of t %v, want none: #Other is not the schema's", got)
	}
}
