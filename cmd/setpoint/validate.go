package main

import (
	"fmt"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/spf13/cobra"

	"github.com/setpoint-dev/setpoint/cue/load"
	"github.com/setpoint-dev/setpoint/cue/spec"
)

func newValidateCmd() *cobra.Command {
	var asJSON bool
	cue := defaultCUELimits()
	cmd := &cobra.Command{
		Use:   "validate DIR|FILE...",
		Short: "Check specs against their schemas and the cross-document rules",
		Long: `validate checks every .yaml, .yml and .cue file under each argument: each
document against its kind's CUE schema, then the rules that span documents
(duplicate names, two specs of one kind on one target, one Environment).
.cue files are evaluated in a child process bounded by --cue-timeout and
--cue-memory, so validate is safe on specs from an untrusted pull request.
Every error is reported as file:line:column: field.path: message (expected ...).
Exit status 1 if any error was found.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tuneBatchGC()
			l, err := newLoader(cmd.Context(), cue)
			if err != nil {
				return err
			}
			pr := newProgress(cmd.ErrOrStderr(), "validating files")
			l.Progress = pr.update
			r := l.Load(args...)
			pr.done()
			// The paths an Environment names are checked as plan checks
			// them, without opening a file they name.
			for _, d := range r.Documents {
				if env, ok := d.(*spec.Environment); ok {
					if root, err := specRoot(args, env.Src.Pos.File); err == nil {
						_, bad := resolveEnvPaths(root, env, trust)
						r.Diags = append(r.Diags, bad...)
					}
				}
			}
			r.Diags.Sort()
			diags, files, docs := r.Diags, r.Files, len(r.Documents)
			if asJSON {
				enc := jsonOut(cmd.OutOrStdout())
				if diags == nil {
					diags = load.Diagnostics{}
				}
				if err := enc.Encode(map[string]any{"valid": len(diags) == 0, "files": files, "documents": docs, "errors": diags}); err != nil {
					return err
				}
			} else {
				for _, d := range diags {
					fmt.Fprintln(cmd.ErrOrStderr(), d.Error())
				}
				if len(diags) == 0 {
					fmt.Fprintln(cmd.OutOrStdout(), r.Summary())
				} else {
					fmt.Fprintln(cmd.ErrOrStderr(), r.Summary())
				}
			}
			if len(diags) > 0 {
				return errSilent
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON on stdout")
	cue.addFlags(cmd.Flags())
	return cmd
}

// tuneBatchGC trades memory for CPU in a short batch run: validation makes
// much short-lived garbage around a small live heap, so the collector runs
// less often (GOGC 200) under a soft memory limit that keeps the peak near
// the live heap: 40 MiB, or twice the live heap once that is bigger (a fixed
// limit under a large live heap would make the collector run constantly).
// GOGC and GOMEMLIMIT in the environment still win.
func tuneBatchGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(200)
	}
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	const floor = 40 << 20
	debug.SetMemoryLimit(floor)
	go func() {
		sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		for range time.Tick(20 * time.Millisecond) {
			metrics.Read(sample)
			if sample[0].Value.Kind() == metrics.KindUint64 {
				debug.SetMemoryLimit(max(floor, 2*int64(sample[0].Value.Uint64())))
			}
		}
	}()
}
