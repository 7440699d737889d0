package load

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/cue/spec"
)

// The tests of this file pin the loader's answers to the defects listed in
// issue 9 ("Wrong behaviour" and "For people"): exact messages and
// positions, one case per defect.

const head = "apiVersion: setpoint.dev/v1alpha1\nkind: NFR\n"

// nfrDoc is an NFR named name whose spec is target plus extra lines.
func nfrDoc(name, extra string) string {
	return head + "metadata: {name: " + name + "}\nspec:\n  target: {kind: Deployment, name: " + name + "}\n" + extra
}

// loadOne loads src as one file and returns its diagnostics (as printed)
// and the names of the documents it accepted.
func loadOne(t *testing.T, l *Loader, name, src string) (diags []string, names []string) {
	t.Helper()
	ds := l.LoadBytes(name, []byte(src), func(d spec.Document) { names = append(names, d.Head().Metadata.Name) })
	ds.Sort()
	for _, d := range ds {
		diags = append(diags, d.Error())
		if n := len([]rune(d.Message)); n > MaxMessage {
			t.Errorf("message of %d characters: %.80s…", n, d.Message)
		}
		if n := len([]rune(d.Expected)); n > MaxMessage {
			t.Errorf("expected part of %d characters: %.80s…", n, d.Expected)
		}
		if d.Pos.Line == 0 || d.Pos.Col == 0 {
			t.Errorf("no line and column: %s", d)
		}
	}
	return diags, names
}

