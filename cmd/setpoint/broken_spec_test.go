package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/internal/testutil"
)

// TestReplacedSpecIsBrokenNotGone: fib.nfr.cue replaced (in one rename) by
// a link to a file outside the spec directory, a symlink loop or a FIFO
// exists but cannot be loaded: it is broken, not deleted, for every
// command. validate fails naming the path; plan and apply release nothing;
// under watch its last good version stays in force and nothing is
// released, not even when another edit is reconciled; the state still
// records what was applied for fib. Nothing of the file outside is quoted.
func TestReplacedSpecIsBrokenNotGone(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "passwd")
	if err := os.WriteFile(secret, []byte("root:TOPSECRET:0:0::/root:/bin/sh\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const fibAttr = `sim:KnativeService/default/fib spec.template.metadata.annotations["autoscaling.knative.dev/min-scale"]`
	for _, c := range []struct {
		name string
		make func(p string) error
	}{
		{"a link outside", func(p string) error { return os.Symlink(secret, p) }},
		{"a symlink loop", func(p string) error { return os.Symlink("fib.nfr.cue", p) }},
		{"a FIFO", func(p string) error { return syscall.Mkfifo(p, 0o644) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Checkout's changes apply at once: an edit of it is the sign
			// that watch reconciled after the replacement.
			dir := copySpecs(t, append(quick, [3]string{"checkout.nfr.yaml", "cooldown: 2m", "cooldown: 0s"})...)
			fib := filepath.Join(dir, "fib.nfr.cue")
			good, err := os.ReadFile(fib)
			if err != nil {
				t.Fatal(err)
			}
			// Each file is replaced as an editor or git does: the new one
			// made beside it, then renamed over it.
			replace := func(name string, make func(p string) error) {
				t.Helper()
				tmp := filepath.Join(dir, ".replace.tmp")
				if err := make(tmp); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
					t.Fatal(err)
				}
			}
			fibKept := func(when string) {
				t.Helper()
				a := showState(t, dir)[fibAttr]
				if a.Applied == "" || !slices.Contains(a.By, "NFR/default/fib") || a.Released != "" {
					t.Fatalf("%s: fib's field in the state: %+v; want it applied for NFR/default/fib, not released", when, a)
				}
			}
			if _, errOut, code := runCLI(t, "apply", "--auto-approve", dir); code != 0 {
				t.Fatalf("apply: %d %s", code, errOut)
			}
			fibKept("applied")

			replace("fib.nfr.cue", c.make)
			out, errOut, code := runCLI(t, "validate", dir)
			named := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(fib) + `: .*"fib\.nfr\.cue".*\(expected a regular file, or a symlink to one inside the spec directory\)$`)
			if code != 1 || !named.MatchString(errOut) || strings.Contains(out+errOut, "TOPSECRET") {
				t.Fatalf("validate: exit %d, want 1 and an error at %s\nstdout: %s\nstderr: %s", code, fib, out, errOut)
			}
			for _, cmd := range []string{"plan", "apply"} {
				args := []string{cmd, dir}
				if cmd == "apply" {
					args = []string{cmd, "--auto-approve", dir}
				}
				out, errOut, code := runCLI(t, args...)
				all := out + errOut
				if code != 1 || !named.MatchString(errOut) || strings.Contains(all, "to release") || strings.Contains(all, "(released:") ||
					!strings.Contains(all, "release not confirmed: some spec files do not load") || strings.Contains(all, "TOPSECRET") {
					t.Fatalf("%s: exit %d, want 1, the error at %s and fib's release held\nstdout: %s\nstderr: %s", cmd, code, fib, out, errOut)
				}
				fibKept("after " + cmd)
			}

			// Under watch: fib loads, then is replaced while it runs.
			replace("fib.nfr.cue", func(p string) error { return os.WriteFile(p, good, 0o644) })
			w := startProc(t, "watch", dir)
			w.waitLog(t, 20*time.Second, "msg=watching")
			replace("fib.nfr.cue", c.make)
			checkout, err := os.ReadFile(filepath.Join(dir, "checkout.nfr.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			replace("checkout.nfr.yaml", func(p string) error {
				return os.WriteFile(p, []byte(strings.Replace(string(checkout), "minRPS: 400", "minRPS: 900", 1)), 0o644)
			})
			// The edit comes after the replacement: by the time it is
			// applied, a release of fib's field would have been too. The
			// start's reconcile may be the one that reads it (the edit can
			// land before it loads the directory): the sign is the edited
			// minRPS in the reason, whichever reconcile applied it.
			edited := regexp.MustCompile(`msg=applied reason=(?:"[^"]*edit of checkout\.nfr\.yaml[^"]*"|start) address=sim:HorizontalPodAutoscaler/shop/checkout attribute=spec\.minReplicas .*× 900 = `)
			testutil.Eventually(t, 30*time.Second, "checkout's edit applied", func() bool { return edited.MatchString(w.logs.String()) })
			w.stop(t, 10*time.Second)
			logs := w.logs.String()
			if strings.Contains(logs, "msg=released") {
				t.Fatalf("watch released fib's field:\n%s", logs)
			}
			if strings.Contains(logs, "removal of fib.nfr.cue") {
				t.Fatalf("watch took the file for deleted:\n%s", logs)
			}
			if !strings.Contains(logs, "spec path not read: broken, not gone") || !strings.Contains(logs, fib) || strings.Contains(logs, "TOPSECRET") {
				t.Fatalf("watch did not say, at %s, that the file is not read:\n%s", fib, logs)
			}
			fibKept("after watch")
		})
	}
}
