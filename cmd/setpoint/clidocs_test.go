package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The committed CLI reference is what the commands say now (make docs).
func TestCLIDocsCurrent(t *testing.T) {
	dir := t.TempDir()
	if err := writeCLIDocs(dir); err != nil {
		t.Fatal(err)
	}
	fresh, _ := filepath.Glob(filepath.Join(dir, "*.md"))
	committed, _ := filepath.Glob("../../docs/cli/*.md")
	if len(fresh) < 10 || len(fresh) != len(committed) {
		t.Fatalf("%d pages generated, %d committed: run make docs and commit", len(fresh), len(committed))
	}
	for _, f := range fresh {
		want, _ := os.ReadFile(f)
		got, err := os.ReadFile(filepath.Join("../../docs/cli", filepath.Base(f)))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("docs/cli/%s is stale: run make docs and commit", filepath.Base(f))
		}
	}
}
