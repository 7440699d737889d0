package sim

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/setpoint-dev/setpoint/cue/spec"
)

// Config returns the sim provider's configuration from an Environment. The
// schema has already filled in its defaults.
func Config(env *spec.Environment) (spec.SimConfig, error) {
	for _, p := range env.Spec.Providers {
		if p.Name != "sim" {
			continue
		}
		c, err := p.SimConfig()
		if err != nil {
			return c, fmt.Errorf("%s: sim config: %w", env.Src.PosOf("spec.providers"), err)
		}
		return c, nil
	}
	return spec.SimConfig{}, fmt.Errorf("%s: the Environment has no sim provider", env.Src.Pos)
}

// AbsPaths resolves the config's trace paths (its own and each
// workload's) against baseDir, the Environment file's directory, so a
// world built from it, or rebuilt, never resolves one against the
// process's working directory.
func AbsPaths(cfg *spec.SimConfig, baseDir string) {
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(baseDir, p)
	}
	cfg.Trace = abs(cfg.Trace)
	for i := range cfg.Workloads {
		cfg.Workloads[i].Trace = abs(cfg.Workloads[i].Trace)
	}
}

// StatePath is where the sim world keeps its applied changes: beside the
// engine's state file, under the Environment's directory.
func StatePath(env *spec.Environment) string {
	base := filepath.Dir(env.Src.Pos.File)
	state := env.Spec.State.Path
	if state == "" {
		state = ".setpoint/state.json"
	}
	if !filepath.IsAbs(state) {
		state = filepath.Join(base, state)
	}
	return StateFileBeside(state)
}

// StateFileBeside is the sim state file kept beside the engine's state
// file at statePath.
func StateFileBeside(statePath string) string {
	return filepath.Join(filepath.Dir(statePath), "sim-state.json")
}

// FilesBeside lists every file the sim world keeps beside the engine's
// state file at statePath: its state and that state's lock.
func FilesBeside(statePath string) []string {
	f := StateFileBeside(statePath)
	return []string{f, lockPath(f)}
}

// Open builds the Environment's sim world with the changes applied so far
// and returns it as a provider.
func Open(env *spec.Environment, sink Sink) (*Provider, error) {
	cfg, err := Config(env)
	if err != nil {
		return nil, err
	}
	AbsPaths(&cfg, filepath.Dir(env.Src.Pos.File))
	tr, err := TraceOf(cfg, filepath.Dir(env.Src.Pos.File))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", env.Src.PosOf("spec.providers"), err)
	}
	p, err := NewProvider(cfg, tr, StatePath(env), Options{Sink: sink})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", env.Src.PosOf("spec.providers"), err)
	}
	return p, nil
}

// ParseTime reads a time as RFC 3339 or as an offset from the world's start
// ("15m").
func (w *World) ParseTime(s string) (time.Time, error) { return w.trace.ParseTime(s) }

// ParseTime reads a time as RFC 3339 or as an offset from the trace's
// start ("15m").
func (t *Trace) ParseTime(s string) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("time %q: an offset must not be negative", s)
		}
		return t.Start.Add(d), nil
	}
	at, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("time %q: want RFC 3339 (2023-11-16T18:25:46Z) or an offset from the trace's start (15m)", s)
	}
	return at, nil
}
