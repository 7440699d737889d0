package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/internal/testutil"
)

// TestWatchSlowDeletionAndConfirmation: specs deleted one at a time under
// watch are judged against every spec it applied for, so no more than half
// are released; restored, the released HPA adopts the user's 2 again, not
// setpoint's 3; deleted again, the releases wait until confirm-release,
// handed to the running watch, confirms them once.
func TestWatchSlowDeletionAndConfirmation(t *testing.T) {
	dir := copySpecs(t, quick...)
	w := startProc(t, "watch", dir)
	w.waitLog(t, 20*time.Second, "msg=watching")
	w.waitLog(t, 20*time.Second, "address=sim:HorizontalPodAutoscaler/shop/checkout attribute=spec.minReplicas from=2 to=3")
	files := []string{"checkout.nfr.yaml", "fib.nfr.cue", "inventory.nfr.yaml", "checkout-vip.routegroup.yaml", "streaming.fleet.yaml", "latency-critical.nodepolicy.yaml"}
	saved := map[string][]byte{}
	released := 0
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		saved[f] = b
		if err := os.Remove(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
		// Each removal reconciled before the next: one at a time. Its
		// reason may come joined with the tick's ("removal of f; tick"):
		// a tick that falls within the debounce finds the removal by its
		// rescan and enqueues both at once.
		judged := regexp.MustCompile(`msg=(released|held) reason="(?:[^"]*; )?removal of ` + regexp.QuoteMeta(f) + `[";]`)
		var verdict string
		testutil.Eventually(t, 20*time.Second, "the removal of "+f+" released or held", func() bool {
			m := judged.FindStringSubmatch(w.logs.String())
			if m != nil {
				verdict = m[1]
			}
			return m != nil
		})
		if verdict == "released" {
			released++
		}
	}
	if released == 0 || released > len(files)/2 {
		t.Fatalf("%d of %d specs deleted one at a time were released: want some, and at most half", released, len(files))
	}
	if !strings.Contains(w.logs.String(), "since the last confirmation are gone") {
		t.Fatal("no release was held against the specs applied for")
	}
	// Restored into a directory of their own, which comes into the tree
	// in one rename, so that the second deletion below is one event too.
	staging := filepath.Join(filepath.Dir(dir), "restored")
	if err := os.Mkdir(staging, 0o755); err != nil {
		t.Fatal(err)
	}
	for f, b := range saved {
		if err := os.WriteFile(filepath.Join(staging, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Rename(staging, filepath.Join(dir, "app")); err != nil {
		t.Fatal(err)
	}
	w.waitLog(t, 20*time.Second, "the user's value is 2, from before the release (3 is setpoint's own write)")

	// Deleted again, all at once: held until confirmed, and the
	// confirmation is handed to the watch, which holds the lock. (Removed
	// one file after another, a busy machine could stretch a gap past the
	// debounce: the first alone would be released, not held.)
	if err := os.Rename(filepath.Join(dir, "app"), filepath.Join(filepath.Dir(dir), "gone")); err != nil {
		t.Fatal(err)
	}
	w.waitLog(t, 20*time.Second, "release not confirmed")
	// A confirmation not handed to this watch (committed to the spec
	// directory, or left by an earlier one) is ignored.
	forged := `{"specs":["NFR/shop/checkout","NFR/default/fib","NFR/shop/inventory"],"holder":"pid 1 on elsewhere (setpoint watch) since 2026-01-01T00:00:00Z"}`
	if err := os.WriteFile(filepath.Join(dir, ".setpoint", "state.json.confirm-release"), []byte(forged), 0o644); err != nil {
		t.Fatal(err)
	}
	w.waitLog(t, 30*time.Second, "a release confirmation is ignored")
	if strings.Contains(w.logs.String(), "release confirmation taken") {
		t.Fatal("a confirmation handed to another holder was taken")
	}
	out, errOut, code := runCLI(t, "state", "confirm-release", "--yes", dir)
	if code != 0 || !strings.Contains(out, "is handed to it") {
		t.Fatalf("confirm-release beside watch: %d %s %s", code, out, errOut)
	}
	w.waitLog(t, 30*time.Second, "release confirmation taken")
	// Whichever reconcile comes next takes it (a tick, a requeue).
	testutil.Eventually(t, 30*time.Second, "the release", func() bool {
		return regexp.MustCompile(`msg=released reason=\S+ address=sim:HorizontalPodAutoscaler/shop/checkout`).MatchString(w.logs.String())
	})
	if _, err := os.Stat(filepath.Join(dir, ".setpoint", "state.json.confirm-release")); !os.IsNotExist(err) {
		t.Fatalf("the confirmation stays after it was taken: %v", err)
	}
	w.stop(t, 10*time.Second)
}
