package load

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/setpoint-dev/setpoint/cue/spec"
)

var update = flag.Bool("update", false, "rewrite golden files")

func newLoader(t testing.TB) *Loader {
	t.Helper()
	l, err := New()
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestInvalidGolden checks the exact diagnostics, positions included, for
// one file per error class.
func TestInvalidGolden(t *testing.T) {
	l := newLoader(t)
	files, err := filepath.Glob("../../testdata/invalid/*.yaml")
	if err != nil || len(files) < 10 {
		t.Fatalf("want the invalid corpus, got %d files (%v)", len(files), err)
	}
	var b strings.Builder
	for _, f := range files {
		rel, _ := filepath.Rel("../..", f)
		var docs int
		ds := l.LoadFile(f, func(spec.Document) { docs++ })
		if len(ds) == 0 {
			t.Errorf("%s: no diagnostics; every file here is broken", rel)
		}
		ds.Sort()
		b.WriteString("== " + rel + "\n")
		for _, d := range ds {
			if d.Pos.Line == 0 || d.Pos.Col == 0 {
				t.Errorf("%s: diagnostic without a line and column: %s", rel, d)
			}
			if d.Message == "" {
				t.Errorf("%s: diagnostic without a message: %s", rel, d)
			}
			b.WriteString(strings.Replace(d.Error(), f, rel, 1) + "\n")
		}
	}
	golden := "../../testdata/invalid/want.txt"
	if *update {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != string(want) {
		t.Errorf("diagnostics differ from %s (run with -update after checking):\n%s", golden, lineDiff(string(want), got))
	}
}

// lineDiff lists the lines only one side has.
func lineDiff(want, got string) string {
	count := map[string]int{}
	for _, l := range strings.Split(want, "\n") {
		count[l]++
	}
	for _, l := range strings.Split(got, "\n") {
		count[l]--
	}
	var out []string
	for l, n := range count {
		switch {
		case n > 0:
			out = append(out, "- "+l)
		case n < 0:
			out = append(out, "+ "+l)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

func TestMultiDocKeepsValidDocument(t *testing.T) {
	l := newLoader(t)
	var names []string
	ds := l.LoadFile("../../testdata/invalid/multi-doc.yaml", func(d spec.Document) { names = append(names, d.Head().Metadata.Name) })
	if len(ds) != 1 || ds[0].Path != "spec.enforcement.replicas" {
		t.Fatalf("want one enum error, got %v", ds)
	}
	if len(names) != 1 || names[0] != "fine" {
		t.Fatalf("the valid second document was not decoded: %v", names)
	}
}

func TestSpecsDirectoryIsValid(t *testing.T) {
	l := newLoader(t)
	r := l.LoadDir("../../specs")
	if len(r.Diags) > 0 {
		t.Fatalf("specs/ should be valid:\n%v", r.Diags)
	}
	kinds := map[string]int{}
	for _, d := range r.Documents {
		kinds[d.Head().Kind]++
	}
	if kinds["Environment"] != 1 || kinds["NFR"] < 3 {
		t.Fatalf("want 1 Environment and at least 3 NFRs, got %v", kinds)
	}
	if r.Environment() == nil {
		t.Fatal("no Environment")
	}
}

// TestDefaults checks that a minimal NFR decodes with every default of the
// schema filled in, and that positions survive decoding.
func TestDefaults(t *testing.T) {
	l := newLoader(t)
	src := `apiVersion: setpoint.dev/v1alpha1
kind: NFR
metadata: {name: api}
spec:
  target: {kind: Deployment, name: api}
  memory:
    max: 2Gi
`
	var got *spec.NFR
	ds := l.LoadBytes("min.yaml", []byte(src), func(d spec.Document) { got = d.(*spec.NFR) })
	if len(ds) > 0 {
		t.Fatal(ds)
	}
	s := got.Spec
	checks := []struct {
		name      string
		got, want any
	}{
		{"namespace", got.Metadata.Namespace, "default"},
		{"cpuPerPod", s.CPUPerPod, spec.MilliCPU(500)},
		{"headroom", s.Memory.Headroom, 1.2},
		{"limitFactor", s.Memory.LimitFactor, 1.5},
		{"memory.min", s.Memory.Min, 64 * spec.MiB},
		{"memory.max", s.Memory.Max, 2 * spec.GiB},
		{"window", s.Memory.Window.String(), "30m0s"},
		{"replicas mode", s.Enforcement.Replicas, spec.ModeObserve},
		{"memory mode", s.Enforcement.Memory, spec.ModeObserve},
		{"stability", s.Safety.Stability.String(), "1m0s"},
		{"tolerance", s.Safety.Tolerance, spec.Percent(0.05)},
		{"cooldown", s.Safety.Cooldown.String(), "1m0s"},
		{"maxReplicaStep", s.Safety.MaxReplicaStep, spec.Percent(0.75)},
		{"maxReplicaStepUp", *s.Safety.MaxReplicaStepUp, spec.Percent(1)},
		{"minReplicaStepUp", s.Safety.MinReplicaStepUp, 4},
		{"stepPeriod", s.Safety.StepPeriod.String(), "15s"},
		{"maxMemoryStep", s.Safety.MaxMemoryStep, spec.Percent(0.25)},
		{"paused", s.Paused, false},
		{"pos of memory.max", got.Src.PosOf("spec.memory.max").String(), "min.yaml:7:5"},
		{"pos of an unset field falls back to its parent", got.Src.PosOf("spec.memory.window").String(), "min.yaml:6:3"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if d := spec.Digest(got); len(d) != 64 {
		t.Errorf("digest %q", d)
	}
}

func TestCUESpecFile(t *testing.T) {
	l := newLoader(t)
	src := `kind: "NFR"
apiVersion: "setpoint.dev/v1alpha1"
metadata: name: "fib"
spec: {
	target: {kind: "KnativeService", name: "fib"}
	memory: {request: 128Mi, limit: 64Mi}
}
`
	ds := l.LoadBytes("fib.cue", []byte(src), func(spec.Document) {})
	if len(ds) != 1 || ds[0].Path != "spec.memory.limit" || ds[0].Pos.String() != "fib.cue:6:27" {
		t.Fatalf("want the limit error at fib.cue:6:27, got %v", ds)
	}
}

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const env = `apiVersion: setpoint.dev/v1alpha1
kind: Environment
metadata: {name: demo}
spec:
  providers: [{name: kubernetes, config: {}}]
`

func nfr(name, target string) string {
	return "apiVersion: setpoint.dev/v1alpha1\nkind: NFR\nmetadata: {name: " + name + ", namespace: shop}\nspec:\n  target: {kind: Deployment, name: " + target + "}\n"
}

func messages(r *Result) string {
	var s []string
	for _, d := range r.Diags {
		s = append(s, d.Error())
	}
	return strings.Join(s, "\n")
}

func TestCrossDocumentRules(t *testing.T) {
	l := newLoader(t)
	cases := []struct {
		name  string
		files map[string]string
		want  []string // substrings, in order
		diags int
		docs  int
	}{
		{"duplicate names across files",
			map[string]string{"env.yaml": env, "a.yaml": nfr("checkout", "a"), "b.yaml": nfr("checkout", "b")},
			[]string{"b.yaml:3:12: metadata.name: duplicate NFR/shop/checkout, first defined at ", "a.yaml:3:12"}, 1, 3},
		{"two NFRs on one target",
			map[string]string{"env.yaml": env, "a.yaml": nfr("one", "checkout"), "b.yaml": nfr("two", "checkout")},
			[]string{"b.yaml:5:3: spec.target: NFR two targets the same workload as one at ", "a.yaml:5:3 (expected one NFR per target)"}, 1, 3},
		{"two NFRs on one target, one naming the default provider",
			map[string]string{"env.yaml": env, "a.yaml": nfr("one", "checkout"), "b.yaml": strings.Replace(nfr("two", "checkout"), "name: checkout}", "name: checkout, provider: kubernetes}", 1)},
			[]string{"b.yaml:5:3: spec.target: NFR two targets the same workload as one at ", "a.yaml:5:3 (expected one NFR per target)"}, 1, 3},
		{"no Environment",
			map[string]string{"a.yaml": nfr("one", "a")},
			[]string{"a.yaml:1:1: no Environment among the specs"}, 1, 1},
		{"two Environments",
			map[string]string{"env.yaml": env, "env2.yaml": strings.Replace(env, "demo", "other", 1)},
			[]string{"env2.yaml:1:1: kind: second Environment other; the first is demo"}, 1, 2},
		{"unknown provider on a target",
			map[string]string{"env.yaml": env, "a.yaml": nfr("one", "a") + "  \n", "b.yaml": strings.Replace(nfr("two", "b"), "name: b}", "name: b, provider: sim}", 1)},
			[]string{"b.yaml:5:39: spec.target.provider: provider sim is not in the Environment"}, 1, 3},
		{"one bad file does not stop the others",
			map[string]string{"env.yaml": env, "a.yaml": nfr("one", "a"), "b.yaml": "kind: NFR\nmetadata: {name: [\n", "sub/c.yml": nfr("three", "c")},
			[]string{"b.yaml:"}, 1, 3},
		{"hidden directories and other files are skipped",
			map[string]string{"env.yaml": env, ".setpoint/state.yaml": "garbage: [", "traces/t.csv": "a,b\n", "README.md": "# hi"},
			nil, 0, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := writeFiles(t, c.files)
			r := l.LoadDir(dir)
			got := messages(r)
			if len(r.Diags) != c.diags {
				t.Fatalf("want %d diagnostics, got:\n%s", c.diags, got)
			}
			rest := got
			for _, w := range c.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("missing %q in:\n%s", w, got)
				}
				rest = rest[i+len(w):]
			}
			if len(r.Documents) != c.docs {
				t.Errorf("want %d valid documents, got %d", c.docs, len(r.Documents))
			}
		})
	}
}

func TestFilesystemFaults(t *testing.T) {
	l := newLoader(t)
	t.Run("empty directory", func(t *testing.T) {
		r := l.LoadDir(t.TempDir())
		if len(r.Diags) != 1 || !strings.Contains(r.Diags[0].Error(), "no spec files found") {
			t.Fatalf("got %v", r.Diags)
		}
	})
	t.Run("missing directory", func(t *testing.T) {
		r := l.LoadDir(filepath.Join(t.TempDir(), "nope"))
		if len(r.Diags) != 1 || !strings.Contains(r.Diags[0].Error(), "no such file or directory") {
			t.Fatalf("got %v", r.Diags)
		}
	})
	t.Run("symlink loop", func(t *testing.T) {
		dir := writeFiles(t, map[string]string{"env.yaml": env})
		if err := os.Symlink(dir, filepath.Join(dir, "loop")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("self.yaml", filepath.Join(dir, "self.yaml")); err != nil {
			t.Fatal(err)
		}
		r := l.LoadDir(dir)
		got := messages(r)
		if len(r.Diags) != 2 || !strings.Contains(got, "loop: symlink loop: it leads back to") || !strings.Contains(got, "self.yaml: cannot follow symlink: too many levels of symbolic links") {
			t.Fatalf("got:\n%s", got)
		}
		if len(r.Documents) != 1 {
			t.Fatalf("the Environment should still load, got %d documents", len(r.Documents))
		}
	})
	t.Run("a second link to a sibling directory", func(t *testing.T) {
		dir := writeFiles(t, map[string]string{"env.yaml": env, "sub/a.yaml": nfrDoc("a", "")})
		if err := os.Symlink("sub", filepath.Join(dir, "alias")); err != nil {
			t.Fatal(err)
		}
		r := l.LoadDir(dir)
		got := messages(r)
		if len(r.Diags) != 1 || !strings.Contains(got, "alias: a link to "+filepath.Join(dir, "sub")+", a directory the walk reaches anyway") || strings.Contains(got, "loop") {
			t.Fatalf("a link to a sibling is said for what it is, at the link, not as a loop:\n%s", got)
		}
		if len(r.Documents) != 2 {
			t.Fatalf("its specs are read once: %d documents", len(r.Documents))
		}
	})
	t.Run("dangling symlink", func(t *testing.T) {
		dir := writeFiles(t, map[string]string{"env.yaml": env})
		if err := os.Symlink("gone.yaml", filepath.Join(dir, "a.yaml")); err != nil {
			t.Fatal(err)
		}
		r := l.LoadDir(dir)
		if len(r.Diags) != 1 || !strings.Contains(r.Diags[0].Error(), "a.yaml: cannot follow symlink: no such file or directory") {
			t.Fatalf("got %v", r.Diags)
		}
	})
	t.Run("50 MB file", func(t *testing.T) {
		dir := writeFiles(t, map[string]string{"env.yaml": env})
		f, err := os.Create(filepath.Join(dir, "huge.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(50 << 20); err != nil {
			t.Fatal(err)
		}
		f.Close()
		r := l.LoadDir(dir)
		if len(r.Diags) != 1 || !strings.Contains(r.Diags[0].Error(), "huge.yaml:1:1: file is 50Mi, too large to be a spec (expected at most 10Mi)") {
			t.Fatalf("got %v", r.Diags)
		}
	})
	t.Run("unreadable file", func(t *testing.T) {
		// Root reads through permissions, so a directory named like a spec
		// file's target stands in for an unreadable file.
		dir := writeFiles(t, map[string]string{"env.yaml": env, "d/x": ""})
		if err := os.Symlink(filepath.Join(dir, "d"), filepath.Join(dir, "notafile.yaml")); err != nil {
			t.Fatal(err)
		}
		r := l.LoadFile(filepath.Join(dir, "d"), func(spec.Document) {})
		if len(r) != 1 || !strings.Contains(r[0].Error(), "cannot read file: not a regular file") {
			t.Fatalf("got %v", r)
		}
	})
	t.Run("a FIFO does not hang the reader", func(t *testing.T) {
		dir := t.TempDir()
		fifo := filepath.Join(dir, "pipe.yaml")
		if err := syscall.Mkfifo(fifo, 0o644); err != nil {
			t.Fatal(err)
		}
		// A blocking open would wait for a writer for ever: the test's
		// own deadline is the verdict.
		r := l.LoadFile(fifo, func(spec.Document) {})
		if len(r) != 1 || !strings.Contains(r[0].Error(), "not a regular file") {
			t.Fatalf("got %v", r)
		}
	})
}

// A dependency cycle among Schedules is refused, naming every file and
// line of the cycle; the same Schedules without it load.
func TestScheduleDependencyCycle(t *testing.T) {
	l := newLoader(t)
	r := l.Load("../../testdata/sets/schedule-cycle.yaml")
	var found []string
	for _, d := range r.Diags {
		if strings.Contains(d.Message, "dependency cycle") {
			found = append(found, d.Error())
		}
	}
	want := "schedule-cycle.yaml:14:3: spec.dependsOn: dependency cycle: api → db → web → api; in api (../../testdata/sets/schedule-cycle.yaml:14:3), db (../../testdata/sets/schedule-cycle.yaml:21:3), web (../../testdata/sets/schedule-cycle.yaml:7:3)"
	if len(found) != 1 || !strings.Contains(found[0], want) {
		t.Fatalf("diagnostics: %v", r.Diags)
	}
	b, err := os.ReadFile("../../testdata/sets/schedule-cycle.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	fixed := strings.Replace(string(b), "dependsOn: [web]", "dependsOn: []", 1)
	if err := os.WriteFile(filepath.Join(dir, "s.yaml"), []byte(fixed), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range l.Load(filepath.Join(dir, "s.yaml")).Diags {
		if strings.Contains(d.Message, "cycle") {
			t.Fatalf("no cycle, yet: %s", d)
		}
	}
}

// TestWalkBoundsDirectories: a tree of more directories than the bound is
// cut there with an error, however few spec files it holds.
func TestWalkBoundsDirectories(t *testing.T) {
	l := newLoader(t)
	defer func(n int) { MaxDirs = n }(MaxDirs)
	MaxDirs = 20
	dir := writeFiles(t, map[string]string{"env.yaml": env})
	for i := range 50 {
		if err := os.MkdirAll(filepath.Join(dir, fmt.Sprintf("d%02d", i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r := l.LoadDir(dir)
	if !strings.Contains(messages(r), "more than 20 directories; the rest are not read") {
		t.Fatalf("got:\n%s", messages(r))
	}
}
