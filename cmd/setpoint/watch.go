package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/setpoint-dev/setpoint/cue/load"
	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/clock"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/engine/watch"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/sim"
)

func newWatchCmd() *cobra.Command {
	var debounce time.Duration
	cmd := &cobra.Command{
		Use:   "watch DIR",
		Short: "Reconcile continuously: on every spec edit and every tick, until stopped",
		Long: `watch plans and applies like apply --auto-approve, as a controller does: at
once, every Environment tick, and after each edit of a spec file (debounced),
for the specs that edit touched. A broken edit is reported and the last good
version of that file keeps running. With the sim world, virtual time runs from
the sim config's start at the sim speed (at least real time).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			l, err := load.New()
			if err != nil {
				return err
			}
			w := &watch.Watcher{Dir: args[0], Loader: l, Debounce: debounce, Log: slog.Default()}
			for _, d := range w.Load() {
				fmt.Fprintln(cmd.ErrOrStderr(), d.Error())
			}
			set := w.Set()
			var docs []spec.Document
			if set.Env != nil {
				docs = append(docs, set.Env)
			}
			ws, err := workspaceFrom(args[0], docs, nil, simOptions{})
			if err != nil {
				return err
			}
			defer ws.close()
			w.Tick = ws.env.Spec.Tick.D()
			cfg, _ := sim.Config(ws.env)
			clk := clock.NewScaled(clock.Wall{}, ws.now, max(cfg.Speed, 1))
			providersAt := providerConfigs(ws.env)
			w.Reconcile = func(ctx context.Context, set watch.Set, touched []spec.Document, reason string) {
				if set.Env != nil && providerConfigs(set.Env) != providersAt {
					providersAt = providerConfigs(set.Env)
					slog.Warn("the Environment's providers changed: restart watch for them to take effect; its other settings apply now")
				}
				reconcileOnce(ctx, ws, set, touched, reason, clk.Now(), w.Tick)
			}
			// Providers that stream world changes trigger a reconcile.
			triggers := make(chan string, 64)
			w.Triggers = triggers
			for name, p := range ws.providers {
				if sc, _ := p.Schema(ctx); !sc.Events {
					continue
				}
				go func(name string, p providers.Full) {
					err := p.Events(ctx, clk.Now(), func(e providers.Event) error {
						select {
						case triggers <- fmt.Sprintf("event from %s: %s %s", name, e.Address, e.Reason):
						default: // a reconcile is already due
						}
						return nil
					})
					if err != nil && ctx.Err() == nil {
						slog.Error("provider events stopped", "provider", name, "error", err)
					}
				}(name, p)
			}
			slog.Info("watching", "dir", args[0], "tick", w.Tick, "specs", len(set.Specs))
			return w.Run(ctx)
		},
	}
	cmd.Flags().DurationVar(&debounce, "debounce", 20*time.Millisecond, "wait this long after an edit for more edits")
	return cmd
}

// reconcileOnce plans and applies the given specs (touched ones, or all).
func reconcileOnce(ctx context.Context, ws *workspace, set watch.Set, touched []spec.Document, reason string, now time.Time, lockWait time.Duration) {
	if set.Env != nil {
		ws.env = set.Env
		ws.eng.Env = set.Env
	}
	ws.eng.Specs = set.Specs
	if touched != nil {
		ws.eng.Specs = touched
	}
	err := ws.withState(ctx, "setpoint watch", lockWait, func(st *state.State) error {
		p := ws.eng.Plan(ctx, now, st)
		for _, e := range p.Errors {
			slog.Error("plan", "spec", e.Spec, "at", e.Pos, "error", e.Text)
		}
		if p.Empty() {
			slog.Debug("reconciled", "reason", reason, "held", len(p.Held))
			return nil
		}
		for _, r := range ws.eng.Apply(ctx, now, p, st) {
			c := r.Change
			if r.Err != "" {
				continue // Apply logged it with the spec's position
			}
			slog.Info("applied", "reason", reason, "address", c.Address, "attribute", c.Attribute, "from", c.From, "to", c.To, "wanted", c.Wanted, "why", c.Reason)
		}
		return nil
	})
	if err != nil {
		slog.Error("reconcile", "reason", reason, "error", err)
	}
}

// providerConfigs summarises what starting the providers depends on.
func providerConfigs(env *spec.Environment) string {
	b, _ := json.Marshal([]any{env.Spec.Providers, env.Spec.PluginPath})
	return string(b)
}
