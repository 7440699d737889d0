package confine

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestInside(t *testing.T) {
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(tmp, "specs")
	outside := filepath.Join(tmp, "outside")
	for _, d := range []string{filepath.Join(root, "sub"), filepath.Join(root, ".setpoint"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(root, "trace.csv"), nil, 0o644))
	must(os.WriteFile(filepath.Join(outside, "secret"), nil, 0o644))
	must(os.Symlink(outside, filepath.Join(root, "out")))                            // a link out
	must(os.Symlink(filepath.Join(root, "sub"), filepath.Join(root, "in")))          // a link that stays in
	must(os.Symlink(filepath.Join(outside, "secret"), filepath.Join(root, "x.csv"))) // a file link out
	must(os.Symlink("loop", filepath.Join(root, "loop")))
	must(os.Symlink("/nonexistent/x", filepath.Join(root, ".setpoint", "dangling.json")))
	must(os.Symlink("/nonexistent-dir", filepath.Join(root, "danglingdir")))

	r, err := NewRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		base, p string
		want    string // resolved, when inside
		outside bool
		err     bool
	}{
		{root, "trace.csv", filepath.Join(root, "trace.csv"), false, false},
		{root, ".setpoint/state.json", filepath.Join(root, ".setpoint/state.json"), false, false},
		{root, ".setpoint/new/dir/state.json", filepath.Join(root, ".setpoint/new/dir/state.json"), false, false},
		{filepath.Join(root, "sub"), "../trace.csv", filepath.Join(root, "trace.csv"), false, false},
		{root, "in/../trace.csv", filepath.Join(root, "trace.csv"), false, false},
		{root, ".", root, false, false},
		{root, "../outside/secret", "", true, false},
		{root, "../../../../../../etc/passwd", "", true, false},
		{root, "/etc/shadow", "", true, false},
		{root, "out/secret", "", true, false},
		{root, "x.csv", "", true, false},
		// Lexically this is root/x; the kernel goes to outside's parent.
		{root, "out/../specs-sibling", "", true, false},
		{root, "../specs2/x", "", true, false}, // a sibling sharing the prefix
		{root, "nothere/../../outside/y", "", true, false},
		{root, "loop/x", "", false, true},
		{root, ".setpoint/dangling.json", "", false, true},
		{root, "danglingdir/x", "", false, true},
		{root, "", "", false, true},
		{root, "a\x00b", "", false, true},
	} {
		got, err := r.Inside(c.base, c.p)
		var oe *OutsideError
		switch {
		case c.err:
			if err == nil || errors.As(err, &oe) {
				t.Errorf("%q: want a resolution error, got %q, %v", c.p, got, err)
			}
		case c.outside:
			if !errors.As(err, &oe) {
				t.Errorf("%q: want outside, got %q, %v", c.p, got, err)
			}
		default:
			if err != nil || got != c.want {
				t.Errorf("%q: got %q, %v; want %q", c.p, got, err, c.want)
			}
		}
	}
}

func TestWithin(t *testing.T) {
	for _, c := range []struct {
		root, p string
		want    bool
	}{
		{"/a/b", "/a/b", true},
		{"/a/b", "/a/b/c", true},
		{"/a/b", "/a/bc", false},
		{"/a/b", "/a", false},
		{"/a/b", "/a/b/..c", true}, // a name starting with two dots
		{"/", "/x", true},
	} {
		if got := Within(c.root, c.p); got != c.want {
			t.Errorf("Within(%q, %q) = %v", c.root, c.p, got)
		}
	}
}

// TestReadRegular: a regular file is read whole; a FIFO is refused at
// once (an open that blocked would hang the test past its deadline), as
// are a directory, a link with noFollow, and a file over the limit.
func TestReadRegular(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("12345"), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	if b, fi, err := ReadRegular(file, 5, true); err != nil || string(b) != "12345" || fi.Size() != 5 {
		t.Fatalf("a regular file: %q %v", b, err)
	}
	if b, _, err := ReadRegular(link, 5, false); err != nil || string(b) != "12345" {
		t.Fatalf("through a link, followed: %q %v", b, err)
	}
	if _, _, err := ReadRegular(link, 5, true); err == nil {
		t.Fatal("a link with noFollow must be refused")
	}
	if _, _, err := ReadRegular(file, 4, false); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("over the limit: %v", err)
	}
	for p, kind := range map[string]string{fifo: "a named pipe (FIFO)", dir: "a directory"} {
		var nr *NotRegularError
		if _, _, err := ReadRegular(p, 5, false); !errors.As(err, &nr) || err.Error() != p+" is "+kind+", not a regular file" {
			t.Fatalf("%s: %v", p, err)
		}
	}
}
