package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine/state"
)

// TestConfirmReleaseHandsOnlyToAWatch: an apply (or a plan) holding the
// state never reads a confirmation handed to it, so confirm-release
// refuses at once, naming it, or with --lock-timeout waits for the lock
// and confirms in the state itself; a watch holding the state is handed
// the confirmation. The holders here are this test's own locks: the lock
// file naming its holder is all confirm-release goes by.
func TestConfirmReleaseHandsOnlyToAWatch(t *testing.T) {
	dir := copySpecs(t, quick...)
	if _, errOut, code := runCLI(t, "apply", "--auto-approve", dir); code != 0 {
		t.Fatalf("apply: %d %s", code, errOut)
	}
	if err := os.Remove(filepath.Join(dir, "checkout.nfr.yaml")); err != nil {
		t.Fatal(err)
	}
	statePath := filepath.Join(dir, ".setpoint", "state.json")
	handed := state.ConfirmPath(statePath)
	b := state.NewFile(statePath)
	ctx := context.Background()

	unlock, err := b.Lock(ctx, "setpoint apply", false)
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runCLI(t, "state", "confirm-release", "--yes", dir)
	if code != 1 || !strings.Contains(errOut, "(setpoint apply)") || !strings.Contains(errOut, "only a running setpoint watch is handed a confirmation") || !strings.Contains(errOut, "--lock-timeout") {
		t.Fatalf("confirm-release beside an apply: want a refusal naming it: %d\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(handed); !os.IsNotExist(err) {
		t.Fatalf("a confirmation was handed to an apply: %v", err)
	}

	p := startProc(t, "state", "confirm-release", "--yes", "--lock-timeout", "60s", dir)
	p.waitLog(t, 30*time.Second, `msg="waiting for the state lock"`)
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(t, 30*time.Second); err != nil || !strings.Contains(p.logs.String(), "Confirmed 1 spec deleted") {
		t.Fatalf("confirm-release --lock-timeout after the apply let go: %v\n%s", err, p.logs.String())
	}
	if _, err := os.Stat(handed); !os.IsNotExist(err) {
		t.Fatalf("a confirmation was handed over with the lock free: %v", err)
	}

	if err := os.Remove(filepath.Join(dir, "inventory.nfr.yaml")); err != nil {
		t.Fatal(err)
	}
	unlock, err = b.Lock(ctx, state.WatchHolder, false)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	// A watch never lets go: it is handed the confirmation at once, even
	// when told to wait.
	out, errOut, code = runCLI(t, "state", "confirm-release", "--yes", "--lock-timeout", "10m", dir)
	if code != 0 || !strings.Contains(out, "is handed to it") {
		t.Fatalf("confirm-release beside a watch: %d\n%s%s", code, out, errOut)
	}
	raw, err := os.ReadFile(handed)
	if err != nil {
		t.Fatal(err)
	}
	var c confirmation
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	if h := state.LockHolder(statePath); h == nil || c.Holder != h.String() || !slices.Equal(c.Specs, []string{"NFR/shop/inventory"}) {
		t.Fatalf("handed %+v, the lock names %v", c, h)
	}
}
