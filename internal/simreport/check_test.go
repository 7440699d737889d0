package simreport

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheck: what would make Write fail at the end of a run is found
// before it, without writing anything.
func TestCheck(t *testing.T) {
	root := t.TempDir()
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	inTheWay := filepath.Join(root, "in-the-way")
	if err := os.MkdirAll(filepath.Join(inTheWay, "shop-checkout.png"), 0o755); err != nil {
		t.Fatal(err)
	}
	indexDir := filepath.Join(root, "index-dir")
	if err := os.MkdirAll(filepath.Join(indexDir, "index.html"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A report directory that is a link to a sibling, and a plot that is
	// a link to a directory (the rename replaces the link).
	sibling := filepath.Join(root, "sibling")
	if err := os.MkdirAll(sibling, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sibling", filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(root, filepath.Join(sibling, "shop-checkout.svg")); err != nil {
		t.Fatal(err)
	}
	names := []string{"shop/checkout", "default/fib"}
	for _, c := range []struct {
		name, dir string
		names     []string
		want      string // "" for allowed
	}{
		{"a new directory", filepath.Join(root, "new", "report"), names, ""},
		{"an empty directory", t.TempDir(), names, ""},
		{"a link to a sibling directory", filepath.Join(root, "link"), names, ""},
		{"a file", file, names, file + " is a regular file, not a directory"},
		{"under a file", filepath.Join(file, "report"), names, "cannot make directory " + filepath.Join(file, "report") + ": " + file + " is a regular file, not a directory"},
		{"a directory where a plot goes", inTheWay, names, filepath.Join(inTheWay, "shop-checkout.png") + ` is a directory, where the plot of workload "shop/checkout" goes`},
		{"a directory where the index goes", indexDir, names, "index.html is a directory, where the report's index page goes"},
		{"names that share files", t.TempDir(), []string{"shop/checkout", "Shop--Checkout"}, "would both be written as shop-checkout"},
		{"a name without a file name", t.TempDir(), []string{"/ü/"}, "no letters or digits"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := Check(c.dir, c.names)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(root, "new")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Check made a directory: %v", err)
	}
	// The link leads to a directory Write fills.
	if _, err := Write(filepath.Join(root, "link"), Report{Workloads: []Workload{sampleWorkload("shop/checkout", 10)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(sibling, "index.html")); err != nil {
		t.Errorf("nothing written through the link: %v", err)
	}
}

// TestWriteChecksTheDirectoryFirst: a directory where a plot goes stops
// Write before it writes anything, not after the figures before it.
func TestWriteChecksTheDirectoryFirst(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "shop-zzz.svg"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := Report{Workloads: []Workload{sampleWorkload("shop/checkout", 10), sampleWorkload("shop/zzz", 10)}}
	files, err := Write(dir, r)
	if err == nil || !strings.Contains(err.Error(), "shop-zzz.svg is a directory") {
		t.Fatalf("got %v", err)
	}
	ents, _ := os.ReadDir(dir)
	if len(files) > 0 || len(ents) != 1 {
		t.Errorf("written before the refusal: %v, in the directory %v", files, ents)
	}
}
