package main

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/setpoint-dev/setpoint/engine/signals"
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
			// The same path as plan: the sim world in its provider process,
			// its metrics pulled into the store through Signals.
			w, err := openWorkspace(dir, simOptions{})
			if err != nil {
				return err
			}
			defer w.close()
			if len(w.diags) > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %d errors in other specs of %s (setpoint validate lists them)\n", len(w.diags), dir)
			}
			if w.trace == nil {
				return fmt.Errorf("%s: query needs a signal source: this release has the sim world's", dir)
			}
			start, end := w.trace.Start, w.trace.Start.Add(w.trace.Duration())
			when := w.now
			if at != "" {
				if when, err = w.trace.ParseTime(at); err != nil {
					return err
				}
			}
			if when.Before(start) || when.After(end) {
				return fmt.Errorf("time %s is outside the trace (%s to %s)", when.Format(time.RFC3339), start.Format(time.RFC3339), end.Format(time.RFC3339))
			}
			started := time.Now()
			for _, f := range w.eng.Feeds {
				f.Pull(cmd.Context(), when)
			}
			replay := time.Since(started)
			res, err := w.eng.Signals.Query(cmd.Context(), args[0], when)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "# at %s (%s into the trace; replayed in %s)\n", when.UTC().Format(time.RFC3339), when.Sub(start), replay.Round(time.Millisecond))
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
		if res.Kind == signals.Matrix {
			fmt.Fprintf(out, "%s\n", s.Labels)
			for _, p := range s.Points {
				fmt.Fprintf(out, "  %s @ %s\n", strconv.FormatFloat(p.V, 'g', -1, 64), p.T.Format(time.RFC3339))
			}
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
	enc := jsonOut(cmd.OutOrStdout())
	return enc.Encode(map[string]any{
		"expr":    res.Expr,
		"at":      res.At.UTC().Format(time.RFC3339),
		"kind":    res.Kind,
		"samples": samples,
		"dropped": res.Dropped,
		"noData":  res.NoData(),
	})
}
