package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/cue/load"
)

// The spec directory the playground writes validates as written; a
// second run keeps the user's edits and writes the Environment anew.
func TestPlaygroundSpecsValidate(t *testing.T) {
	dir := t.TempDir()
	if _, err := writeSpecs(dir, "http://127.0.0.1:9090"); err != nil {
		t.Fatal(err)
	}
	l, err := load.New()
	if err != nil {
		t.Fatal(err)
	}
	r := l.LoadDir(dir)
	if len(r.Diags) > 0 {
		t.Fatalf("the playground's specs do not validate: %v", r.Diags)
	}
	if n := len(r.Specs()); n != len(examples) {
		t.Fatalf("%d specs loaded, want %d", n, len(examples))
	}
	edited := "# mine\n" + examples["checkout.nfr.yaml"]
	if err := os.WriteFile(filepath.Join(dir, "checkout.nfr.yaml"), []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	said, err := writeSpecs(dir, "http://127.0.0.1:9191")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "checkout.nfr.yaml"))
	env, _ := os.ReadFile(filepath.Join(dir, "setpoint.yaml"))
	if string(b) != edited || !strings.Contains(said, "checkout.nfr.yaml") || !strings.Contains(string(env), "9191") {
		t.Fatalf("second run: %q; checkout %q; env %q", said, b, env)
	}
}