func checkDiags(t *testing.T, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("diagnostics:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestDocumentDiagnostics: one document per case, the exact diagnostics.
func TestDocumentDiagnostics(t *testing.T) {
	l := newLoader(t)
	cases := []struct {
		name, src string
		want      []string
	}{
		// Wrong behaviour.
		{"PromQL that does not parse", nfrDoc("a", "  signals: {rps: \"sum(rate(http_requests_total[5m])\"}\n"),
			[]string{`f.yaml:6:13: spec.signals.rps: invalid PromQL at character 34 of the query: unclosed left parenthesis (expected a PromQL instant vector or scalar expression)`}},
		{"PromQL giving a range vector", nfrDoc("a", "  signals:\n    workingSet: container_memory_working_set_bytes[5m]\n"),
			[]string{`f.yaml:7:5: spec.signals.workingSet: PromQL gives a range vector, not a value per series (wrap it in a function such as rate()) (expected a PromQL instant vector or scalar expression)`}},
		{"PromQL calling no function", nfrDoc("a", "  signals: {cpu: 'nosuch(x)', p99: 'histogram_quantile(0.99, sum by (le) (rate(b[5m])))'}\n"),
			[]string{`f.yaml:6:13: spec.signals.cpu: invalid PromQL at character 1 of the query: unknown function with name "nosuch" (expected a PromQL instant vector or scalar expression)`}},
		{"an apiVersion of another release", strings.Replace(nfrDoc("a", ""), "v1alpha1", "v2", 1),
			[]string{`f.yaml:1:13: apiVersion: "setpoint.dev/v2" is not allowed (expected "setpoint.dev/v1alpha1")`}},
		{"a key given twice with two values", head + "metadata: {name: a}\nmetadata: {name: b}\nspec:\n  target: {kind: Deployment, name: a}\n",
			[]string{`f.yaml:4:1: metadata: duplicate key metadata (first at line 3) (expected each key once per mapping)`}},
		{"a key given twice with one value", nfrDoc("a", "  paused: true\n  cpuPerPod: 1\n  paused: true\n"),
			[]string{`f.yaml:8:3: spec.paused: duplicate key paused (first at line 6) (expected each key once per mapping)`}},
		{"a nested key given twice", nfrDoc("a", "  memory: {min: 1Gi, max: 2Gi, min: 1Gi}\n"),
			[]string{`f.yaml:6:32: spec.memory.min: duplicate key min (first at line 6) (expected each key once per mapping)`}},
		{"a zero CPU quantity", nfrDoc("a", "  cpuPerPod: \"0\"\n"),
			[]string{`f.yaml:6:3: spec.cpuPerPod: invalid CPU quantity "0" (expected e.g. 500m or 0.5)`}},
		{"a CPU quantity below 1m", nfrDoc("a", "  cpuPerPod: 0.0001\n"),
			[]string{`f.yaml:6:3: spec.cpuPerPod: CPU quantity "0.0001" is less than 1m (expected at least 1m)`}},
		{"an oversized quantity string", nfrDoc("a", "  memory:\n    max: 99999999999999999999Ti\n"),
			[]string{`f.yaml:7:5: spec.memory.max: quantity "99999999999999999999Ti" is too large (expected at most 4194304Ti)`}},
		{"an oversized quantity number", nfrDoc("a", "  safety: {maxMemory: 99999999999999999999}\n"),
			[]string{`f.yaml:6:12: spec.safety.maxMemory: quantity 99999999999999999999 is too large (expected at most 4194304Ti)`}},

		// For people.
		{"NaN", nfrDoc("a", "  throughput: {minRPS: .nan}\n"),
			[]string{`f.yaml:6:24: spec.throughput.minRPS: invalid value NaN (expected a finite number)`}},
		{"minus infinity", nfrDoc("a", "  throughput: {minRPS: -.inf}\n"),
			[]string{`f.yaml:6:24: spec.throughput.minRPS: invalid value -Inf (expected a finite number)`}},
		{"an integer longer than 64 bits", nfrDoc("a", "  autoscaler: {create: true, maxReplicas: 99999999999999999999}\n"),
			[]string{`f.yaml:6:43: spec.autoscaler.maxReplicas: 99999999999999999999 is out of range (expected <=10000)`}},
		{"a number tagged float", nfrDoc("a", "  throughput: {minRPS: !!float 400}\n"), nil},
		{"a name of the wrong type", head + "metadata: {name: 5}\nspec:\n  target: {kind: Deployment, name: a}\n",
			[]string{`f.yaml:3:18: metadata.name: wrong type: 5 (expected a string)`}},
		{"a null name", head + "metadata: {name: null}\nspec:\n  target: {kind: Deployment, name: a}\n",
			[]string{`f.yaml:3:18: metadata.name: wrong type: null (expected a string)`}},
		{"a name too long", head + "metadata: {name: " + strings.Repeat("a", 64) + "}\nspec:\n  target: {kind: Deployment, name: a}\n",
			[]string{`f.yaml:3:18: metadata.name: invalid value "` + strings.Repeat("a", 64) + `" (expected at most 63 characters)`}},
		{"an empty query", nfrDoc("a", "  signals: {rps: ''}\n"),
			[]string{`f.yaml:6:18: spec.signals.rps: invalid value "" (expected at least 1 character)`}},
		{"a null spec", head + "metadata: {name: a}\nspec: null\n",
			[]string{`f.yaml:4:7: spec: wrong type: null (expected a mapping)`}},
		{"a null section", nfrDoc("a", "  memory: null\n"),
			[]string{`f.yaml:6:11: spec.memory: wrong type: null (expected a mapping)`}},
		{"a list where a string goes", nfrDoc("a", "  takeOverFrom: [[[[[[[[[[[[[[[[[[[[x]]]]]]]]]]]]]]]]]]]]\n"),
			[]string{`f.yaml:6:18: spec.takeOverFrom.0: wrong type: a list (expected a string)`}},
		{"10,000 nested lists", nfrDoc("a", "  takeOverFrom: "+strings.Repeat("[", 10000)+strings.Repeat("]", 10000)+"\n"),
			[]string{`f.yaml:6:3: spec.takeOverFrom: nested more than 100 levels deep (expected a shallower document)`}},
		{"an overlong value", nfrDoc("a", "  takeOverFrom: ["+strings.Repeat("x", 400)+"]\n"),
			[]string{`f.yaml:6:18: spec.takeOverFrom.0: invalid value "` + strings.Repeat("x", 284) + `… (expected at most 128 characters)`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			got, names := loadOne(t, l, "f.yaml", c.src)
			checkDiags(t, got, c.want)
			if len(c.want) == 0 && len(names) != 1 {
				t.Errorf("the document was not accepted")
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}

// TestBrokenDocumentCostsOnlyItself: a document YAML cannot parse is
// reported where its error is, and the documents after it are still
// validated and emitted.
func TestBrokenDocumentCostsOnlyItself(t *testing.T) {
	l := newLoader(t)
	one, three := nfrDoc("one", ""), nfrDoc("three", "")
	cases := []struct {
		name, broken string
		want         []string
		names        string
	}{
		{"an unclosed list", "kind: NFR\nmetadata: {name: [}\n",
			[]string{`f.yaml:8:19: syntax error: did not find expected node content`}, "one three"},
		{"an unclosed mapping", "kind: NFR\nmetadata: {name: two\nspec: {}\n",
			[]string{`f.yaml:8:11: syntax error: did not find expected ',' or '}': an unclosed [ or { starts here`}, "one three"},
		{"a key indented one space too few", nfrDoc("two", " memory: {max: 1Gi}\n"),
			[]string{`f.yaml:12:2: syntax error: did not find expected key: check this line's indentation`}, "one three"},
		{"a nested key indented wrongly", nfrDoc("two", "  memory:\n    max: 1Gi\n   min: 1Gi\n"),
			[]string{`f.yaml:14:4: syntax error: did not find expected key: check this line's indentation`}, "one three"},
		{"a second colon", nfrDoc("two", "  paused: no: yes\n"),
			[]string{`f.yaml:12:13: syntax error: mapping values are not allowed in this context: check the indentation, or quote a value that holds ": "`}, "one three"},
		{"a tab", nfrDoc("two", "\tpaused: true\n"),
			[]string{`f.yaml:12:1: syntax error: found character that cannot start any token: a tab cannot indent YAML, and @ or ` + "`" + ` cannot start a plain value`}, "one three"},
		{"an unclosed quote", nfrDoc("two", "  signals: {rps: \"up}\n"),
			[]string{`f.yaml:12:18: syntax error: found unexpected end of stream`}, "one three"},
		{"an alias of no anchor", nfrDoc("two", "  paused: *nope\n"),
			[]string{`f.yaml:12:11: YAML alias *nope names no anchor (expected an anchor &nope defined before it)`}, "one three"},
		{"two broken documents", "kind: NFR\nmetadata: {name: [}\n---\nspec: [\n",
			[]string{`f.yaml:8:19: syntax error: did not find expected node content`, `f.yaml:10:7: syntax error: did not find expected node content`}, "one three"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, names := loadOne(t, l, "f.yaml", one+"---\n"+c.broken+"---\n"+three)
			checkDiags(t, got, c.want)
			if strings.Join(names, " ") != c.names {
				t.Errorf("documents accepted: %v, want %s", names, c.names)
			}
		})
	}
	t.Run("positions after a broken document are the file's", func(t *testing.T) {
		got, _ := loadOne(t, l, "f.yaml", one+"---\nkind: [\n---\n"+nfrDoc("three", "  paused: maybe\n"))
		checkDiags(t, got, []string{
			`f.yaml:7:7: syntax error: did not find expected node content`,
			`f.yaml:14:11: spec.paused: wrong type: "maybe" (expected bool)`,
		})
	})
	t.Run("the first document broken, no ---", func(t *testing.T) {
		got, names := loadOne(t, l, "f.yaml", "kind: NFR\nmetadata: {name: x\n")
		checkDiags(t, got, []string{`f.yaml:2:11: syntax error: did not find expected ',' or '}': an unclosed [ or { starts here`})
		if len(names) != 0 {
			t.Errorf("accepted %v", names)
		}
	})
}

// TestAliasBomb: a classic 9-level "billion laughs" (9^9 nodes) is refused
// at the field where its expansion passes the limit, quickly and without
// expanding it.
func TestAliasBomb(t *testing.T) {
	l := newLoader(t)
	var b strings.Builder
	b.WriteString(nfrDoc("bomb", "  annotations:\n"))
	b.WriteString(`    a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]` + "\n")
	for i, c := range "bcdefghi" {
		prev := string(rune('a' + i))
		fmt.Fprintf(&b, "    %c: &%c [%s]\n", c, c, strings.TrimSuffix(strings.Repeat("*"+prev+",", 9), ","))
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	got, names := loadOne(t, l, "bomb.yaml", b.String())
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	checkDiags(t, got, []string{`bomb.yaml:11:5: spec.annotations.e: YAML aliases expand to more than 50000 nodes (expected a document without an alias bomb)`})
	if len(names) != 0 {
		t.Errorf("accepted %v", names)
	}
	if elapsed > 2*time.Second {
		t.Errorf("took %v", elapsed)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	if alloc > 256<<20 {
		t.Errorf("allocated %d MiB", alloc>>20)
	}
	t.Logf("refused in %v, %d KiB allocated", elapsed, alloc>>10)
}

// simEnv is an Environment with a sim provider over trace and the given
// workloads (YAML flow mappings, one per line).
func simEnv(trace string, workloads ...string) string {
	s := "apiVersion: setpoint.dev/v1alpha1\nkind: Environment\nmetadata: {name: demo}\nspec:\n  providers:\n    - name: sim\n      config:\n        trace: " + trace + "\n        workloads:\n"
	for _, w := range workloads {
		s += "          - " + w + "\n"
	}
	return s
}

func workload(name, extra string) string {
	return "{kind: Deployment, namespace: shop, name: " + name + ", perPodRPS: 100, containers: [{name: app, request: 1Mi, limit: 1Mi, workingSet: 1Mi}]" + extra + "}"
}

// TestSimWorkloads: two workloads with one namespace and name, and shares
// that add up to more than the trace, are refused at the field.
func TestSimWorkloads(t *testing.T) {
	l := newLoader(t)
	cases := []struct {
		name string
		wls  []string
		want []string
	}{
		{"duplicate workloads", []string{workload("a", ""), workload("b", ""), workload("a", ", replicas: 2")},
			[]string{`env.yaml:12:49: spec.providers.0.config.workloads.2.name: duplicate sim workload shop/a (first at line 10) (expected one workload per namespace and name)`}},
		{"shares above 1", []string{workload("a", ", share: 0.7"), workload("b", ", share: 0.2"), workload("c", ", share: 0.2")},
			[]string{`env.yaml:12:144: spec.providers.0.config.workloads.2.share: the shares up to this workload add up to 1.1, more than the whole trace (expected shares that add up to at most 1)`}},
		{"shares of exactly 1", []string{workload("a", ", share: 0.7"), workload("b", ", share: 0.2"), workload("c", ", share: 0.1")}, nil},
		{"workloads without a share each receive the whole trace", []string{workload("a", ""), workload("b", ""), workload("c", ", share: 0")}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, names := loadOne(t, l, "env.yaml", simEnv("t.csv", c.wls...))
			checkDiags(t, got, c.want)
			if len(c.want) == 0 && len(names) != 1 {
				t.Errorf("not accepted")
			}
		})
	}
}

// TestDirectoryRules: the rules that need the directory, through Load.
func TestDirectoryRules(t *testing.T) {
	l := newLoader(t)
	okEnv := simEnv("traces/t.csv", workload("a", ""))
	cases := []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{"a memory window longer than the embedded store keeps",
			map[string]string{"env.yaml": okEnv, "traces/t.csv": "second,rate\n0,1\n", "a.yaml": nfrDoc("a", "  memory: {window: 45m}\n")},
			[]string{`a.yaml:6:12: spec.memory.window: window 45m0s is longer than the 30m0s of history the embedded signal store keeps (expected at most 30m0s)`}},
		{"a memory window the store keeps",
			map[string]string{"env.yaml": okEnv, "traces/t.csv": "second,rate\n0,1\n", "a.yaml": nfrDoc("a", "  memory: {window: 30m}\n")},
			nil},
		{"a memory window with a Prometheus source",
			// (On a cluster: the sim world cannot be served by a server.)
			map[string]string{"env.yaml": "apiVersion: setpoint.dev/v1alpha1\nkind: Environment\nmetadata: {name: demo}\nspec:\n  providers: [{name: kubernetes, config: {}}]\n  signals: {default: prometheus, prometheus: {url: 'http://p:9090'}}\n", "a.yaml": nfrDoc("a", "  memory: {window: 2h}\n")},
			nil},
		{"a missing trace",
			map[string]string{"env.yaml": okEnv},
			[]string{`env.yaml:8:9: spec.providers.0.config.trace: trace traces/t.csv does not exist (looked for traces/t.csv) (expected a trace file, relative to the Environment file's directory)`}},
		{"a trace that is a directory",
			map[string]string{"env.yaml": okEnv, "traces/t.csv/x": ""},
			[]string{`env.yaml:8:9: spec.providers.0.config.trace: trace traces/t.csv is a directory, not a file (expected a trace file, relative to the Environment file's directory)`}},
		// Outside the directory the loader looks at nothing (validate's
		// directory check reports the path as outside).
		{"a trace outside the directory is not looked at",
			map[string]string{"env.yaml": simEnv("/nonexistent/secret", workload("a", ""))},
			nil},
		{"a trace relative to the Environment's own directory",
			map[string]string{"sub/env.yaml": okEnv, "sub/traces/t.csv": "second,rate\n0,1\n", "a.yaml": nfrDoc("a", "")},
			nil},
		{"an invalid Environment is not a missing one",
			map[string]string{"env.yaml": strings.Replace(okEnv, "perPodRPS: 100", "perPodRPS: -1", 1), "traces/t.csv": "", "a.yaml": nfrDoc("a", "")},
			[]string{`env.yaml:10:69: spec.providers.0.config.workloads.0.perPodRPS: -1 is out of range (expected >0)`}},
		{"an Environment YAML cannot parse is not a missing one",
			map[string]string{"env.yaml": strings.Replace(okEnv, "metadata: {name: demo}", "metadata: {name: demo", 1), "traces/t.csv": "", "a.yaml": nfrDoc("a", "")},
			[]string{`env.yaml:3:11: syntax error: did not find expected ',' or '}': an unclosed [ or { starts here`}},
		{"no Environment at all",
			map[string]string{"a.yaml": nfrDoc("a", "")},
			[]string{`a.yaml:1:1: no Environment among the specs (expected one kind: Environment document per directory)`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := writeFiles(t, c.files)
			r := l.LoadDir(dir)
			var got []string
			for _, d := range r.Diags {
				got = append(got, strings.ReplaceAll(d.Error(), dir+"/", ""))
			}
			checkDiags(t, got, c.want)
		})
	}
}

// TestTraceCheckReadsNothing: the trace check looks at the file's type
// only, so no error can show a byte of a file that is not a spec.
func TestTraceCheckReadsNothing(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("root:SECRET\n"), 0o000); err != nil {
		t.Fatal(err)
	}
	e := &spec.Environment{Spec: spec.EnvironmentSpec{Providers: []spec.Provider{{Name: "sim", Config: []byte(`{"trace":"secret"}`)}}}}
	if errs := e.CheckFiles(dir); len(errs) != 0 {
		t.Fatalf("a regular file, even unreadable, exists: %v", errs)
	}
}

// TestEveryNFRHasAReplicasCap: an NFR without safety.maxReplicas gets the
// default cap, and the schema's default is spec.DefaultMaxReplicas.
func TestEveryNFRHasAReplicasCap(t *testing.T) {
	for _, fast := range []bool{true, false} {
		l := newLoader(t)
		l.NoFastPath = !fast
		var got *spec.NFR
		if ds := l.LoadBytes("a.yaml", []byte(nfrDoc("a", "")), func(d spec.Document) { got = d.(*spec.NFR) }); len(ds) > 0 {
			t.Fatal(ds)
		}
		if got.Spec.Safety.MaxReplicas != spec.DefaultMaxReplicas || spec.DefaultMaxReplicas != 1000 {
			t.Errorf("fast path %v: maxReplicas %d, want %d", fast, got.Spec.Safety.MaxReplicas, spec.DefaultMaxReplicas)
		}
	}
}

// TestSummary: `setpoint validate`'s last line counts in words.
func TestSummary(t *testing.T) {
	for _, c := range []struct {
		files, docs, errs int
		want              string
	}{
		{1, 1, 0, "1 document in 1 file is valid"},
		{2, 3, 0, "3 documents in 2 files are valid"},
		{1, 0, 1, "1 error; 0 documents in 1 file pass their schemas"},
		{3, 1, 2, "2 errors; 1 document in 3 files passes its schema"},
	} {
		r := &Result{Files: c.files, Documents: make([]spec.Document, c.docs), Diags: make(Diagnostics, c.errs)}
		if got := r.Summary(); got != c.want {
			t.Errorf("%+v: %q, want %q", c, got, c.want)
		}
	}
}
