package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWatchHoldsTheDirectoryForItsLifetime: while a watch runs, a second
// watch and an apply refuse, naming it; a plain plan refuses and says to
// use --read-only; plan --read-only plans beside it and writes nothing.
// After the watch stops, apply takes the lock again.
func TestWatchHoldsTheDirectoryForItsLifetime(t *testing.T) {
	dir := copySpecs(t, quick...)
	w := startProc(t, "watch", dir)
	w.waitLog(t, 20*time.Second, "msg=watching")
	w.waitLog(t, 20*time.Second, "reason=start")
	stateDir := filepath.Join(dir, ".setpoint")

	// Bounded: a second watch that did not refuse would run for ever.
	second := startProc(t, "watch", dir)
	done := make(chan error, 1)
	go func() { done <- second.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("a second watch runs beside the first:\n%s", second.logs.String())
	}
	errOut, code := second.logs.String(), second.cmd.ProcessState.ExitCode()
	if code != 1 || !strings.Contains(errOut, "another setpoint runs on this directory's state") || !strings.Contains(errOut, "(setpoint watch)") {
		t.Fatalf("second watch: %d %s", code, errOut)
	}
	_, errOut, code = runCLI(t, "apply", "--auto-approve", dir)
	if code != 1 || !strings.Contains(errOut, "(setpoint watch)") {
		t.Fatalf("apply beside watch: %d %s", code, errOut)
	}
	_, errOut, code = runCLI(t, "plan", dir)
	if code != 1 || !strings.Contains(errOut, "setpoint plan --read-only "+dir) {
		t.Fatalf("plan beside watch: %d %s", code, errOut)
	}
	out, errOut, code := runCLI(t, "plan", "--read-only", dir)
	if code != 0 || !strings.Contains(out, "Plan:") {
		t.Fatalf("plan --read-only: %d %s %s", code, out, errOut)
	}
	w.stop(t, 10*time.Second)
	// The watch may have saved meanwhile; a read-only plan itself saves
	// nothing: run it again with nothing else running.
	after := treeDigest(t, stateDir)
	out, _, code = runCLI(t, "plan", "--read-only", dir)
	if code != 0 || !strings.Contains(out, "Plan:") {
		t.Fatalf("plan --read-only: %d %s", code, out)
	}
	if treeDigest(t, stateDir) != after {
		t.Fatal("plan --read-only wrote the state")
	}
	// A plain plan saves (what it learned): the digest is a real check.
	runCLI(t, "plan", dir)
	if treeDigest(t, stateDir) == after {
		t.Fatal("a plain plan saved nothing either: the check above proves nothing")
	}
	if _, errOut, code := runCLI(t, "apply", "--auto-approve", dir); code != 0 {
		t.Fatalf("apply after the watch stopped: %d %s", code, errOut)
	}
}

// treeDigest hashes every file under dir but the lock (names and
// contents).
func treeDigest(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, ".lock") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %d\n", p, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestWatchStopsApplyingWhenItsLockGoes: a lock file removed under a
// running watch (rm -rf .setpoint, git clean) would let a second process
// lock the state beside it: the watch says so and applies nothing more.
func TestWatchStopsApplyingWhenItsLockGoes(t *testing.T) {
	dir := copySpecs(t, quick...)
	w := startProc(t, "watch", dir)
	w.waitLog(t, 20*time.Second, "msg=watching")
	w.waitLog(t, 20*time.Second, "reason=start")
	if err := os.Remove(filepath.Join(dir, ".setpoint", "state.json.lock")); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "checkout.nfr.yaml")
	b, _ := os.ReadFile(p)
	if err := os.WriteFile(p, []byte(strings.Replace(string(b), "minRPS: 400", "minRPS: 900", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	w.waitLog(t, 20*time.Second, "was removed while held: another process could take the state; restart watch to lock it again")
	if strings.Contains(w.logs.String(), `msg=applied reason="edit of checkout.nfr.yaml"`) {
		t.Fatal("applied without the lock")
	}
	w.stop(t, 10*time.Second)
}
