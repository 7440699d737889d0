package main

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/setpoint-dev/setpoint/engine/plan"
	"github.com/setpoint-dev/setpoint/engine/state"
)

// errChanges is the --detailed-exitcode "something would be applied".
var errChanges = errors.New("changes")

func newPlanCmd() *cobra.Command {
	var out, format, trustedEnv string
	var asJSON, detailed, readOnly bool
	var lockWait time.Duration
	cmd := &cobra.Command{
		Use:   "plan DIR",
		Short: "Show what setpoint would change and why, with the numbers",
		Long: `plan observes the directory's targets and signals, decides, and prints each
change with its reason and what is held and why. It records what it saw in the
state (the user's values at adoption, recommendations, stability windows) and
changes nothing else. --out saves the plan for "setpoint apply FILE".
--read-only takes no lock and saves nothing: a plan beside a running watch, or
in a pull request's CI job with read-only credentials.
--format markdown prints it for a pull request's comment (with --read-only in
CI: see examples/ci). On a pull request's specs, add --trusted-environment FILE
(the base branch's Environment): endpoints, credentials, providers, scraping
and state then come from it, never from the change. --read-only skips the
kubernetes provider's server-side dry run (it needs patch), so read-only
credentials (get, list) are enough.
--detailed-exitcode: 0 nothing to apply, 1 error, 2 something would be applied.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch format {
			case "text", "json", "markdown":
			default:
				return fmt.Errorf("--format %q: want text, json or markdown", format)
			}
			if trustedEnv != "" && (!readOnly || out != "") {
				// The mode is for specs not to be trusted: nothing of theirs
				// may be saved, and a saved plan would be applied under the
				// directory's own Environment.
				return fmt.Errorf("--trusted-environment needs --read-only, and saves no plan (--out)")
			}
			tuneBatchGC()
			w, err := openWorkspace(args[0], simOptions{trustedEnv: trustedEnv})
			if err != nil {
				return err
			}
			defer w.close()
			w.printDiags(cmd.ErrOrStderr())
			var p *plan.Plan
			if readOnly {
				// A server-side dry run is a patch request: read-only
				// credentials cannot make it, and a credential that can
				// is not read-only.
				w.eng.SkipDryRun = map[string]bool{"kubernetes": true}
				st, err := w.readState(cmd.Context())
				if err != nil {
					return err
				}
				p = w.eng.Plan(cmd.Context(), w.clockNow(), st, nil)
			} else {
				err = w.withState(cmd.Context(), "setpoint plan", lockWait, func(st *state.State) error {
					p = w.eng.Plan(cmd.Context(), w.clockNow(), st, nil)
					return nil
				})
				if errors.Is(err, state.ErrLocked) {
					return fmt.Errorf("%w\n(to plan beside it without the lock and without saving: setpoint plan --read-only %s)", err, args[0])
				}
				if err != nil {
					return err
				}
			}
			p.Notes = append(slices.Clone(w.notes), p.Notes...)
			if out != "" {
				if err := p.Save(out); err != nil {
					return err
				}
			}
			if asJSON {
				format = "json"
			}
			switch format {
			case "json":
				if err := p.JSON(cmd.OutOrStdout()); err != nil {
					return err
				}
			case "markdown":
				// The comment is all a reviewer reads: a spec that does
				// not load is an error in it, not only on stderr.
				md := *p
				md.Errors = nil
				for _, d := range w.diags {
					n := d
					if n.Path != "" {
						n.Message = n.Path + ": " + n.Message
					}
					if n.Expected != "" {
						n.Message += " (expected " + n.Expected + ")"
					}
					md.Errors = append(md.Errors, n)
				}
				md.Errors = append(md.Errors, p.Errors...)
				if err := md.Markdown(cmd.OutOrStdout(), 0); err != nil {
					return err
				}
			default:
				p.Text(cmd.OutOrStdout())
				if out != "" {
					fmt.Fprintf(cmd.OutOrStdout(), "Saved the plan to %s: apply it with \"setpoint apply %s\".\n", out, out)
				}
			}
			if len(w.diags) > 0 || len(p.Errors) > 0 {
				return errSilent
			}
			if detailed && !p.Empty() {
				return errChanges
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "save the plan to this file")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the plan as JSON (--format json)")
	cmd.Flags().StringVar(&format, "format", "text", "text, json, or markdown (for a pull request's comment: a summary, each spec's part collapsible, at most 60,000 bytes)")
	cmd.Flags().BoolVar(&detailed, "detailed-exitcode", false, "exit 2 when something would be applied, 0 when not, 1 on error")
	cmd.Flags().BoolVar(&readOnly, "read-only", false, "take no lock and save nothing (beside a running watch; in CI on pull requests)")
	cmd.Flags().DurationVar(&lockWait, "lock-timeout", 0, "wait this long for the state lock (0: fail at once, naming the holder)")
	cmd.Flags().StringVar(&trustedEnv, "trusted-environment", "", "with --read-only: take the Environment from this file (the base branch's) instead of the directory's, for specs from a pull request")
	cmd.MarkFlagsMutuallyExclusive("read-only", "lock-timeout")
	return cmd
}
