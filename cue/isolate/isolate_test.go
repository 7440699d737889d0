package isolate

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/cue/load"
	"github.com/setpoint-dev/setpoint/cue/spec"
)

// childEnv makes the test binary the evaluator's child: a test binary is
// not setpoint, but it links Serve as setpoint does.
const childEnv = "SETPOINT_ISOLATE_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		if err := Serve(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func evaluator() *Evaluator {
	return &Evaluator{Binary: os.Args[0], Env: []string{childEnv + "=1"}, TimeoutFlag: "--cue-timeout", MemoryFlag: "--cue-memory"}
}

// The bomb of issue 9: a few bytes that ask the evaluator for gigabytes.
const bomb = `import "list"
apiVersion: "setpoint.dev/v1alpha1"
kind: "NFR"
x: [for i in list.Range(0, 50000000, 1) {i}]
`

// slow is expensive but small: seconds of CPU, about 100 MB.
const slow = `import "list"
apiVersion: "setpoint.dev/v1alpha1"
kind: "NFR"
x: [for i in list.Range(0, 50000, 1) {i}]
`

const valid = `apiVersion: "setpoint.dev/v1alpha1"
kind: "NFR"
metadata: name: "%s"
spec: target: {kind: "Deployment", name: "%[1]s"}
`

func writeFiles(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func roundTripFiles(t testing.TB) []string {
	var files []string
	for _, g := range []string{"testdata/*.cue", "../load/testdata/*.cue", "../../specs/*.cue",
		// The child loads YAML as well as CUE, and these cover every
		// field of every kind: the wire is checked on them too.
		"../../specs/*.yaml", "../../testdata/valid/*.yaml", "../../testdata/invalid/*.yaml"} {
		m, err := filepath.Glob(g)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 10 {
		t.Fatalf("only %d test files found", len(files))
	}
	return files
}

// TestRoundTrip: what crosses the pipe equals what the loader gives in
// process, documents (with their positions) and diagnostics alike.
func TestRoundTrip(t *testing.T) {
	files := roundTripFiles(t)
	l, err := load.New()
	if err != nil {
		t.Fatal(err)
	}
	got := evaluator().EvalCUE(context.Background(), l.Options(), files)
	docs := 0
	for _, f := range files {
		var want load.FileResult
		want.Diags = l.LoadFile(f, func(d spec.Document) { want.Documents = append(want.Documents, d) })
		g, ok := got[f]
		if !ok {
			t.Errorf("%s: no result", f)
			continue
		}
		if len(g.Documents) != len(want.Documents) {
			t.Errorf("%s: %d documents, want %d", f, len(g.Documents), len(want.Documents))
			continue
		}
		for i := range want.Documents {
			docs++
			if !reflect.DeepEqual(g.Documents[i], want.Documents[i]) {
				t.Errorf("%s: document %d differs:\n got %#v\nwant %#v", f, i, g.Documents[i], want.Documents[i])
			}
			if g, w := g.Documents[i].Head().Src.Fields(), want.Documents[i].Head().Src.Fields(); len(g) == 0 || !reflect.DeepEqual(g, w) {
				t.Errorf("%s: document %d: field positions differ:\n got %v\nwant %v", f, i, g, w)
			}
		}
		if !reflect.DeepEqual(g.Diags, want.Diags) {
			t.Errorf("%s: diagnostics differ:\n got %v\nwant %v", f, g.Diags, want.Diags)
		}
	}
	if docs < 8 {
		t.Fatalf("only %d documents compared", docs)
	}
}

// TestRoundTripNeedsTheLoadersJSON guards the test above: re-encoding a
// document is not exact on these files, so comparing would catch a wire
// that did that.
func TestRoundTripNeedsTheLoadersJSON(t *testing.T) {
	l, err := load.New()
	if err != nil {
		t.Fatal(err)
	}
	var docs []spec.Document
	if ds := l.LoadFile("testdata/environment.cue", func(d spec.Document) { docs = append(docs, d) }); len(ds) > 0 || len(docs) != 1 {
		t.Fatalf("%v, %d documents", ds, len(docs))
	}
	b, err := json.Marshal(docs[0])
	if err != nil {
		t.Fatal(err)
	}
	again := &spec.Environment{}
	if err := json.Unmarshal(b, again); err != nil {
		t.Fatal(err)
	}
	again.Src = docs[0].Head().Src
	if reflect.DeepEqual(again, docs[0]) {
		t.Fatal("a re-encoded Environment equals the original: the test data no longer shows why the wire carries the loader's JSON")
	}
}

func memoryMessage(bound string) string {
	return "evaluating this file used more than " + bound + " of memory (limit: --cue-memory)"
}

// TestMemoryBound: the bomb costs its own file only; the files before it
// keep their results and the files after it are evaluated by a new child.
// Each bound is checked alone.
func TestMemoryBound(t *testing.T) {
	dir := writeFiles(t, map[string]string{"a.cue": fmt.Sprintf(valid, "a"), "b-bomb.cue": bomb, "c.cue": fmt.Sprintf(valid, "c")})
	files := []string{filepath.Join(dir, "a.cue"), filepath.Join(dir, "b-bomb.cue"), filepath.Join(dir, "c.cue")}
	cases := []struct {
		name                 string
		noCgroup, noWatchdog bool
	}{{"watchdog", true, false}}
	// The cgroup is how setpoint bounds the child as root (tests run as
	// root in CI): there it must work, or the test fails. Without root the
	// product uses the watchdog alone, which the case above covers.
	if os.Geteuid() == 0 {
		cases = append(cases, struct {
			name                 string
			noCgroup, noWatchdog bool
		}{"cgroup", false, true})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := evaluator()
			e.Memory = 256 << 20
			e.Timeout = 45 * time.Second // the bomb needs minutes unbounded
			e.noCgroup, e.noWatchdog = tc.noCgroup, tc.noWatchdog
			if !tc.noCgroup {
				cg, err := newCgroup(e.Memory)
				if err != nil {
					t.Fatalf("running as root, a memory cgroup must be available: %v", err)
				}
				cg.remove()
			}
			got := e.EvalCUE(context.Background(), load.Options{MaxFileSize: load.MaxFileSize}, files)
			for _, f := range []string{files[0], files[2]} {
				if r := got[f]; len(r.Diags) != 0 || len(r.Documents) != 1 {
					t.Errorf("%s: %v, %d documents", f, r.Diags, len(r.Documents))
				}
			}
			want := load.Diagnostics{{Pos: spec.Pos{File: files[1], Line: 1, Col: 1}, Message: memoryMessage("256 MiB")}}
			if r := got[files[1]]; !reflect.DeepEqual(r.Diags, want) || len(r.Documents) != 0 {
				t.Errorf("bomb: got %v, want %v", r.Diags, want)
			}
			assertNoCgroupLeft(t)
		})
	}
}

