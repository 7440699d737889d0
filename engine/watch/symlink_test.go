package watch

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/setpoint-dev/setpoint/cue/load"
)

// publish writes a version of a directory of spec files the way the
// kubelet's atomic writer and git-sync do: into a new directory, then a
// symlink made beside the live one and renamed over it (`ln -s v2 t &&
// mv -T t cur`), then the old target deleted.
func publish(t *testing.T, parent, link, target string, files map[string]string) {
	t.Helper()
	publishAt(t, parent, link, target, files, time.Time{})
}

// publishAt is publish with the new symlink's modification time set to at
// before it is renamed into place (zero: left as made).
func publishAt(t *testing.T, parent, link, target string, files map[string]string, at time.Time) {
	t.Helper()
	dir := filepath.Join(parent, target)
	for name, body := range files {
		write(t, dir, name, body)
	}
	old, _ := os.Readlink(filepath.Join(parent, link))
	tmp := filepath.Join(parent, link+".tmp")
	if err := os.Symlink(target, tmp); err != nil {
		t.Fatal(err)
	}
	if !at.IsZero() {
		ts := []unix.Timespec{unix.NsecToTimespec(at.UnixNano()), unix.NsecToTimespec(at.UnixNano())}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, tmp, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Rename(tmp, filepath.Join(parent, link)); err != nil {
		t.Fatal(err)
	}
	if old != "" {
		if !filepath.IsAbs(old) {
			old = filepath.Join(parent, old)
		}
		if err := os.RemoveAll(old); err != nil {
			t.Fatal(err)
		}
	}
}

// symlinkHarness is a harness on dir with no tick and no tick rescan: only
// file events can bring a change in.
func symlinkHarness(t *testing.T, dir string) *harness {
	t.Helper()
	l, err := load.New()
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{dir: dir, batches: make(chan batch, 100), logs: make(chan logRecord, 10000)}
	h.w = &Watcher{Dir: dir, Loader: l, Debounce: 20 * time.Millisecond, Log: slog.New(logSink{h.logs}), NoTickRescan: true}
	h.w.Reconcile = func(ctx context.Context, set Set, keys []string, reason string) map[string]Result {
		h.batches <- batch{keys: keys, reason: reason, set: set}
		return nil
	}
	return h
}

// untilRev takes batches until x is at rev (a swap may come as more than
// one batch: the new files, then the old target's removal).
func (h *harness) untilRev(t *testing.T, name, want string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case b := <-h.batches:
			if rev(b.set, name) == want {
				return
			}
		case <-deadline:
			t.Fatalf("%s never reached rev %s (now %q)", name, want, rev(h.w.Set(), name))
		}
	}
}

// TestWatchConfigMapVolumeSwaps: a ConfigMap volume's layout (each file a
// symlink through ..data to a timestamped directory) swapped three times,
// each old directory deleted as the kubelet does, is seen by file events
// alone.
func TestWatchConfigMapVolumeSwaps(t *testing.T) {
	root := t.TempDir()
	publish(t, root, "..data", "..2026_11_26_1", map[string]string{"env.yaml": envYAML, "a.yaml": nfr("x", 1)})
	for _, f := range []string{"env.yaml", "a.yaml"} {
		if err := os.Symlink(filepath.Join("..data", f), filepath.Join(root, f)); err != nil {
			t.Fatal(err)
		}
	}
	h := symlinkHarness(t, root)
	h.run(t)
	if b := h.expect(t, "start", key("x")); rev(b.set, "x") != "1" {
		t.Fatalf("start at rev %q", rev(b.set, "x"))
	}
	for i := 2; i <= 4; i++ {
		publish(t, root, "..data", "..2026_11_26_"+string(rune('0'+i)), map[string]string{"env.yaml": envYAML, "a.yaml": nfr("x", i)})
		h.untilRev(t, "x", string(rune('0'+i)))
	}
	// The same specs, not a second copy through the hidden directories.
	if got := len(h.w.Set().Specs); got != 1 {
		t.Fatalf("%d specs in force, want 1", got)
	}
}

