package load

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/setpoint-dev/setpoint/cue/spec"
)

// fakeCUE stands for the child process: it loads in process with a loader
// of its own and records what it was asked; after, if set, runs once it is
// done (to end the context at a known point).
type fakeCUE struct {
	asked [][]string
	after func()
}

func (f *fakeCUE) EvalCUE(_ context.Context, opts Options, files []string) map[string]FileResult {
	f.asked = append(f.asked, files)
	l, err := New()
	if err != nil {
		panic(err)
	}
	l.SetOptions(opts)
	out := map[string]FileResult{}
	for _, p := range files {
		var fr FileResult
		fr.Diags = l.LoadFile(p, func(d spec.Document) { fr.Documents = append(fr.Documents, d) })
		out[p] = fr
	}
	if f.after != nil {
		f.after()
	}
	return out
}

func specDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"a.nfr.cue":    "apiVersion: \"setpoint.dev/v1alpha1\"\nkind: \"NFR\"\nmetadata: name: \"a\"\nspec: target: {kind: \"Deployment\", name: \"a\"}\n",
		"b.yaml":       "apiVersion: setpoint.dev/v1alpha1\nkind: Environment\nmetadata: {name: prod}\nspec:\n  providers: [{name: sim}]\n",
		"c.nfr.yaml":   "apiVersion: setpoint.dev/v1alpha1\nkind: NFR\nmetadata: {name: c}\nspec: {target: {kind: Deployment, name: c}}\n",
		"d.nfr.cue":    "apiVersion: \"setpoint.dev/v1alpha1\"\nkind: \"NFR\"\nmetadata: name: \"d\"\nspec: target: {kind: \"Deployment\", name: \"d\"}\n",
		"e.broken.cue": "kind: \"NFR\"\nmetadata: name: 1\n",
	}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestLoadSendsCUEFilesToTheEvaluator: one batch of every .cue file, the
// YAML loaded here, and a result equal to an in-process Load, in order.
func TestLoadSendsCUEFilesToTheEvaluator(t *testing.T) {
	dir := specDir(t)
	plain, err := New()
	if err != nil {
		t.Fatal(err)
	}
	want := plain.Load(dir)
	l, err := New()
	if err != nil {
		t.Fatal(err)
	}
	fake := &fakeCUE{}
	l.CUE = fake
	got := l.Load(dir)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	batch := []string{filepath.Join(dir, "a.nfr.cue"), filepath.Join(dir, "d.nfr.cue"), filepath.Join(dir, "e.broken.cue")}
	if !reflect.DeepEqual(fake.asked, [][]string{batch}) {
		t.Errorf("asked %v, want one batch %v", fake.asked, batch)
	}
	// LoadFile alone sends a .cue file too (watch reloads one file).
	var docs []spec.Document
	l.LoadFile(batch[0], func(d spec.Document) { docs = append(docs, d) })
	if len(fake.asked) != 2 || len(docs) != 1 {
		t.Errorf("LoadFile: asked %v, %d documents", fake.asked, len(docs))
	}
}

// TestLoadStopsWhenItsContextEnds: an interrupt stops Load before the
// next file, says so once, and skips the cross-document checks.
func TestLoadStopsWhenItsContextEnds(t *testing.T) {
	dir := specDir(t)
	l, err := New()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l.Ctx = ctx
	// The batch ends the context once it is done; Load waits for it at
	// a.nfr.cue, so b.yaml is the first file it must not load.
	l.CUE = &fakeCUE{after: cancel}
	r := l.Load(dir)
	want := Diagnostics{{Pos: spec.Pos{File: filepath.Join(dir, "b.yaml")}, Message: "interrupted before this file was checked; 3 more files were not checked either"}}
	if !reflect.DeepEqual(r.Diags, want) || r.Files != 1 || len(r.Documents) != 1 {
		t.Errorf("got %d files, %d documents, %v; want 1, 1, %v", r.Files, len(r.Documents), r.Diags, want)
	}
	// Without an evaluator the YAML walk stops as well.
	l.CUE = nil
	r = l.Load(dir)
	want = Diagnostics{{Pos: spec.Pos{File: filepath.Join(dir, "a.nfr.cue")}, Message: "interrupted before this file was checked; 4 more files were not checked either"}}
	if !reflect.DeepEqual(r.Diags, want) || r.Files != 0 {
		t.Errorf("got %d files, %v; want 0, %v", r.Files, r.Diags, want)
	}
}
