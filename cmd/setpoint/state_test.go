package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestStateCommand: a shard edited by hand stops plan with advice that
// names the commands; verify finds it; reset without a terminal asks for
// --yes; with it the shard is moved aside and plan runs again.
func TestStateCommand(t *testing.T) {
	dir := copySpecs(t)
	sp := func(args ...string) (string, error) {
		out, err := exec.Command(binary, args...).CombinedOutput()
		return string(out), err
	}
	if out, err := sp("plan", dir); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := sp("state", "verify", dir); err != nil || !strings.Contains(out, "7 objects read, every checksum matches") {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := sp("state", "show", dir); err != nil || !strings.Contains(out, "spec.minReplicas: user 2; policies nfr") {
		t.Fatalf("%v\n%s", err, out)
	}
	shards, _ := filepath.Glob(filepath.Join(dir, ".setpoint", "state.json.d", "sim_HorizontalPodAutoscaler_shop_checkout.*.json"))
	if len(shards) != 1 {
		t.Fatalf("shards: %v", shards)
	}
	b, _ := os.ReadFile(shards[0])
	if err := os.WriteFile(shards[0], []byte(strings.Replace(string(b), `"value":"2"`, `"value":"9"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	name := filepath.Base(shards[0])
	out, err := sp("plan", dir)
	if err == nil || !strings.Contains(out, "setpoint state verify "+dir) || !strings.Contains(out, "setpoint state reseal "+dir+" SHARD") {
		t.Fatalf("plan on a corrupt shard must say what to run: %v\n%s", err, out)
	}
	if out, err := sp("state", "verify", dir); err == nil || !strings.Contains(out, name+": state shard is corrupt: checksum") || !strings.Contains(out, "1 shard cannot be read; 6 objects read") {
		t.Fatalf("verify: %v\n%s", err, out)
	}
	if out, err := sp("state", "reset", dir, name); err == nil || !strings.Contains(out, "run again with --yes") {
		t.Fatalf("reset must ask: %v\n%s", err, out)
	}
	if out, err := sp("state", "reset", "--yes", dir, "../../setpoint.yaml"); err == nil || !strings.Contains(out, "not a state shard") {
		t.Fatalf("reset of a path outside the state: %v\n%s", err, out)
	}
	if out, err := sp("state", "reset", "--yes", dir, name); err != nil || !strings.Contains(out, "moved "+name+" aside") {
		t.Fatalf("reset: %v\n%s", err, out)
	}
	if out, err := sp("plan", dir); err != nil {
		t.Fatalf("plan after the reset: %v\n%s", err, out)
	}
}
