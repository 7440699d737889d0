package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
