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
	// A page the generator writes that is not committed (checks.md
	// deleted) is stale too.
	made, _ := filepath.Glob(filepath.Join(dir, "*.md"))
	for _, f := range made {
		if _, err := os.Stat(filepath.Join("../../docs/kinds", filepath.Base(f))); err != nil {
			t.Errorf("docs/kinds/%s is not committed: run make docs", filepath.Base(f))
		}
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

// TestEveryFieldDocumented: every struct the schemas define (a kind's, a
// list element's, a provider's configuration) has all its fields as rows
// of a kind's page, together under one path: for #NodePool, some P with
// P.name, P.minCPUs, … all rows. A struct the walk cannot reach (behind a
// comprehension, in a list it does not descend) fails here.
func TestEveryFieldDocumented(t *testing.T) {
	root, err := schema.CompileWithComments(cuecontext.New())
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	pages, _ := filepath.Glob("../../docs/kinds/*.md")
	for _, f := range pages {
		b, _ := os.ReadFile(f)
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "| `") {
				name, _, _ := strings.Cut(strings.TrimPrefix(l, "| `"), "`")
				rows[name] = true
			}
		}
	}
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
		var names []string
		for fields.Next() {
			names = append(names, strings.TrimRight(fields.Selector().String(), "?!"))
		}
		if len(names) == 0 {
			continue
		}
		checked++
		// Where the first field is a row, the prefix is a candidate.
		found := false
		for row := range rows {
			prefix, ok := strings.CutSuffix(row, names[0])
			if !ok || (prefix != "" && !strings.HasSuffix(prefix, ".")) {
				continue
			}
			all := true
			for _, n := range names[1:] {
				all = all && rows[prefix+n]
			}
			if all {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("%s: no path on the pages of docs/kinds has all its fields %v", defs.Selector(), names)
		}
	}
	if checked < 20 {
		t.Fatalf("only %d structs checked", checked)
	}
}