// assertNoCgroupLeft checks that this process's cgroups were removed.
func assertNoCgroupLeft(t *testing.T) {
	t.Helper()
	own, _ := os.ReadFile("/proc/self/cgroup")
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	base, _, err := memoryCgroup(string(own), string(mounts))
	if err != nil {
		return
	}
	left, _ := filepath.Glob(filepath.Join(base, fmt.Sprintf("%s%d-*", cgroupPrefix, os.Getpid())))
	if len(left) > 0 {
		t.Errorf("cgroups left behind: %v", left)
	}
}

// TestTimeout: the batch's time limit stops the file being evaluated and
// leaves the later ones unevaluated, in seconds, not minutes.
func TestTimeout(t *testing.T) {
	dir := writeFiles(t, map[string]string{"a.cue": fmt.Sprintf(valid, "a"), "b-slow.cue": slow, "c.cue": fmt.Sprintf(valid, "c")})
	files := []string{filepath.Join(dir, "a.cue"), filepath.Join(dir, "b-slow.cue"), filepath.Join(dir, "c.cue")}
	e := evaluator()
	e.Timeout = time.Second
	start := time.Now()
	got := e.EvalCUE(context.Background(), load.Options{MaxFileSize: load.MaxFileSize}, files)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %s with a 1s limit", took)
	}
	if r := got[files[0]]; len(r.Diags) != 0 || len(r.Documents) != 1 {
		t.Errorf("the file before: %v, %d documents", r.Diags, len(r.Documents))
	}
	at := func(f, msg string) load.Diagnostics {
		return load.Diagnostics{{Pos: spec.Pos{File: f, Line: 1, Col: 1}, Message: msg}}
	}
	if want := at(files[1], "evaluating CUE files took longer than 1s; this file was being evaluated when the time ran out (limit: --cue-timeout)"); !reflect.DeepEqual(got[files[1]].Diags, want) {
		t.Errorf("slow file: got %v, want %v", got[files[1]].Diags, want)
	}
	if want := at(files[2], "not evaluated: CUE files had used up their 1s (limit: --cue-timeout)"); !reflect.DeepEqual(got[files[2]].Diags, want) {
		t.Errorf("the file after: got %v, want %v", got[files[2]].Diags, want)
	}
}

