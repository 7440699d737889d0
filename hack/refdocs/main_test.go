package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"

	"github.com/setpoint-dev/setpoint/cue/schema"
)

// The kinds' pages are current (make docs): every field of every schema
// is on its kind's page, with its type, default and comment, and the
// example is the shipped one. The hand-written parts around the markers
// are kept.
func TestKindPagesCurrent(t *testing.T) {
	committed, _ := filepath.Glob("../../docs/kinds/*.md")
	if len(committed) < 7 {
		t.Fatalf("only %d pages", len(committed))
	}
	dir := t.TempDir()
	for _, f := range committed {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := run(dir, "../../specs"); err != nil {
		t.Fatal(err)
	}
	for _, f := range committed {
		want, _ := os.ReadFile(filepath.Join(dir, filepath.Base(f)))
		got, _ := os.ReadFile(f)
		if !bytes.Equal(got, want) {
			t.Errorf("docs/kinds/%s is stale: run make docs and commit", filepath.Base(f))
		}
	}
	// A field the schema has is on the page (one the decider reads deep
	// down, as a check that the walk goes all the way).
	nfr, _ := os.ReadFile("../../docs/kinds/nfr.md")
	if !strings.Contains(string(nfr), "| `spec.memory.inPlaceFallback` |") {
		t.Fatal("spec.memory.inPlaceFallback is not on the NFR page")
	}
}

// TestEveryFieldDocumented: every field of every struct the schemas define
// (a kind's, a list element's, a provider's configuration) is a row of a
// kind's page. A field the walk cannot reach (behind a comprehension, in a
// list it does not descend) fails here.
func TestEveryFieldDocumented(t *testing.T) {
	root, err := schema.CompileWithComments(cuecontext.New())
	if err != nil {
		t.Fatal(err)
	}
	var rows strings.Builder
	pages, _ := filepath.Glob("../../docs/kinds/*.md")
	for _, f := range pages {
		b, _ := os.ReadFile(f)
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "| `") {
				name, _, _ := strings.Cut(strings.TrimPrefix(l, "| `"), "`")
				rows.WriteString("." + name + "\n")
			}
		}
	}
	documented := rows.String()
	defs, err := root.Fields(cue.Definitions(true))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for defs.Next() {
		d := defs.Value()
		if !defs.Selector().IsDefinition() || defs.Selector().String() == "#Kinds" || d.IncompleteKind() != cue.StructKind {
			continue
		}
		fields, err := d.Fields(cue.Optional(true))
		if err != nil {
			continue
		}
		for fields.Next() {
			name := strings.TrimRight(fields.Selector().String(), "?!")
			checked++
			if !strings.Contains(documented, "."+name+"\n") {
				t.Errorf("%s.%s is on no page of docs/kinds", defs.Selector(), name)
			}
		}
	}
	if checked < 100 {
		t.Fatalf("only %d fields checked", checked)
	}
}
