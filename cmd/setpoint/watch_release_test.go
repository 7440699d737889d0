package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
		// Each removal reconciled before the next: one at a time.
		rel, held := `msg=released reason="removal of `+f+`"`, `msg=held reason="removal of `+f+`"`
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(w.logs.String(), rel) && !strings.Contains(w.logs.String(), held) {
			if time.Now().After(deadline) {
				t.Fatalf("the removal of %s was neither released nor held", f)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if strings.Contains(w.logs.String(), rel) {
			released++
		}
	}
	if released == 0 || released > len(files)/2 {
		t.Fatalf("%d of %d specs deleted one at a time were released: want some, and at most half", released, len(files))
	}
	if !strings.Contains(w.logs.String(), "since the last confirmation are gone") {
		t.Fatal("no release was held against the specs applied for")
	}
	for f, b := range saved {
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w.waitLog(t, 20*time.Second, "the user's value is 2, from before the release (3 is setpoint's own write)")

	// Deleted again: held until confirmed, and the confirmation is handed to
	// the watch, which holds the lock.
	for _, f := range files {
		if err := os.Remove(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	w.waitLog(t, 20*time.Second, "release not confirmed")
	out, errOut, code := runCLI(t, "state", "confirm-release", "--yes", dir)
	if code != 0 || !strings.Contains(out, "is handed to it") {
		t.Fatalf("confirm-release beside watch: %d %s %s", code, out, errOut)
	}
	w.waitLog(t, 30*time.Second, "release confirmation taken")
	w.waitLog(t, 30*time.Second, "msg=released reason=tick address=sim:HorizontalPodAutoscaler/shop/checkout")
	if _, err := os.Stat(filepath.Join(dir, ".setpoint", "state.json.confirm-release")); !os.IsNotExist(err) {
		t.Fatalf("the confirmation stays after it was taken: %v", err)
	}
	w.stop(t, 10*time.Second)
}
