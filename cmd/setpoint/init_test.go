package main

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// init writes a directory that validates and plans as written (sim), or
// validates (kubernetes: its plan needs your cluster); it writes nothing
// when any of its files is there already.
func TestInit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "start")
	if out, errOut, code := runCLI(t, "init", dir); code != 0 || !strings.Contains(out, "setpoint plan "+dir) {
		t.Fatalf("init: exit %d\n%s\n%s", code, out, errOut)
	}
	if out, errOut, code := runCLI(t, "validate", dir); code != 0 {
		t.Fatalf("validate: exit %d\n%s\n%s", code, out, errOut)
	}
	if out, errOut, code := runCLI(t, "plan", dir); code != 0 || !strings.Contains(out, "sim:HorizontalPodAutoscaler/shop/web") {
		t.Fatalf("plan: exit %d\n%s\n%s", code, out, errOut)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "traces", "README.md")); err != nil || !strings.Contains(string(b), "CC-BY-4.0") {
		t.Fatalf("the trace's attribution: %v", err)
	}
	before, _ := os.ReadFile(filepath.Join(dir, "web.nfr.yaml"))
	if _, errOut, code := runCLI(t, "init", dir); code != 1 || !strings.Contains(errOut, "not writing over") {
		t.Fatalf("init over itself: exit %d, %s", code, errOut)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "web.nfr.yaml")); string(after) != string(before) {
		t.Fatal("init wrote over a file")
	}

	// One of its files there already: none written.
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "web.nfr.yaml"), []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runCLI(t, "init", "--provider", "kubernetes", other); code != 1 || !strings.Contains(errOut, "web.nfr.yaml") {
		t.Fatalf("init beside a file of its own name: exit %d, %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(other, "setpoint.yaml")); !os.IsNotExist(err) {
		t.Fatalf("init wrote part of its files: %v", err)
	}

	kube := filepath.Join(t.TempDir(), "kube")
	if out, errOut, code := runCLI(t, "init", "--provider", "kubernetes", kube); code != 0 {
		t.Fatalf("init --provider kubernetes: exit %d\n%s\n%s", code, out, errOut)
	}
	if out, errOut, code := runCLI(t, "validate", kube); code != 0 {
		t.Fatalf("validate the kubernetes start: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, errOut, code := runCLI(t, "init", "--provider", "nomad", t.TempDir()); code != 1 || !strings.Contains(errOut, "want sim or kubernetes") {
		t.Fatalf("--provider nomad: exit %d, %s", code, errOut)
	}
}

// tree lists what is under root: each path with its file's content, "dir"
// or its link's target.
func tree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			out[rel] = "link to " + target
			return err
		case d.IsDir():
			out[rel] = "dir"
		default:
			b, err := os.ReadFile(p)
			out[rel] = string(b)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestInitFailureMidway: a failure at any step, writing or moving into
// place, leaves the directory and what is beside it as they were, and a
// re-run then writes every file: into a directory that does not exist
// yet, and into one with files of its user's (and a traces/ of theirs).
func TestInitFailureMidway(t *testing.T) {
	files, err := starterFiles("sim")
	if err != nil {
		t.Fatal(err)
	}
	injected := errors.New("injected failure")
	for _, c := range []struct {
		name  string
		setup func(t *testing.T, parent string) (dir string)
	}{
		{"a new directory", func(t *testing.T, parent string) string { return filepath.Join(parent, "new", "start") }},
		{"an existing directory", func(t *testing.T, parent string) string {
			dir := filepath.Join(parent, "start")
			if err := os.MkdirAll(filepath.Join(dir, "traces"), 0o755); err != nil {
				t.Fatal(err)
			}
			for name, body := range map[string]string{"notes.md": "mine\n", "traces/other.csv": "t,v\n"} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			return dir
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Cleanup(func() { initHook = nil })
			failed := 0
			for n := 1; ; n++ {
				parent := t.TempDir()
				dir := c.setup(t, parent)
				before := tree(t, parent)
				steps := 0
				initHook = func(string) error {
					if steps++; steps == n {
						return injected
					}
					return nil
				}
				err := writeNew(dir, files)
				initHook = nil
				if steps < n {
					// Every step passed: the failures covered them all.
					if err != nil {
						t.Fatalf("without a failure: %v", err)
					}
					break
				}
				if !errors.Is(err, injected) {
					t.Fatalf("failing step %d: %v, want the injected failure", n, err)
				}
				failed++
				if after := tree(t, parent); !maps.Equal(after, before) {
					t.Fatalf("failing step %d left %v\nwhere there was %v", n, slices.Sorted(maps.Keys(after)), slices.Sorted(maps.Keys(before)))
				}
				if err := writeNew(dir, files); err != nil {
					t.Fatalf("the re-run after failing step %d: %v", n, err)
				}
				got := tree(t, dir)
				for name, body := range files {
					if got[filepath.FromSlash(name)] != string(body) {
						t.Fatalf("the re-run after failing step %d: %s not written", n, name)
					}
				}
			}
			// Each file is written, then moved in: failures in both.
			if failed <= len(files) {
				t.Fatalf("only %d steps failed, of more than %d", failed, len(files))
			}
		})
	}
}

// TestInitSymlinkInside: a traces/ that is a link is refused by name, and
// nothing is written, through it or beside it.
func TestInitSymlinkInside(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	link := filepath.Join(dir, "traces")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runCLI(t, "init", dir)
	if want := fmt.Sprintf("%q is a symbolic link", link); code != 1 || !strings.Contains(errOut, want) {
		t.Fatalf("init with traces a link: exit %d, %s; want it refused: %s", code, errOut, want)
	}
	if got := tree(t, outside); len(got) != 0 {
		t.Fatalf("written through the link: %v", got)
	}
	if got := tree(t, dir); len(got) != 1 {
		t.Fatalf("written beside the link: %v", got)
	}
}

// TestInitNotADirectory: a file where the directory would be is named
// plainly, whether it is DIR or a directory on its way.
func TestInitNotADirectory(t *testing.T) {
	f := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(f, []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{f, filepath.Join(f, "sub")} {
		_, errOut, code := runCLI(t, "init", dir)
		if want := fmt.Sprintf("%q exists and is not a directory", f); code != 1 || !strings.Contains(errOut, want) {
			t.Errorf("init %s: exit %d, %s; want: %s", dir, code, errOut, want)
		}
	}
	if b, err := os.ReadFile(f); err != nil || string(b) != "mine\n" {
		t.Fatalf("the file: %q, %v", b, err)
	}
	if got := tree(t, filepath.Dir(f)); len(got) != 1 {
		t.Fatalf("written beside the file: %v", got)
	}
}
