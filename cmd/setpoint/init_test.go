package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// init writes a directory that validates and plans as written (sim), or
// validates (kubernetes: its plan needs your cluster); it writes nothing
// when any of its files is there already.
func TestInit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "start")
	if out, errOut, code := runCLI(t, "init", dir); code != 0 || !strings.Contains(out, "setpoint plan "+dir) {
		t.Fatalf("init: exit %d\n%s\n%s", code, out, errOut)
	}
	if out, errOut, code := runCLI(t, "validate", dir); code != 0 {
		t.Fatalf("validate: exit %d\n%s\n%s", code, out, errOut)
	}
	if out, errOut, code := runCLI(t, "plan", dir); code != 0 || !strings.Contains(out, "sim:HorizontalPodAutoscaler/shop/web") {
		t.Fatalf("plan: exit %d\n%s\n%s", code, out, errOut)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "traces", "README.md")); err != nil || !strings.Contains(string(b), "CC-BY-4.0") {
		t.Fatalf("the trace's attribution: %v", err)
	}
	before, _ := os.ReadFile(filepath.Join(dir, "web.nfr.yaml"))
	if _, errOut, code := runCLI(t, "init", dir); code != 1 || !strings.Contains(errOut, "not writing over") {
		t.Fatalf("init over itself: exit %d, %s", code, errOut)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "web.nfr.yaml")); string(after) != string(before) {
		t.Fatal("init wrote over a file")
	}

	// One of its files there already: none written.
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "web.nfr.yaml"), []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runCLI(t, "init", "--provider", "kubernetes", other); code != 1 || !strings.Contains(errOut, "web.nfr.yaml") {
		t.Fatalf("init beside a file of its own name: exit %d, %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(other, "setpoint.yaml")); !os.IsNotExist(err) {
		t.Fatalf("init wrote part of its files: %v", err)
	}

	kube := filepath.Join(t.TempDir(), "kube")
	if out, errOut, code := runCLI(t, "init", "--provider", "kubernetes", kube); code != 0 {
		t.Fatalf("init --provider kubernetes: exit %d\n%s\n%s", code, out, errOut)
	}
	if out, errOut, code := runCLI(t, "validate", kube); code != 0 {
		t.Fatalf("validate the kubernetes start: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, errOut, code := runCLI(t, "init", "--provider", "nomad", t.TempDir()); code != 1 || !strings.Contains(errOut, "want sim or kubernetes") {
		t.Fatalf("--provider nomad: exit %d, %s", code, errOut)
	}
}
