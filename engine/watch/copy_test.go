package watch

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestWatchCopyTime: a ConfigMap volume's set is as current as the
// kubelet's last swap of it (its ..data symlink's time), once the swap is
// whole (every file of the new version linked).
func TestWatchCopyTime(t *testing.T) {
	root := t.TempDir()
	link := func(names ...string) {
		for _, f := range names {
			if err := os.Symlink(filepath.Join("..data", f), filepath.Join(root, f)); err != nil {
				t.Fatal(err)
			}
		}
	}
	t1 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	publishAt(t, root, "..data", "..v1", map[string]string{"env.yaml": envYAML, "a.yaml": nfr("x", 1), "b.yaml": nfr("y", 1)}, t1)
	link("env.yaml", "a.yaml", "b.yaml")
	h := symlinkHarness(t, root)
	h.run(t)
	if b := h.expect(t, "start", key("x"), key("y")); !b.set.At.Equal(t1) {
		t.Fatalf("start: at %v, want %v", b.set.At, t1)
	}
	until := func(what string, cond func(Set) bool) Set {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for {
			select {
			case b := <-h.batches:
				if cond(b.set) {
					return b.set
				}
			case <-deadline:
				t.Fatalf("never %s", what)
			}
		}
	}

	// y deleted at the source: the kubelet's next version lacks it.
	t2 := t1.Add(time.Minute)
	publishAt(t, root, "..data", "..v2", map[string]string{"env.yaml": envYAML, "a.yaml": nfr("x", 2)}, t2)
	if err := os.Remove(filepath.Join(root, "b.yaml")); err != nil {
		t.Fatal(err)
	}
	s := until("saw y go", func(s Set) bool { return rev(s, "x") == "2" && rev(s, "y") == "" })
	if !s.At.Equal(t2) {
		t.Fatalf("after y's removal: at %v, want %v", s.At, t2)
	}

	// y back, in a swap whose link for it comes after (as the kubelet
	// makes them): a scan between the two is of a half-done swap, which
	// says nothing of the set's age.
	t3 := t2.Add(time.Minute)
	publishAt(t, root, "..data", "..v3", map[string]string{"env.yaml": envYAML, "a.yaml": nfr("x", 2), "b.yaml": nfr("y", 3)}, t3)
	if at := copyTime(root, t0); !at.IsZero() {
		t.Fatalf("a half-done swap: %v, want no time", at)
	}
	link("b.yaml")
	if at := copyTime(root, t0); !at.Equal(t3) {
		t.Fatalf("the swap done: %v, want %v", at, t3)
	}
	s = until("saw y back", func(s Set) bool { return rev(s, "y") == "3" })
	if !s.At.Equal(t3) {
		t.Fatalf("after y's return: at %v, want %v", s.At, t3)
	}
}

// TestWatchPlainDirectoryCopyTime: a plain directory is its own source: its
// set is as current as the time it was last scanned whole.
func TestWatchPlainDirectoryCopyTime(t *testing.T) {
	h := newHarness(t, nil)
	write(t, h.dir, "a.yaml", nfr("x", 1))
	h.run(t)
	if b := h.expect(t, "start", key("x")); !b.set.At.Equal(t0) {
		t.Fatalf("start: at %v, want the wall's %v", b.set.At, t0)
	}
}
