package main

import (
	"cmp"
	"k8s.io/client-go/kubernetes"

	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/setpoint-dev/setpoint/cue/spec"
	k8sprov "github.com/setpoint-dev/setpoint/providers/kubernetes"
	"github.com/setpoint-dev/setpoint/providers/kubernetes/kstate"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/setpoint-dev/setpoint/cue/load"
	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/internal/atomicfile"
	"github.com/setpoint-dev/setpoint/internal/confine"
)

// stateAdvice is appended to an error about unreadable state: what to run.
func stateAdvice(err error, dir string) error {
	if !errors.Is(err, state.ErrCorrupt) {
		return err
	}
	return fmt.Errorf("%w\n  setpoint state verify %s lists every unreadable shard with why;\n  setpoint state reseal %s SHARD re-seals one edited by hand;\n  setpoint state reset %s SHARD moves one aside (its object's attributes are then adopted again from the world, as new)", err, dir, dir, dir)
}

// adviseLockTimeout says how to wait for a lock another process holds, to
// a command that has --lock-timeout and did not wait (the lock's own error
// names no flag: watch has none).
func adviseLockTimeout(err error) error {
	var le *state.LockedError
	if errors.As(err, &le) && le.Waited == nil {
		return fmt.Errorf("%w; wait for it to finish, or run again with --lock-timeout to wait", err)
	}
	return err
}

// stateBackend finds a directory's state from its Environment, starting
// no provider.
func stateBackend(ctx context.Context, dir string) (state.Backend, error) {
	sd, err := openStateDir(ctx, dir)
	return sd.backend, err
}

// stateDir is a directory's state and what its specs are now.
type stateDir struct {
	backend state.Backend
	path    string // the state file ("" in a cluster)
	loaded  *load.Result
}

func openStateDir(ctx context.Context, dir string) (stateDir, error) {
	var sd stateDir
	l, err := newLoader(ctx, defaultCUELimits())
	if err != nil {
		return sd, err
	}
	sd.loaded = l.LoadDir(dir)
	env := sd.loaded.Environment()
	if env == nil {
		return sd, fmt.Errorf("%s: no valid Environment (setpoint validate %s says why)", dir, dir)
	}
	root, err := confine.NewRoot(dir)
	if err != nil {
		return sd, err
	}
	paths, bad := resolveEnvPaths(root, env, trust)
	for _, d := range bad {
		if d.Path == "spec.state.path" {
			return sd, errors.New(d.Error())
		}
	}
	if env.Spec.State.Backend == "kubernetes" {
		sd.backend, err = clusterState(env)
		return sd, err
	}
	sd.backend, sd.path = state.NewFile(paths.state), paths.state
	return sd, nil
}

