package watch

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestWatchCopyTime: a ConfigMap volume's set is as current as the
// kubelet's last swap of it (its ..data symlink's time), and names the
// specs it saw removed until they come back.
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
	if b := h.expect(t, "start", key("x"), key("y")); !b.set.At.Equal(t1) || len(b.set.Left) != 0 {
		t.Fatalf("start: at %v (want %v), left %v", b.set.At, t1, b.set.Left)
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
	if !s.At.Equal(t2) || !maps.Equal(s.Left, map[string]bool{key("y"): true}) {
		t.Fatalf("after y's removal: at %v (want %v), left %v", s.At, t2, s.Left)
	}

	// y back: no longer left.
	t3 := t2.Add(time.Minute)
	publishAt(t, root, "..data", "..v3", map[string]string{"env.yaml": envYAML, "a.yaml": nfr("x", 2), "b.yaml": nfr("y", 3)}, t3)
	link("b.yaml")
	s = until("saw y back", func(s Set) bool { return rev(s, "y") == "3" })
	if !s.At.Equal(t3) || len(s.Left) != 0 {
		t.Fatalf("after y's return: at %v (want %v), left %v", s.At, t3, s.Left)
	}
}

// TestWatchPlainDirectoryCopyTime: a plain directory is its own source: its
// set is as current as the time it was read.
func TestWatchPlainDirectoryCopyTime(t *testing.T) {
	h := newHarness(t, nil)
	write(t, h.dir, "a.yaml", nfr("x", 1))
	write(t, h.dir, "b.yaml", nfr("y", 1))
	h.run(t)
	if b := h.expect(t, "start", key("x"), key("y")); !b.set.At.Equal(t0) {
		t.Fatalf("start: at %v, want the wall's %v", b.set.At, t0)
	}
	if err := os.Remove(filepath.Join(h.dir, "b.yaml")); err != nil {
		t.Fatal(err)
	}
	if b := h.expect(t, "removal of b.yaml", key("y")); !maps.Equal(b.set.Left, map[string]bool{key("y"): true}) {
		t.Fatalf("left %v", b.set.Left)
	}
}

// TestLeftIsBounded: past maxLeft specs seen removed, the oldest are
// forgotten.
func TestLeftIsBounded(t *testing.T) {
	clk := NewFakeClock(t0)
	w := &Watcher{wall: clk}
	var first, second []string
	for i := range maxLeft {
		first = append(first, fmt.Sprintf("NFR/a/%05d", i))
		second = append(second, fmt.Sprintf("NFR/b/%05d", i))
	}
	w.noteLeft(&first)
	clk.Set(t0.Add(time.Second))
	newer := second[:10]
	w.noteLeft(&newer)
	if len(w.left) != maxLeft {
		t.Fatalf("%d remembered, want %d", len(w.left), maxLeft)
	}
	for _, id := range append(first[10:], second[:10]...) {
		if _, ok := w.left[id]; !ok {
			t.Fatalf("%s forgotten, though newer than others kept", id)
		}
	}
	if got := slices.Sorted(maps.Keys(w.left))[0]; got != first[10] {
		t.Fatalf("oldest kept %s, want %s", got, first[10])
	}
}
