package load

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/cue/schema"
	"github.com/setpoint-dev/setpoint/cue/spec"
)

// cueBinary finds the cue CLI that `make testenv` installs, and checks it is
// the version of the library setpoint embeds: parity with another version
// would prove nothing.
func cueBinary(t *testing.T) string {
	t.Helper()
	gomod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`cuelang.org/go (v\S+)`).FindSubmatch(gomod)
	if m == nil {
		t.Fatal("cuelang.org/go not in go.mod")
	}
	want := string(m[1])
	candidates := []string{os.Getenv("CUE")}
	if p, err := exec.LookPath("cue"); err == nil {
		candidates = append(candidates, p)
	}
	if gopath, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		candidates = append(candidates, filepath.Join(strings.TrimSpace(string(gopath)), "bin", "cue"))
	}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		out, err := exec.Command(c, "version").Output()
		if err == nil && strings.Contains(string(out), want) {
			return c
		}
	}
	t.Fatalf("the cue CLI %s is not installed; run `make testenv` (go install cuelang.org/go/cmd/cue@%s)", want, want)
	return ""
}

// splitYAML cuts a YAML stream at its "---" lines, so each document can be
// given to `cue vet` alone (it stops at a stream's first failing document).
func splitYAML(src []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	for _, line := range bytes.SplitAfter(src, []byte("\n")) {
		if strings.TrimSpace(string(line)) == "---" {
			docs = append(docs, bytes.Clone(cur.Bytes()))
			cur.Reset()
			continue
		}
		cur.Write(line)
	}
	return append(docs, cur.Bytes())
}

// TestCueVetParity runs `cue vet -c -d '#Spec'` with the embedded schemas
// over every YAML document of specs/ and testdata/, one document at a time,
// and asserts that it and the loader accept and reject the same documents.
// Cross-document rules are setpoint-only and are not part of this.
func TestCueVetParity(t *testing.T) {
	cue := cueBinary(t)
	schemaDir := t.TempDir()
	var schemaFiles []string
	for _, n := range schema.Names() {
		b, err := schema.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(schemaDir, n)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		schemaFiles = append(schemaFiles, p)
	}
	var inputs []string
	for _, g := range []string{"../../specs/*.yaml", "../../testdata/valid/*.yaml", "../../testdata/invalid/*.yaml"} {
		m, _ := filepath.Glob(g)
		inputs = append(inputs, m...)
	}
	l := newLoader(t)
	l.SchemaOnly = true // Go-only rules are not cue vet's business
	docDir := t.TempDir()
	accepted, rejected := 0, 0
	for _, in := range inputs {
		src, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range splitYAML(src) {
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			name := filepath.Join(docDir, strings.TrimSuffix(filepath.Base(in), ".yaml")+"-"+string(rune('a'+i))+".yaml")
			if err := os.WriteFile(name, doc, 0o644); err != nil {
				t.Fatal(err)
			}
			ours := l.LoadBytes(name, doc, func(spec.Document) {})
			args := append([]string{"vet", "-c", "-d", "#Spec"}, schemaFiles...)
			out, err := exec.Command(cue, append(args, name)...).CombinedOutput()
			theirsOK := err == nil
			if _, isExit := err.(*exec.ExitError); err != nil && !isExit {
				t.Fatalf("running cue: %v", err)
			}
			if theirsOK != (len(ours) == 0) {
				t.Errorf("%s document %d: cue vet accepted=%v, setpoint accepted=%v\ncue vet: %s\nsetpoint: %v", in, i+1, theirsOK, len(ours) == 0, out, ours)
			}
			if theirsOK {
				accepted++
			} else {
				rejected++
			}
		}
	}
	if accepted < 5 || rejected < 10 {
		t.Fatalf("the corpus should hold both kinds of documents: %d accepted, %d rejected", accepted, rejected)
	}
	t.Logf("cue vet and setpoint agree on %d accepted and %d rejected documents", accepted, rejected)
}
