package load_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/cue/load"
)

// block is a fenced YAML or CUE block of a Markdown file, with the HTML
// comment just above it, if any.
var block = regexp.MustCompile("(?s)(<!-- *([a-z-]+) *-->\\s*)?```(yaml|cue)\\n(.*?)```")

const docsEnvironment = `apiVersion: setpoint.dev/v1alpha1
kind: Environment
metadata: {name: docs}
spec:
  providers: [{name: kubernetes}]
  signals: {default: prometheus, prometheus: {url: "http://prometheus.monitoring.svc:9090"}}
`

// Every spec example in the README and docs/ validates, unless the comment
// above it says <!-- invalid --> (an example of a mistake), in which case
// it must not: docs that lie fail.
func TestDocsExamplesValidate(t *testing.T) {
	files := []string{"../../README.md"}
	err := filepath.WalkDir("../../docs", func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	l, err := load.New()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range block.FindAllStringSubmatch(string(b), -1) {
			mark, lang, body := m[2], m[3], m[4]
			if !strings.Contains(body, "apiVersion: setpoint.dev/") && !strings.Contains(body, `apiVersion: "setpoint.dev/`) {
				continue // not a spec (a kustomization, a workflow)
			}
			dir := t.TempDir()
			name := "example." + lang
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(body, "traces/azure-llm-conv-2023.csv") {
				// The shipped example's trace, beside it as in specs/.
				tr, err := os.ReadFile("../../specs/traces/azure-llm-conv-2023.csv")
				if err != nil {
					t.Fatal(err)
				}
				if err := os.MkdirAll(filepath.Join(dir, "traces"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "traces", "azure-llm-conv-2023.csv"), tr, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if !strings.Contains(body, "kind: Environment") {
				// An example of one kind: in a directory with an Environment
				// for a cluster.
				if err := os.WriteFile(filepath.Join(dir, "env.yaml"), []byte(docsEnvironment), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			r := l.LoadDir(dir)
			n++
			switch {
			case mark == "invalid" && len(r.Diags) == 0:
				t.Errorf("%s, block %d: marked invalid, but it validates", f, i+1)
			case mark != "invalid" && len(r.Diags) > 0:
				t.Errorf("%s, block %d does not validate: %v\n%s", f, i+1, r.Diags, body)
			}
		}
	}
	if n < 6 {
		t.Fatalf("only %d spec examples found in %d files: the pattern has stopped matching", n, len(files))
	}
	t.Logf("%d spec examples in %d files", n, len(files))
}
