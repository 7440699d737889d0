package load

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/setpoint-dev/setpoint/cue/spec"
)

// TestParallelLoadIsOneLoaders: a directory large enough to load on more
// than one core gives the documents, their order and the diagnostics one
// loader gives, valid files and broken ones alike.
func TestParallelLoadIsOneLoaders(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("env.yaml", "apiVersion: setpoint.dev/v1alpha1\nkind: Environment\nmetadata: {name: e}\nspec:\n  providers: [{name: kubernetes}]\n")
	for i := range 3 * parallelMin {
		body := nfr(fmt.Sprintf("w%03d", i), fmt.Sprintf("w%03d", i)) + fmt.Sprintf("  throughput: {minRPS: %d}\n", i+1)
		switch i % 17 {
		case 3:
			body += "  bogus: 1\n"
		case 7:
			body = "kind: [\n"
		case 11:
			body += "---\n" + nfr("w000", "dup")
		}
		write(fmt.Sprintf("f%03d.yaml", i), body)
	}
	load := func(workers int) *Result {
		defer func(w int) { loadWorkers = w }(loadWorkers)
		loadWorkers = workers
		return newLoader(t).LoadDir(dir)
	}
	one, many := load(1), load(4)
	if one.Files != many.Files || len(one.Documents) != len(many.Documents) || one.Diags.Error() != many.Diags.Error() {
		t.Fatalf("one loader: %d files, %d documents\n%v\nfour: %d files, %d documents\n%v", one.Files, len(one.Documents), one.Diags, many.Files, len(many.Documents), many.Diags)
	}
	for i := range one.Documents {
		a, b := one.Documents[i], many.Documents[i]
		if spec.Digest(a) != spec.Digest(b) || a.Head().Src.Pos != b.Head().Src.Pos {
			t.Fatalf("document %d: %s at %v, %s at %v", i, a.Head().ID(), a.Head().Src.Pos, b.Head().ID(), b.Head().Src.Pos)
		}
	}
	if len(one.Diags) < 20 || len(one.Documents) < 150 {
		t.Fatalf("too little compared: %d documents, %d diagnostics", len(one.Documents), len(one.Diags))
	}
}