// newConfirmReleaseCmd confirms, once, that the specs gone from a
// directory were deleted on purpose.
func newConfirmReleaseCmd() *cobra.Command {
	var yes bool
	var lockWait time.Duration
	cmd := &cobra.Command{
		Use:   "confirm-release DIR",
		Short: "Confirm, once, that the specs gone from DIR were deleted on purpose, so their fields are released",
		Long: `When more than half of the specs setpoint applied for since the last
confirmation are gone (an empty or partial checkout looks the same), nothing is
released. confirm-release lists the specs gone and, confirmed, marks them in the
state: their fields are released at the next plan, apply or watch reconcile. It
names those specs only; a spec deleted later is judged again. While a watch
holds the state, the confirmation is handed to it (a file beside the state) and
taken at its next reconcile. Any other holder (an apply, a plan) reads no such
file: confirm-release then waits for the lock as long as --lock-timeout says,
or refuses at once, naming the holder.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			sd, err := openStateDir(ctx, args[0])
			if err != nil {
				return err
			}
			if sd.loaded.Diags.HasErrors() {
				return fmt.Errorf("%s: some spec files do not load, and a spec that does not load cannot be told from a deleted one: fix them first (setpoint validate %s)", args[0], args[0])
			}
			live := map[string]bool{}
			for _, d := range sd.loaded.Specs() {
				live[d.Head().ID()] = true
			}
			const who = "setpoint state confirm-release"
			unlock, lockErr := sd.backend.Lock(ctx, who, false)
			if errors.Is(lockErr, state.ErrLocked) && !heldByWatch(sd.path) && lockWait > 0 {
				// A one-shot command lets the lock go when it is done; a
				// watch never does, and is handed the confirmation instead.
				slog.Info("waiting for the state lock", "held", lockErr.Error(), "timeout", lockWait)
				wctx, cancel := context.WithTimeout(ctx, lockWait)
				defer cancel()
				unlock, lockErr = sd.backend.Lock(wctx, who, true)
			}
			if lockErr != nil && !errors.Is(lockErr, state.ErrLocked) {
				return lockErr
			}
			if unlock != nil {
				defer unlock()
			}
			// The watch the confirmation is handed to, when one holds the
			// state: no other holder would ever read it.
			var watcher *state.Holder
			if lockErr != nil {
				if sd.path == "" {
					return fmt.Errorf("%w\n(in a cluster the confirmation needs the state lock: run it when no replica holds the shards)", lockErr)
				}
				watcher = state.LockHolder(sd.path)
				if !watcher.IsWatch() {
					return notHandedOver(lockErr, watcher)
				}
			}
			st, err := sd.backend.Load(ctx)
			if err != nil {
				return stateAdvice(err, args[0])
			}
			gone := engine.Gone(st, live)
			if len(gone) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "No spec setpoint applied for is gone: nothing to confirm.")
				return nil
			}
			if !yes {
				if err := confirmWith(cmd, fmt.Sprintf("%s gone from %s: deleted on purpose, release their fields?\n  %s\n", load.CountNoun(len(gone), "spec"), args[0], strings.Join(gone, "\n  "))); err != nil {
					return err
				}
			}
			set := map[string]bool{}
			for _, id := range gone {
				set[id] = true
			}
			if watcher == nil {
				engine.ConfirmGone(st, live, set)
				if _, err := sd.backend.Save(ctx, st); err != nil {
					return fmt.Errorf("saving the confirmation: %w", err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Confirmed %s deleted: their fields are released at the next plan, apply or watch.\n", load.CountNoun(len(gone), "spec"))
				return nil
			}
			host, _ := os.Hostname()
			b, _ := json.Marshal(confirmation{Specs: gone, At: time.Now().UTC(), By: fmt.Sprintf("pid %d on %s", os.Getpid(), host), Holder: watcher.String()})
			if err := atomicfile.Write(state.ConfirmPath(sd.path), b, 0o644); err != nil {
				return fmt.Errorf("handing the confirmation over: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "The state is held (%v).\nThe confirmation of %s is handed to it: their fields are released at its next reconcile.\n", lockErr, load.CountNoun(len(gone), "spec"))
			return nil
		},
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "confirm without asking")
	cmd.Flags().DurationVar(&lockWait, "lock-timeout", 0, "while an apply or a plan holds the state, wait this long for the lock (0: refuse at once, naming the holder); a watch holding it is handed the confirmation at once")
	return cmd
}

// heldByWatch reports whether the lock file of the file state at path
// ("" in a cluster) names a running watch as its holder.
func heldByWatch(path string) bool {
	return path != "" && state.LockHolder(path).IsWatch()
}

// notHandedOver is confirm-release's refusal when the state is held by a
// process that is not a watch (h; nil when the lock file does not say).
func notHandedOver(lockErr error, h *state.Holder) error {
	why := "the lock file does not say who holds it"
	if h != nil {
		why = h.Who + " is not one"
	}
	var le *state.LockedError
	if errors.As(lockErr, &le) && le.Waited != nil {
		return fmt.Errorf("%w\n(not confirmed: only a running setpoint watch is handed a confirmation, and %s: run again when the holder is done, or with a longer --lock-timeout)", lockErr, why)
	}
	return fmt.Errorf("%w\n(not confirmed: only a running setpoint watch is handed a confirmation, and %s: wait for the holder to finish, or run again with --lock-timeout to wait for the lock)", lockErr, why)
}

// stateNamespace is where in-cluster state lives: --state-namespace, else
// the pod's own namespace in the cluster, else setpoint-system.
var stateNamespace string

// clusterState is the Environment's state in the cluster the kubernetes
// provider's flags name: one ConfigMap per target, a Lease as the lock.
func clusterState(env *spec.Environment) (state.Backend, error) {
	rc, err := k8sprov.RestConfig(k8sprov.Config{Kubeconfig: cluster.kubeconfig, Context: cluster.context, InCluster: cluster.inCluster})
	if err != nil {
		return nil, fmt.Errorf("state backend kubernetes: %w", err)
	}
	// Its own client and rate: Lease renewals must not queue behind a
	// plan's reads (client-go's default is 5 requests a second).
	rc.QPS, rc.Burst = 50, 100
	rc.Timeout = 30 * time.Second
	core, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("state backend kubernetes: %w", err)
	}
	ns := stateNamespace
	if ns == "" && cluster.inCluster {
		if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil {
			ns = strings.TrimSpace(string(b))
		}
	}
	if ns == "" {
		ns = "setpoint-system"
	}
	return kstate.New(core, ns, env.Metadata.Name), nil
}

func newStateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "state",
		Short: "Show, verify and repair what setpoint remembers",
		Long: `state shows and checks the state a directory's Environment names: per target
object, each attribute's user value (at adoption), what setpoint applied, when,
and for which specs. A shard that cannot be read is never reset by plan or apply;
verify lists them, reseal re-seals one edited by hand, reset moves one aside.`,
	}
	var asJSON bool
	show := &cobra.Command{
		Use:   "show DIR",
		Short: "List every object's remembered attributes",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := stateBackend(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			st, err := b.Load(cmd.Context())
			if err != nil {
				return stateAdvice(err, args[0])
			}
			type attr struct {
				Path      string   `json:"path"`
				User      string   `json:"user,omitempty"`
				Applied   string   `json:"applied,omitempty"`
				AppliedAt string   `json:"appliedAt,omitempty"`
				By        []string `json:"by,omitempty"`
				Policies  []string `json:"policies,omitempty"`
				// Released is a release's tombstone: setpoint's value and
				// the user's it replaced.
				Released         string `json:"released,omitempty"`
				ReleasedUser     string `json:"releasedUser,omitempty"`
				ReleaseConfirmed bool   `json:"releaseConfirmed,omitempty"`
				// Pending is a journaled intent not yet settled.
				Pending string `json:"pending,omitempty"`
			}
			type object struct {
				Address    string `json:"address"`
				Attributes []attr `json:"attributes"`
			}
			var out []object
			for _, o := range st.Objects() {
				so, _ := st.Object(o)
				ob := object{Address: o.String()}
				for _, k := range slices.Sorted(maps.Keys(so.Attrs)) {
					e := so.Attrs[k]
					a := attr{Path: k, Policies: slices.Sorted(maps.Keys(e.Policy))}
					if e.User != nil {
						a.User = e.User.String()
					}
					if e.Applied != nil {
						a.Applied, a.AppliedAt, a.By = e.Applied.Value.String(), e.Applied.At.UTC().Format(time.RFC3339), e.Applied.By
					}
					if r := e.Released; r != nil {
						a.Released, a.ReleaseConfirmed = r.Value.String(), r.Confirmed
						if r.User != nil {
							a.ReleasedUser = r.User.String()
						}
						if a.By == nil {
							a.By = r.By
						}
					}
					a.ReleaseConfirmed = a.ReleaseConfirmed || e.ReleaseConfirmed
					if pd := e.Pending; pd != nil {
						a.Pending = pd.Action + " " + pd.Value.String()
					}
					ob.Attributes = append(ob.Attributes, a)
				}
				out = append(out, ob)
			}
			if asJSON {
				if out == nil {
					out = []object{}
				}
				return jsonOut(cmd.OutOrStdout()).Encode(out)
			}
			w := cmd.OutOrStdout()
			for _, o := range out {
				fmt.Fprintln(w, o.Address)
				for _, a := range o.Attributes {
					var parts []string
					if a.User != "" {
						parts = append(parts, "user "+a.User)
					}
					if a.Applied != "" {
						parts = append(parts, fmt.Sprintf("applied %s at %s by %s", a.Applied, a.AppliedAt, strings.Join(a.By, ", ")))
					}
					if a.Released != "" {
						parts = append(parts, fmt.Sprintf("released (setpoint's %s, user's %s) by %s", a.Released, cmp.Or(a.ReleasedUser, "unknown"), strings.Join(a.By, ", ")))
					}
					if a.ReleaseConfirmed {
						parts = append(parts, "deletion confirmed")
					}
					if a.Pending != "" {
						parts = append(parts, "journal: "+a.Pending+" (not settled)")
					}
					if len(a.Policies) > 0 {
						parts = append(parts, "policies "+strings.Join(a.Policies, ", "))
					}
					fmt.Fprintf(w, "    %s: %s\n", a.Path, strings.Join(parts, "; "))
				}
			}
			fmt.Fprintf(w, "%s in %s\n", load.CountNoun(len(out), "object"), b)
			return nil
		},
	}
	show.Flags().BoolVar(&asJSON, "json", false, "print as JSON")

	verify := &cobra.Command{
		Use:   "verify DIR",
		Short: "Check every shard's checksum and format; exit 1 if any cannot be read",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := stateBackend(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			st, err := b.Load(cmd.Context())
			var le *state.LoadError
			switch {
			case errors.As(err, &le):
				for _, s := range le.Shards {
					fmt.Fprintf(cmd.ErrOrStderr(), "%s: %v\n", s.File, s.Err)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "%s cannot be read; %s read\n", load.CountNoun(len(le.Shards), "shard"), load.CountNoun(len(st.Objects()), "object"))
				return errSilent
			case err != nil:
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s read, every checksum matches (%s)\n", load.CountNoun(len(st.Objects()), "object"), b)
			return nil
		},
	}

	var yes bool
	var lockWait time.Duration
	repair := func(use, short string, do func(cmd *cobra.Command, r state.Repairer, shard string) (string, error)) *cobra.Command {
		c := &cobra.Command{
			Use:   use + " DIR SHARD...",
			Short: short,
			Args:  cobra.MinimumNArgs(2),
			RunE: func(cmd *cobra.Command, args []string) error {
				b, err := stateBackend(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				r, ok := b.(state.Repairer)
				if !ok {
					return fmt.Errorf("the %s state cannot be repaired from here", b)
				}
				if !yes {
					if err := confirmWith(cmd, fmt.Sprintf("%s %s in %s?", use, strings.Join(args[1:], ", "), b)); err != nil {
						return err
					}
				}
				ctx := cmd.Context()
				if lockWait > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, lockWait)
					defer cancel()
				}
				unlock, err := b.Lock(ctx, "setpoint state "+use, lockWait > 0)
				if err != nil {
					return adviseLockTimeout(err)
				}
				defer unlock()
				for _, s := range args[1:] {
					msg, err := do(cmd, r, s)
					if err != nil {
						return fmt.Errorf("%s %s: %w", use, s, err)
					}
					fmt.Fprintln(cmd.OutOrStdout(), msg)
				}
				return nil
			},
		}
		c.Flags().BoolVar(&yes, "yes", false, "do it without asking")
		c.Flags().DurationVar(&lockWait, "lock-timeout", 0, "wait this long for the state lock")
		return c
	}
	reseal := repair("reseal", "Re-seal shards edited by hand (their content must still be valid)", func(cmd *cobra.Command, r state.Repairer, s string) (string, error) {
		if err := r.Reseal(cmd.Context(), s); err != nil {
			return "", err
		}
		return "re-sealed " + s, nil
	})
	reset := repair("reset", "Move shards aside: their objects are adopted again from the world, as new", func(cmd *cobra.Command, r state.Repairer, s string) (string, error) {
		to, err := r.Quarantine(cmd.Context(), s, time.Now())
		if err != nil {
			return "", err
		}
		return "moved " + s + " aside to " + to, nil
	})
	cmd.AddCommand(show, verify, reseal, reset, newConfirmReleaseCmd())
	return cmd
}

// confirmWith asks a yes/no question on a terminal; without one it
// refuses rather than guess.
func confirmWith(cmd *cobra.Command, question string) error {
	if !term.IsTerminal(int(os.Stdin.Fd())) {
		return fmt.Errorf("not done: no terminal to confirm on; run again with --yes")
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s Only 'yes' will be accepted: ", question)
	line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	if strings.TrimSpace(line) != "yes" {
		return fmt.Errorf("cancelled")
	}
	return nil
}
