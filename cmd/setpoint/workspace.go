package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/setpoint-dev/setpoint/cue/load"
	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/signals/embedded"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/internal/version"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/sim"
)

// workspace is a loaded spec directory with its providers and signals.
type workspace struct {
	dir       string
	env       *spec.Environment
	nfrs      []*spec.NFR
	specs     []spec.Document // every kind but the Environment
	diags     load.Diagnostics
	store     *embedded.Store
	sim       *sim.Provider
	eng       *engine.Engine
	statePath string
	// now is when a one-shot plan looks at the world: the sim config's
	// start into the trace.
	now time.Time
}

// openWorkspace loads dir. Invalid specs are reported in diags and left
// out; the rest are planned. Only a missing or invalid Environment stops it.
func openWorkspace(dir string, o simOptions) (*workspace, error) {
	l, err := load.New()
	if err != nil {
		return nil, err
	}
	r := l.LoadDir(dir)
	return workspaceFrom(dir, r.Documents, r.Diags, o)
}

// simOptions override the sim config (the sim command's flags).
type simOptions struct {
	trace     string
	rateScale float64
	fresh     bool // ignore the sim state file: a self-contained run
}

func workspaceFrom(dir string, docs []spec.Document, diags load.Diagnostics, o simOptions) (*workspace, error) {
	w := &workspace{dir: dir, diags: diags}
	for _, d := range docs {
		switch x := d.(type) {
		case *spec.Environment:
			if w.env == nil {
				w.env = x
			}
		case *spec.NFR:
			w.nfrs = append(w.nfrs, x)
			w.specs = append(w.specs, x)
		default:
			w.specs = append(w.specs, x)
		}
	}
	if w.env == nil {
		return nil, fmt.Errorf("%s: no valid Environment (setpoint validate %s says why)", dir, dir)
	}
	base := filepath.Dir(w.env.Src.Pos.File)
	w.statePath = w.env.Spec.State.Path
	if !filepath.IsAbs(w.statePath) {
		w.statePath = filepath.Join(base, w.statePath)
	}
	if w.env.Spec.State.Backend != "file" {
		return nil, fmt.Errorf("%s: state backend %q is not available yet; use file", w.env.Src.PosOf("spec.state.backend"), w.env.Spec.State.Backend)
	}
	w.store = embedded.NewStore(0)
	provs := map[string]providers.Provider{}
	for _, p := range w.env.Spec.Providers {
		if p.Name != "sim" {
			return nil, fmt.Errorf("%s: provider %q is not available yet; this release serves the sim world", w.env.Src.PosOf("spec.providers"), p.Name)
		}
		cfg, err := sim.Config(w.env)
		if err != nil {
			return nil, err
		}
		if o.trace != "" {
			cfg.Trace, _ = filepath.Abs(o.trace)
		}
		if o.rateScale > 0 {
			cfg.RateScale = o.rateScale
		}
		opts := sim.Options{BaseDir: base, Sink: w.store}
		statePath := sim.StatePath(w.env)
		if o.fresh {
			statePath = ""
		} else if opts.Changes, err = sim.LoadChanges(statePath); err != nil {
			return nil, err
		}
		world, err := sim.New(cfg, opts)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", w.env.Src.PosOf("spec.providers"), err)
		}
		w.sim = &sim.Provider{World: world, StatePath: statePath, Name: "sim"}
		w.now = world.Start().Add(cfg.Start.D())
		provs["sim"] = w.sim
	}
	w.eng = &engine.Engine{Env: w.env, Specs: w.specs, Providers: provs, Signals: embedded.NewSource(w.store), Version: version.Version, Dir: dir}
	return w, nil
}

// printDiags lists spec errors; they never stop the valid specs.
func (w *workspace) printDiags(out io.Writer) {
	for _, d := range w.diags {
		fmt.Fprintln(out, d.Error())
	}
	if len(w.diags) > 0 {
		fmt.Fprintf(out, "%d spec errors: those specs are left out of the plan\n", len(w.diags))
	}
}

// withState runs f under the state lock with the loaded state and saves
// what f left in it. The lock is held only as long as f runs.
func (w *workspace) withState(ctx context.Context, who string, wait time.Duration, f func(*state.State) error) error {
	lctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	lock, err := state.Acquire(lctx, w.statePath, who, wait > 0)
	if err != nil {
		return err
	}
	defer lock.Release()
	st, err := state.Load(w.statePath)
	if err != nil {
		return err
	}
	if err := f(st); err != nil {
		return err
	}
	return state.Save(w.statePath, st)
}
