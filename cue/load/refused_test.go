package load

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/setpoint-dev/setpoint/engine/diag"
)

// TestWalkReportsSpecPathsItCannotRead: a path named like a spec file that
// exists but cannot be read (a FIFO, a socket, a symlink loop, a link to a
// file outside the spec directory) is an error at that path, naming it and
// what was expected, never skipped unsaid: a plan holds every release while
// it stands, and validate fails. Nothing outside is read or quoted.
func TestWalkReportsSpecPathsItCannotRead(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.yaml")
	if err := os.WriteFile(secret, []byte("kind: TOPSECRET-hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l := newLoader(t)
	for _, c := range []struct {
		name string
		make func(p string) error
		want string
	}{
		{"a FIFO", func(p string) error { return syscall.Mkfifo(p, 0o644) }, `"x.nfr.yaml" is a named pipe (FIFO), not a regular file; not read`},
		{"a socket", func(p string) error {
			ln, err := net.Listen("unix", p)
			if err != nil {
				return err
			}
			t.Cleanup(func() { ln.Close() })
			return nil
		}, `"x.nfr.yaml" is a socket, not a regular file; not read`},
		{"a symlink loop", func(p string) error { return os.Symlink("x.nfr.yaml", p) }, `cannot follow symlink: too many levels of symbolic links (a symlink loop); "x.nfr.yaml" is not read`},
		{"a link to a file outside", func(p string) error { return os.Symlink(secret, p) }, `symlink leads outside the spec directory; not followed, "x.nfr.yaml" is not read`},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{"env.yaml": env, "a.nfr.yaml": nfr("a", "a")})
			p := filepath.Join(dir, "x.nfr.yaml")
			if err := c.make(p); err != nil {
				t.Fatal(err)
			}
			r := l.LoadDir(dir)
			if r.Files != 2 || len(r.Documents) != 2 {
				t.Fatalf("%d files, %d documents: want env.yaml and a.nfr.yaml read, x.nfr.yaml not", r.Files, len(r.Documents))
			}
			want := p + ": " + c.want + " (expected a regular file, or a symlink to one inside the spec directory)"
			if len(r.Diags) != 1 || r.Diags[0].Severity != diag.Error || r.Diags[0].Pos.File != p || r.Diags[0].Error() != want {
				t.Fatalf("want one error:\n%s\ngot:\n%s", want, messages(r))
			}
			if strings.Contains(messages(r), "TOPSECRET") {
				t.Fatalf("quoted a file outside:\n%s", messages(r))
			}
			// The watcher's scan is the same walk.
			tr, err := Walk(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(tr.Files) != 2 || len(tr.Diags) != 1 || tr.Diags[0].Error() != want {
				t.Fatalf("Walk: files %v, diagnostics %v", tr.Files, tr.Diags)
			}
		})
	}
}
