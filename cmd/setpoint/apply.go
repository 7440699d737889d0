package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/diag"
	"github.com/setpoint-dev/setpoint/engine/plan"
	"github.com/setpoint-dev/setpoint/engine/state"
)

func newApplyCmd() *cobra.Command {
	var autoApprove, asJSON bool
	var lockWait time.Duration
	cmd := &cobra.Command{
		Use:   "apply DIR | apply PLAN.json",
		Short: "Apply what a plan proposes",
		Long: `apply DIR plans and applies, asking for confirmation on a terminal unless
--auto-approve. apply PLAN.json applies a saved plan without asking again, after
re-reading every attribute the plan observed: if any moved, it refuses and says
which. Changes are batched per provider; only those that succeed are recorded.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tuneBatchGC()
			if fi, err := os.Stat(args[0]); err == nil && !fi.IsDir() && strings.HasSuffix(args[0], ".json") {
				return applySaved(cmd, args[0], lockWait, asJSON)
			}
			w, err := openWorkspace(args[0], simOptions{})
			if err != nil {
				return err
			}
			defer w.close()
			w.printDiags(cmd.ErrOrStderr())
			var results []engine.Result
			var p *plan.Plan
			err = w.withState(cmd.Context(), "setpoint apply", lockWait, func(st *state.State) error {
				now := w.clockNow()
				p = w.eng.Plan(cmd.Context(), now, st, nil)
				if !asJSON {
					p.Text(cmd.OutOrStdout())
				}
				if p.Empty() {
					return nil
				}
				if !autoApprove {
					if err := confirm(cmd); err != nil {
						return err
					}
				}
				results = w.apply(context.WithoutCancel(cmd.Context()), now, p, st)
				return nil
			})
			if err != nil {
				return err
			}
			return report(cmd, p, results, asJSON, len(w.diags) > 0)
		},
	}
	cmd.Flags().BoolVar(&autoApprove, "auto-approve", false, "apply without asking")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the plan and results as JSON")
	cmd.Flags().DurationVar(&lockWait, "lock-timeout", 0, "wait this long for the state lock (0: fail at once, naming the holder)")
	return cmd
}

// Apply runs on a context an interrupt does not cancel: a provider may
// finish a change the client gave up on, and the state must then say so;
// each provider call has its own timeout.

// confirm asks before applying; without a terminal it refuses rather
// than guess.
func confirm(cmd *cobra.Command) error {
	if !term.IsTerminal(int(os.Stdin.Fd())) {
		return fmt.Errorf("not applying: no terminal to confirm on; review the plan and run again with --auto-approve, or save it with plan --out and apply the file")
	}
	if err := confirmWith(cmd, "\nApply these changes?"); err != nil {
		return fmt.Errorf("apply cancelled")
	}
	return nil
}

func applySaved(cmd *cobra.Command, path string, lockWait time.Duration, asJSON bool) error {
	p, err := plan.Load(path)
	if err != nil {
		return err
	}
	w, err := openWorkspace(p.Dir, simOptions{})
	if err != nil {
		return err
	}
	defer w.close()
	if edited := specsMoved(p.Specs, w.eng.SpecDigests()); len(edited) > 0 {
		return fmt.Errorf("the saved plan %s is stale: %d specs differ from the directory since it was made:\n  %s\nrun setpoint plan again", path, len(edited), strings.Join(edited, "\n  "))
	}
	var results []engine.Result
	err = w.withState(cmd.Context(), "setpoint apply "+path, lockWait, func(st *state.State) error {
		now := w.clockNow()
		if moved := plan.Moved(p.Observed, w.eng.Observe(cmd.Context(), now)); len(moved) > 0 {
			return fmt.Errorf("the saved plan %s is stale: %d observed attributes moved since it was made:\n  %s\nrun setpoint plan again", path, len(moved), strings.Join(moved, "\n  "))
		}
		if slices.ContainsFunc(p.Changes, func(c plan.Change) bool { return c.Action == action.Delete }) {
			// What decided a delete may be a signal (a cluster's
			// instances), which no observed attribute carries: a fresh
			// plan, on a copy of the state it does not save, must still
			// make every delete.
			scratch, err := w.state.Load(cmd.Context())
			if err != nil {
				return stateAdvice(err, w.dir)
			}
			confirm := w.eng.ConfirmGone // taken by the real state only
			fresh := w.eng.Plan(cmd.Context(), now, scratch, nil)
			w.eng.ConfirmGone = confirm
			if gone := plan.DeletesGone(p, fresh); len(gone) > 0 {
				return fmt.Errorf("the saved plan %s is stale: %d of its deletes would not be made now:\n  %s\nrun setpoint plan again", path, len(gone), strings.Join(gone, "\n  "))
			}
		}
		// What the plan adopted (a --read-only plan saved none of it).
		engine.Adopt(p, st)
		results = w.apply(context.WithoutCancel(cmd.Context()), now, p, st)
		return nil
	})
	if err != nil {
		return err
	}
	if !asJSON {
		p.Text(cmd.OutOrStdout())
	}
	return report(cmd, p, results, asJSON, false)
}

// specsMoved lists the specs whose digest differs between a saved plan
// and the directory now: edited, added or removed.
func specsMoved(planned, now map[string]string) []string {
	var out []string
	for id, d := range planned {
		switch n, ok := now[id]; {
		case !ok:
			out = append(out, id+": removed (or now invalid)")
		case n != d:
			out = append(out, id+": edited")
		}
	}
	for id := range now {
		if _, ok := planned[id]; !ok {
			out = append(out, id+": added")
		}
	}
	sort.Strings(out)
	return out
}

func report(cmd *cobra.Command, p *plan.Plan, results []engine.Result, asJSON, specErrors bool) error {
	failed := 0
	for _, r := range results {
		if r.Err != "" {
			failed++
		}
	}
	if asJSON {
		p.Seal()
		type res struct {
			Address   string `json:"address"`
			Attribute string `json:"attribute"`
			To        string `json:"to"`
			Error     string `json:"error,omitempty"`
		}
		var rs []res
		for _, r := range results {
			rs = append(rs, res{r.Change.Address.String(), r.Change.Attribute.String(), r.Change.To, r.Err})
		}
		enc := jsonOut(cmd.OutOrStdout())
		if err := enc.Encode(map[string]any{"plan": p, "results": rs}); err != nil {
			return err
		}
	} else {
		for _, r := range results {
			if r.Err != "" {
				fmt.Fprintln(cmd.ErrOrStderr(), "error:", diag.Escape(r.Err))
			}
		}
		fmt.Fprintf(cmd.OutOrStdout(), "Apply complete: %d applied, %d failed, %d held.\n", len(results)-failed, failed, len(p.Held))
	}
	if failed > 0 || specErrors || len(p.Errors) > 0 {
		return errSilent
	}
	return nil
}
