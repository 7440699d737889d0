package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/internal/testutil"
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
	_ = second.wait(t, 30*time.Second)
	errOut, code := second.logs.String(), second.cmd.ProcessState.ExitCode()
	// Advice names only flags the command has: watch has no --lock-timeout.
	if code != 1 || !strings.Contains(errOut, "another setpoint runs on this directory's state") || !strings.Contains(errOut, "(setpoint watch)") || strings.Contains(errOut, "--lock-timeout") {
		t.Fatalf("second watch: %d %s", code, errOut)
	}
	_, errOut, code = runCLI(t, "apply", "--auto-approve", dir)
	if code != 1 || !strings.Contains(errOut, "(setpoint watch)") || !strings.Contains(errOut, "run again with --lock-timeout") {
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

// TestWatchStopsWhenItsLockGoes: a lock file removed under a running
// watch (rm -rf .setpoint, git clean) would let a second process lock the
// state beside it: /healthz says so at once, and the watch exits non-zero
// (a supervisor restarts it) instead of living on unable to reconcile.
// Started again, it locks the state anew.
func TestWatchStopsWhenItsLockGoes(t *testing.T) {
	var addr string
	healthz := func() (int, string) {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	dir := copySpecs(t, quick...)
	w := startProc(t, "watch", "--health-addr", "127.0.0.1:0", dir)
	addr = w.addr(t, "serving health")
	w.waitLog(t, 20*time.Second, "msg=watching")
	w.waitLog(t, 20*time.Second, "reason=start")
	testutil.Eventually(t, 20*time.Second, "/healthz ok", func() bool { code, _ := healthz(); return code == 200 })

	if err := os.Remove(filepath.Join(dir, ".setpoint", "state.json.lock")); err != nil {
		t.Fatal(err)
	}
	// Asked at once: the watch may already be gone (refused, 0), never ok.
	if code, body := healthz(); code == 200 || (code != 0 && !strings.Contains(body, "was removed while held")) {
		t.Fatalf("/healthz with the lock file gone: %d %q", code, body)
	}
	_ = w.wait(t, 20*time.Second)
	if code := w.cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(w.logs.String(), "was removed while held: another process could take the state; watch stopped so as never to apply beside another process") {
		t.Fatalf("want exit 1 saying why, got %d", code)
	}
	again := startProc(t, "watch", dir)
	again.waitLog(t, 20*time.Second, "reason=start")
	again.stop(t, 10*time.Second)
}
