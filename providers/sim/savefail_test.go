package sim

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/setpoint-dev/setpoint/providers"
)

// TestFailedFirstSaveLeavesNothing: an apply whose state file cannot be
// written (here the very first, with no file yet) is reported failed and
// leaves no change in the world, so a later save does not write it.
func TestFailedFirstSaveLeavesNothing(t *testing.T) {
	state := filepath.Join(t.TempDir(), "sim.json")
	r := newRig(t, constTrace(100, 600), deployment("checkout", 2))
	r.p.StatePath = state
	d := addr("Deployment", "checkout")
	defer func(f func(string, []byte, fs.FileMode) error) { writeState = f }(writeState)
	writeState = func(string, []byte, fs.FileMode) error { return errors.New("disk full") }
	if res := r.apply(t, 10, change(d, "setpoint", true, AttrReplicas, count(5)))[0]; res.Err == "" {
		t.Fatal("an apply whose save failed must fail")
	}
	read := r.p.Read(context.Background(), providers.ReadRequest{Now: r.at(11), Addresses: []providers.Address{d}}).Objects[0]
	if got := read.Attributes[AttrReplicas]; got != count(2) {
		t.Fatalf("replicas %s after a failed save, want 2: the world must not keep what the file does not hold", got)
	}
}
