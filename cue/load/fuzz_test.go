package load

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/cue/spec"
)

// FuzzLoad feeds arbitrary bytes to the loader as YAML and as CUE. It must
// never panic (LoadBytes turns an evaluator panic into an "internal error"
// diagnostic, which this counts as a failure), every diagnostic must name
// its file, every document it accepts must carry a kind and a name, and the
// fast path must agree with whole-document validation.
func FuzzLoad(f *testing.F) {
	var seeds []string
	for _, g := range []string{"../../specs/*.yaml", "../../specs/*.cue", "../../testdata/valid/*.yaml", "../../testdata/invalid/*.yaml"} {
		m, _ := filepath.Glob(g)
		seeds = append(seeds, m...)
	}
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, strings.HasSuffix(s, ".cue"))
	}
	l, err := New()
	if err != nil {
		f.Fatal(err)
	}
	full, err := New()
	if err != nil {
		f.Fatal(err)
	}
	full.NoFastPath = true
	f.Fuzz(func(t *testing.T, data []byte, asCUE bool) {
		name := "fuzz.yaml"
		if asCUE {
			name = "fuzz.cue"
		}
		if dump := os.Getenv("SETPOINT_FUZZ_HANG_DUMP"); dump != "" {
			timer := time.AfterFunc(5*time.Second, func() {
				buf := make([]byte, 1<<20)
				n := runtime.Stack(buf, true)
				_ = os.WriteFile(dump, append(append(data, "\n=====\n"...), buf[:n]...), 0o644)
			})
			defer timer.Stop()
		}
		var docs []spec.Document
		ds := l.LoadBytes(name, data, func(d spec.Document) { docs = append(docs, d) })
		for _, d := range ds {
			if strings.Contains(d.Message, "internal error") {
				t.Fatalf("panic inside the loader: %s", d)
			}
			if d.Pos.File == "" || d.Message == "" {
				t.Fatalf("diagnostic without a file or message: %+v", d)
			}
		}
		// The fast path must agree with whole-document validation.
		bothPaths(t, l, full, name, data)
		for _, d := range docs {
			h := d.Head()
			if h.Kind == "" || h.Metadata.Name == "" || h.Metadata.Namespace == "" || h.Src.Pos.Line == 0 {
				t.Fatalf("accepted a document without kind, name, namespace or position: %+v", h)
			}
		}
	})
}