// TestWatchGitSyncSwaps: git-sync's layout, the spec root itself a symlink
// (current -> .worktrees/HASH) swapped three times, each old worktree
// deleted; and a root below such a symlink (current/specs).
func TestWatchGitSyncSwaps(t *testing.T) {
	for _, sub := range []string{"", "specs"} {
		t.Run("root="+filepath.Join("current", sub), func(t *testing.T) {
			base := t.TempDir()
			version := func(i int) map[string]string {
				return map[string]string{
					filepath.Join(sub, "env.yaml"):   envYAML,
					filepath.Join(sub, "app/a.yaml"): nfr("x", i),
				}
			}
			publish(t, base, "current", ".worktrees/h1", version(1))
			h := symlinkHarness(t, filepath.Join(base, "current", sub))
			h.run(t)
			if b := h.expect(t, "start", key("x")); rev(b.set, "x") != "1" {
				t.Fatalf("start at rev %q", rev(b.set, "x"))
			}
			for i := 2; i <= 4; i++ {
				publish(t, base, "current", ".worktrees/h"+string(rune('0'+i)), version(i))
				h.untilRev(t, "x", string(rune('0'+i)))
			}
			// After the swaps an in-place edit is still seen: the watch
			// followed the symlink to the new worktree.
			write(t, filepath.Join(base, "current", sub), "app/a.yaml", nfr("x", 9))
			h.untilRev(t, "x", "9")
		})
	}
}

// TestWatchTickRescanIsTheBackstop: a change whose events are not yet
// handled (the debounce is an hour) is found on the tick by digest; with
// the backstop off, the tick reconciles the old version.
func TestWatchTickRescanIsTheBackstop(t *testing.T) {
	for _, off := range []bool{false, true} {
		clk := NewFakeClock(t0)
		h := newHarness(t, clk)
		h.w.Tick = time.Minute
		h.w.Debounce = time.Hour
		h.w.NoTickRescan = off
		write(t, h.dir, "a.yaml", nfr("x", 1))
		h.run(t)
		h.expect(t, "start", key("x"))
		write(t, h.dir, "a.yaml", nfr("x", 2))
		waitDeadlines(t, clk, t0.Add(time.Minute))
		clk.Set(t0.Add(time.Minute))
		b := h.next(t)
		if off {
			if b.reason != "tick" || rev(b.set, "x") != "1" {
				t.Fatalf("backstop off: %q at rev %q, want the tick at rev 1", b.reason, rev(b.set, "x"))
			}
			continue
		}
		if !strings.HasPrefix(b.reason, "edit of a.yaml") || rev(b.set, "x") != "2" {
			t.Fatalf("backstop: %q at rev %q, want the edit at rev 2", b.reason, rev(b.set, "x"))
		}
	}
}