// started is a slog handler that passes on the pid of each child that
// starts evaluating a file.
type started struct{ pids chan int }

func (h started) Enabled(context.Context, slog.Level) bool { return true }
func (h started) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h started) WithGroup(string) slog.Handler            { return h }
func (h started) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "evaluating CUE file" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "pid" {
			h.pids <- int(a.Value.Int64())
		}
		return true
	})
	return nil
}

// TestCancel: ending the context kills the child at once, reaps it, and
// leaves the unfinished files out of the result.
func TestCancel(t *testing.T) {
	dir := writeFiles(t, map[string]string{"a.cue": fmt.Sprintf(valid, "a"), "b-bomb.cue": bomb})
	files := []string{filepath.Join(dir, "a.cue"), filepath.Join(dir, "b-bomb.cue")}
	pids := make(chan int, 2)
	e := evaluator()
	e.Log = slog.New(started{pids})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan map[string]load.FileResult)
	go func() { done <- e.EvalCUE(ctx, load.Options{MaxFileSize: load.MaxFileSize}, files) }()
	<-pids // a.cue
	pid := <-pids
	cancel()
	var got map[string]load.FileResult
	select {
	case got = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("EvalCUE still runs 10s after its context ended")
	}
	if _, ok := got[files[1]]; ok || len(got[files[0]].Documents) != 1 {
		t.Errorf("got %v", got)
	}
	if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
		t.Errorf("child %d still exists (kill 0: %v)", pid, err)
	}
}

// TestCrash: a child that dies on a file costs that file; a child that
// cannot start costs every file, with the reason.
func TestCrash(t *testing.T) {
	// A stand-in child: it announces the first file, then panics as Go
	// does.
	script := `read -r req; f=$(printf '%s' "$req" | sed 's/^{"files":\["\([^"]*\)".*/\1/'); printf '{"start":"%s"}\n' "$f"; echo 'panic: boom' >&2; exit 2`
	e := &Evaluator{Binary: "/bin/sh", Args: []string{"-c", script}}
	got := e.EvalCUE(context.Background(), load.Options{}, []string{"a.cue", "b.cue"})
	for _, f := range []string{"a.cue", "b.cue"} {
		want := load.Diagnostics{{Pos: spec.Pos{File: f, Line: 1, Col: 1}, Message: "the CUE evaluator crashed on this file: exit status 2: panic: boom"}}
		if !reflect.DeepEqual(got[f].Diags, want) {
			t.Errorf("%s: got %v, want %v", f, got[f].Diags, want)
		}
	}
	e = &Evaluator{Binary: "/nonexistent/setpoint"}
	got = e.EvalCUE(context.Background(), load.Options{}, []string{"a.cue"})
	if d := got["a.cue"].Diags; len(d) != 1 || !strings.Contains(d[0].Message, "/nonexistent/setpoint") {
		t.Errorf("got %v", d)
	}
}

