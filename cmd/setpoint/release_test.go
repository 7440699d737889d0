package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/state"
)

// TestDeletedSpecReleasesItsFields: after an apply, deleting a spec
// releases what it set (the plan says so, the values stay), a broken spec
// file holds every release, and deleting every spec at once releases
// nothing until setpoint state confirm-release.
func TestDeletedSpecReleasesItsFields(t *testing.T) {
	dir := copySpecs(t, quick...)
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(binary, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	run("apply", "--auto-approve", dir)
	if err := os.Remove(filepath.Join(dir, "checkout.nfr.yaml")); err != nil {
		t.Fatal(err)
	}
	// A broken file: nothing is released, whatever was deleted.
	if err := os.WriteFile(filepath.Join(dir, "broken.yaml"), []byte("kind: ["), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command(binary, "plan", dir).CombinedOutput()
	if !strings.Contains(string(out), "release not confirmed: some spec files do not load") || strings.Contains(string(out), "to release") {
		t.Fatalf("a broken file must hold releases:\n%s", out)
	}
	if err := os.Remove(filepath.Join(dir, "broken.yaml")); err != nil {
		t.Fatal(err)
	}
	out = []byte(run("plan", dir))
	if !strings.Contains(string(out), "~ sim:HorizontalPodAutoscaler/shop/checkout") ||
		!strings.Contains(string(out), "spec.minReplicas: 3 (released: setpoint stops managing it; the value stays)") ||
		!strings.Contains(string(out), "NFR/shop/checkout gone") || !strings.Contains(string(out), "1 to release") {
		t.Fatalf("want the release of checkout's field:\n%s", out)
	}
	run("apply", "--auto-approve", dir)
	if out := run("plan", dir); strings.Contains(out, "release") {
		t.Fatalf("released once, not twice:\n%s", out)
	}
	// Every other spec goes at once: held until confirmed.
	for _, f := range []string{"inventory.nfr.yaml", "fib.nfr.cue", "checkout-vip.routegroup.yaml"} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	out = []byte(run("plan", dir))
	if !strings.Contains(string(out), "release not confirmed") || !strings.Contains(string(out), "setpoint state confirm-release DIR") {
		t.Fatalf("a mass release must wait:\n%s", out)
	}
	if out := run("state", "confirm-release", "--yes", dir); !strings.Contains(out, "Confirmed 4 specs deleted") {
		t.Fatalf("confirm-release: %s", out)
	}
	if out := run("plan", dir); !strings.Contains(out, "to release") {
		t.Fatalf("confirmed, it goes through:\n%s", out)
	}
}

// TestInterruptAfterApplyStillRecords: an interrupt arriving once changes
// were applied does not drop their record (the world and the state agree).
func TestInterruptAfterApplyStillRecords(t *testing.T) {
	dir := copySpecs(t, quick...)
	ws, err := openWorkspace(dir, simOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.close()
	ctx, cancel := context.WithCancel(context.Background())
	applied := 0
	err = ws.withState(ctx, "test", 0, func(st *state.State) error {
		p := ws.eng.Plan(ctx, ws.now, st, nil)
		for _, r := range ws.eng.Apply(context.WithoutCancel(ctx), ws.now, p, st) {
			if r.Err == "" {
				applied++
			}
		}
		cancel() // the interrupt, after the provider applied
		return nil
	})
	if err != nil || applied == 0 {
		t.Fatalf("%v, %d applied", err, applied)
	}
	st, err := ws.state.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	hpa := addrs.Attr{Object: addrs.Object{Provider: "sim", Kind: "HorizontalPodAutoscaler", Namespace: "shop", Name: "checkout"}, Path: addrs.MustPath("spec.minReplicas")}
	if en, ok := st.Lookup(hpa); !ok || en.Applied == nil {
		t.Fatalf("the applied change was not recorded: %+v", en)
	}
}

// TestChangedStatePathWarns: state.path moved to an empty place while a
// state exists at the old one is said, not silently started afresh.
func TestChangedStatePathWarns(t *testing.T) {
	dir := copySpecs(t, quick...)
	if _, errOut, code := runCLI(t, "apply", "--auto-approve", dir); code != 0 {
		t.Fatalf("apply: %s", errOut)
	}
	_, errOut, _ := runCLI(t, "plan", dir)
	if strings.Contains(errOut, "state.path holds no state") {
		t.Fatalf("the state is where it was: no warning\n%s", errOut)
	}
	p := filepath.Join(dir, "setpoint.yaml")
	b, _ := os.ReadFile(p)
	if err := os.WriteFile(p, []byte(strings.Replace(string(b), "path: .setpoint/state.json", "path: .setpoint/moved.json", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, _ = runCLI(t, "plan", dir)
	if !strings.Contains(errOut, "state.path holds no state, but a state exists elsewhere") || !strings.Contains(errOut, "state.json") {
		t.Fatalf("want a warning naming the old state:\n%s", errOut)
	}
}