// TestWatchReplacedSpecIsBrokenNotGone: a spec file replaced (in one
// rename) by a link to a file outside the spec directory, a link to a
// FIFO, a FIFO, a symlink loop or a dangling link is not read, and not
// taken for deleted: its last good version stays in force and the set is
// incomplete, as a one-shot plan holds it. The loop does not hang (a file
// written afterwards is seen), and only removing the path removes the
// specs.
func TestWatchReplacedSpecIsBrokenNotGone(t *testing.T) {
	outside := t.TempDir()
	write(t, outside, "evil.yaml", nfr("x", 7))
	fifo := filepath.Join(outside, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := func(target string) func(string) error {
		return func(p string) error { return os.Symlink(target, p) }
	}
	for _, c := range []struct {
		name string
		make func(p string) error
	}{
		{"a link to a file outside", link(filepath.Join(outside, "evil.yaml"))},
		{"a link to a FIFO outside", link(fifo)},
		{"a FIFO", func(p string) error { return syscall.Mkfifo(p, 0o644) }},
		{"a symlink loop", link("a.yaml")},
		{"a dangling link", link("nowhere.yaml")},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, nil)
			write(t, h.dir, "a.yaml", nfr("x", 1))
			h.run(t)
			h.expect(t, "start", key("x"))
			tmp := filepath.Join(h.dir, ".a.tmp")
			if err := c.make(tmp); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, filepath.Join(h.dir, "a.yaml")); err != nil {
				t.Fatal(err)
			}
			// The edit after the replacement is handled after it: events
			// come in order.
			write(t, h.dir, "b.yaml", nfr("y", 1))
			// next fails the test after its deadline: a hung loop sends none.
			b := h.next(t)
			for ; rev(b.set, "y") != "1"; b = h.next(t) {
				if rev(b.set, "x") != "1" {
					t.Fatalf("x at rev %q in a batch for %q: want the last good version (1) in force", rev(b.set, "x"), b.reason)
				}
			}
			if rev(b.set, "x") != "1" || !b.set.Incomplete {
				t.Fatalf("x at rev %q, incomplete %v: want the last good version (1) in force and the set incomplete", rev(b.set, "x"), b.set.Incomplete)
			}
			r := h.waitLog(t, "spec path not read: broken, not gone; the last good version keeps running", "a.yaml")
			if strings.Contains(r.attrs["error"], "shop") {
				t.Fatalf("quoted what the link leads to: %s", r.attrs["error"])
			}
			if err := os.Remove(filepath.Join(h.dir, "a.yaml")); err != nil {
				t.Fatal(err)
			}
			if b := h.expect(t, "removal of a.yaml", key("x")); rev(b.set, "x") != "" || b.set.Incomplete {
				t.Fatalf("the path removed: x at rev %q, incomplete %v; want it gone and the set complete", rev(b.set, "x"), b.set.Incomplete)
			}
		})
	}
}

// TestWatchDirectoryLinkedOutsideHoldsItsSpecs: a subdirectory moved out of
// the spec directory and linked back in its place is refused by the walk
// (a link outside): the specs of its files are broken, not gone, and
// nothing there is read; removing the link removes them.
func TestWatchDirectoryLinkedOutsideHoldsItsSpecs(t *testing.T) {
	outside := t.TempDir()
	h := newHarness(t, nil)
	write(t, h.dir, "sub/a.yaml", nfr("x", 1))
	h.run(t)
	h.expect(t, "start", key("x"))
	moved := filepath.Join(outside, "sub")
	if err := os.Rename(filepath.Join(h.dir, "sub"), moved); err != nil {
		t.Fatal(err)
	}
	write(t, moved, "a.yaml", nfr("x", 7))
	if err := os.Symlink(moved, filepath.Join(h.dir, "sub")); err != nil {
		t.Fatal(err)
	}
	write(t, h.dir, "b.yaml", nfr("y", 1))
	b := h.next(t)
	for ; rev(b.set, "y") != "1"; b = h.next(t) {
		if rev(b.set, "x") != "1" {
			t.Fatalf("x at rev %q in a batch for %q: want the last good version (1) in force", rev(b.set, "x"), b.reason)
		}
	}
	if rev(b.set, "x") != "1" || !b.set.Incomplete {
		t.Fatalf("x at rev %q, incomplete %v: want the last good version (1) in force and the set incomplete", rev(b.set, "x"), b.set.Incomplete)
	}
	if err := os.Remove(filepath.Join(h.dir, "sub")); err != nil {
		t.Fatal(err)
	}
	if b := h.expect(t, "removal of sub/a.yaml", key("x")); rev(b.set, "x") != "" || b.set.Incomplete {
		t.Fatalf("the link removed: x at rev %q, incomplete %v; want it gone and the set complete", rev(b.set, "x"), b.set.Incomplete)
	}
}

// TestScanBoundsDirectories: the rescan enters no more directories than
// the loader's walk would.
func TestScanBoundsDirectories(t *testing.T) {
	defer func(n int) { load.MaxDirs = n }(load.MaxDirs)
	load.MaxDirs = 5
	root := t.TempDir()
	for i := range 20 {
		write(t, root, filepath.Join("d"+string(rune('a'+i)), "a.yaml"), nfr("x", 1))
	}
	sc, err := scanTree(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.dirs) > 5 {
		t.Fatalf("%d directories entered, want at most 5", len(sc.dirs))
	}
}