// BenchmarkEval measures what the child costs on the shipped specs and the
// test data's .cue files: in process (a compiled Loader at hand) against a
// child per batch (start, compile the schemas, cgroup, pipes).
func BenchmarkEval(b *testing.B) {
	var files []string
	for _, g := range []string{"testdata/*.cue", "../load/testdata/*.cue", "../../specs/*.cue"} {
		m, _ := filepath.Glob(g)
		files = append(files, m...)
	}
	l, err := load.New()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("in-process", func(b *testing.B) {
		for b.Loop() {
			for _, f := range files {
				l.LoadFile(f, func(spec.Document) {})
			}
		}
	})
	b.Run("in-process-with-New", func(b *testing.B) {
		for b.Loop() {
			l, err := load.New()
			if err != nil {
				b.Fatal(err)
			}
			for _, f := range files {
				l.LoadFile(f, func(spec.Document) {})
			}
		}
	})
	cases := []struct {
		name     string
		noCgroup bool
		e        *Evaluator
	}{{"child", false, evaluator()}, {"child-no-cgroup", true, evaluator()}}
	// The setpoint binary starts slower than this test binary (it links
	// every provider): SETPOINT_BIN=path measures it too.
	if bin := os.Getenv("SETPOINT_BIN"); bin != "" {
		cases = append(cases, struct {
			name     string
			noCgroup bool
			e        *Evaluator
		}{"child-setpoint", false, &Evaluator{Binary: bin, Args: []string{"internal", "eval-cue"}}})
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			e := tc.e
			e.noCgroup = tc.noCgroup
			for b.Loop() {
				if got := e.EvalCUE(context.Background(), l.Options(), files); len(got) != len(files) {
					b.Fatalf("%d results", len(got))
				}
			}
		})
	}
}

// BenchmarkCgroup is the cgroup's share of a child's cost: make, bound,
// remove.
func BenchmarkCgroup(b *testing.B) {
	for b.Loop() {
		cg, err := newCgroup(DefaultMemory)
		if err != nil {
			b.Skipf("no cgroup: %v", err)
		}
		if err := cg.remove(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestOutputBound: what the child sends back is bounded like its memory,
// so a small file that expands to a huge document costs the parent no more
// than the bound.
func TestOutputBound(t *testing.T) {
	// A string doubled 17 times: 2 MiB from a file of a few hundred bytes.
	var b strings.Builder
	b.WriteString("apiVersion: \"setpoint.dev/v1alpha1\"\nkind: \"Environment\"\nmetadata: name: \"big\"\nlet a0 = \"abcdefghabcdefgh\"\n")
	for i := 1; i <= 17; i++ {
		fmt.Fprintf(&b, "let a%d = a%d + a%d\n", i, i-1, i-1)
	}
	b.WriteString("spec: providers: [{name: \"x\", config: {s: a17}}]\n")
	big := b.String()
	dir := writeFiles(t, map[string]string{"a.cue": fmt.Sprintf(valid, "a"), "b-big.cue": big})
	files := []string{filepath.Join(dir, "a.cue"), filepath.Join(dir, "b-big.cue")}
	e := evaluator()
	e.Memory = 1 << 20 // 1 MiB: the 2 MiB document passes it
	e.noCgroup, e.noWatchdog = true, true
	got := e.EvalCUE(context.Background(), load.Options{MaxFileSize: load.MaxFileSize}, files)
	if r := got[files[0]]; len(r.Diags) != 0 || len(r.Documents) != 1 {
		t.Errorf("a.cue: %v", r.Diags)
	}
	want := load.Diagnostics{{Pos: spec.Pos{File: files[1], Line: 1, Col: 1}, Message: memoryMessage("1 MiB")}}
	if r := got[files[1]]; !reflect.DeepEqual(r.Diags, want) || len(r.Documents) != 0 {
		t.Errorf("big: got %v, want %v", r.Diags, want)
	}
}
