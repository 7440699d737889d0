// Package simtest builds what tests of the loop on the sim world share: a
// spec directory written from strings, and an engine on the real sim
// world and embedded store for it.
package simtest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/setpoint-dev/setpoint/cue/load"
	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/signals/embedded"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/sim"
)

// WriteDir writes each file (a path relative to a new directory → its
// body) and returns the directory.
func WriteDir(tb testing.TB, files map[string]string) string {
	tb.Helper()
	dir := tb.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return dir
}

// Engine loads dir (any diagnostic fails the test) and returns an engine
// planning its specs against the real sim world its Environment
// configures, with the embedded store as the signal source.
func Engine(tb testing.TB, dir string) (*engine.Engine, *sim.Provider) {
	tb.Helper()
	l, err := load.New()
	if err != nil {
		tb.Fatal(err)
	}
	r := l.LoadDir(dir)
	if len(r.Diags) > 0 {
		tb.Fatalf("specs: %v", r.Diags)
	}
	store := embedded.NewStore(0)
	p, err := sim.Open(r.Environment(), store)
	if err != nil {
		tb.Fatal(err)
	}
	return &engine.Engine{Env: r.Environment(), Specs: r.Specs(), Providers: map[string]providers.Provider{"sim": p}, Signals: embedded.NewSource(store).WithLookback(r.Environment().Spec.Signals.Lookback())}, p
}
