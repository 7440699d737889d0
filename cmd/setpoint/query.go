package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/setpoint-dev/setpoint/cue/load"
	"github.com/setpoint-dev/setpoint/engine/signals"
	"github.com/setpoint-dev/setpoint/engine/signals/embedded"
	"github.com/setpoint-dev/setpoint/providers/sim"
)

func newQueryCmd() *cobra.Command {
	var dir, at string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "query [--dir DIR] [--at TIME] 'PROMQL'",
		Short: "Evaluate PromQL against the directory's signal source",
		Long: `query evaluates a PromQL expression at one instant against the signal source
of the directory's Environment. For the sim world, the trace is replayed (with
the changes applied so far) up to --at: RFC 3339, or an offset from the start
of the trace such as 15m; the default is the sim config's start.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := load.New()
			if err != nil {
				return err
			}
			r := l.LoadDir(dir)
			env := r.Environment()
			if env == nil {
				for _, d := range r.Diags {
					fmt.Fprintln(cmd.ErrOrStderr(), d.Error())
				}
				return fmt.Errorf("%s: no valid Environment to take the signal source from", dir)
			}
			if len(r.Diags) > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %d errors in other specs of %s (setpoint validate lists them)\n", len(r.Diags), dir)
			}
			if env.Spec.Signals.Default != "embedded" {
				return fmt.Errorf("%s: signals.default %q is not available yet; use embedded", env.Src.PosOf("spec.signals.default"), env.Spec.Signals.Default)
			}
			store := embedded.NewStore(0)
			p, err := sim.Open(env, store)
			if err != nil {
				return err
			}
			cfg, _ := sim.Config(env)
			when := p.World.Start().Add(cfg.Start.D())
			if at != "" {
				if when, err = p.World.ParseTime(at); err != nil {
					return err
				}
			}
			if when.Before(p.World.Start()) || when.After(p.World.End()) {
				return fmt.Errorf("time %s is outside the trace (%s to %s)", when.Format(time.RFC3339), p.World.Start().Format(time.RFC3339), p.World.End().Format(time.RFC3339))
			}
			started := time.Now()
			p.World.AdvanceTo(when)
			replay := time.Since(started)
			res, err := embedded.NewSource(store).Query(cmd.Context(), args[0], when)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "# at %s (%s into the trace; replayed in %s)\n", when.UTC().Format(time.RFC3339), when.Sub(p.World.Start()), replay.Round(time.Millisecond))
			if asJSON {
				return printResultJSON(cmd, res)
			}
			printResult(cmd, res)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", ".", "spec directory whose Environment names the signal source")
	cmd.Flags().StringVar(&at, "at", "", "evaluation time: RFC 3339 or an offset from the trace's start")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

func printResult(cmd *cobra.Command, res signals.Result) {
	out := cmd.OutOrStdout()
	if why := res.NoData(); why != "" {
		fmt.Fprintf(out, "no data: %s\n", why)
		return
	}
	sort.Slice(res.Samples, func(i, j int) bool { return res.Samples[i].Labels.String() < res.Samples[j].Labels.String() })
	for _, s := range res.Samples {
		if res.Kind == signals.Scalar {
			fmt.Fprintln(out, strconv.FormatFloat(s.Value, 'g', -1, 64))
			continue
		}
		fmt.Fprintf(out, "%s %s\n", s.Labels, strconv.FormatFloat(s.Value, 'g', -1, 64))
	}
	if res.Dropped > 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "# %d samples were NaN or Inf and are not shown\n", res.Dropped)
	}
}

func printResultJSON(cmd *cobra.Command, res signals.Result) error {
	samples := res.Samples
	if samples == nil {
		samples = []signals.Sample{}
	}
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	return enc.Encode(map[string]any{
		"expr":    res.Expr,
		"at":      res.At.UTC().Format(time.RFC3339),
		"kind":    res.Kind,
		"samples": samples,
		"dropped": res.Dropped,
		"noData":  res.NoData(),
	})
}
