package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/clock"
	nfrkind "github.com/setpoint-dev/setpoint/engine/kinds/nfr"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/sim"
)

func newSimCmd() *cobra.Command {
	var o simOptions
	var speed float64
	var until string
	var asJSON, quiet bool
	cmd := &cobra.Command{
		Use:   "sim DIR",
		Short: "Run the reconcile loop on virtual time against the sim world, to the trace's end",
		Long: `sim runs the same loop as watch — plan, then apply what the gate lets
through — every Environment tick of virtual time, from the start of the trace to
its end (or --until), against a fresh sim world; the directory's state files
are not touched. It prints applies as they happen and a summary: applies, held
changes by reason, replica-hours, and time over each latency target. The world
lives in the sim provider's process; if that process dies, sim fails (exit 1)
rather than go on with a new, empty world.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// Checked before anything starts, as the schema checks the
			// Environment's rateScale and speed: a flag overrides a field
			// and may not get past what the field may not.
			if err := checkSimFlags(cmd, o.rateScale, speed); err != nil {
				return err
			}
			o.fresh = true
			w, err := openWorkspace(args[0], o)
			if err != nil {
				return err
			}
			defer w.close()
			w.printDiags(cmd.ErrOrStderr())
			if w.trace == nil {
				return fmt.Errorf("%s: sim needs a sim provider in the Environment", args[0])
			}
			end, err := simEnd(w.trace, until)
			if err != nil {
				return err
			}
			if speed == 0 {
				cfg, _ := sim.Config(w.env)
				speed = cfg.Speed
			}
			var out io.Writer = cmd.OutOrStdout()
			if asJSON || quiet {
				out = io.Discard
			}
			sum, err := runSim(cmd.Context(), w, end, speed, out)
			if err != nil {
				return err
			}
			if asJSON {
				return jsonOut(cmd.OutOrStdout()).Encode(sum)
			}
			sum.print(cmd.OutOrStdout())
			if len(w.diags) > 0 {
				return errSilent
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&o.trace, "trace", "", "replay this trace instead of the Environment's")
	cmd.Flags().Float64Var(&o.rateScale, "rate-scale", 0, "multiply the trace's rate by this, in (0, 1e6], instead of the Environment's rateScale")
	cmd.Flags().Float64Var(&speed, "speed", 0, "virtual seconds per wall second (0: the Environment's speed; 0 there: as fast as it computes)")
	cmd.Flags().StringVar(&until, "until", "", "stop here, inside the trace: RFC 3339 or an offset from the trace's start")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print only the summary, as JSON")
	cmd.Flags().BoolVar(&quiet, "quiet", false, "print only the summary")
	return cmd
}

// checkSimFlags checks the flags that override Environment fields against
// the schema's bounds for those fields (cue/schema: rateScale in (0, 1e6],
// speed ≥ 0); a flag left unset is the Environment's.
func checkSimFlags(cmd *cobra.Command, rateScale, speed float64) error {
	if cmd.Flags().Changed("rate-scale") && !(rateScale > 0 && rateScale <= sim.MaxRateScale) {
		return fmt.Errorf("--rate-scale must be in (0, 1e6], got %v", rateScale)
	}
	if cmd.Flags().Changed("speed") && (math.IsNaN(speed) || math.IsInf(speed, 0) || speed < 0) {
		return fmt.Errorf("--speed must be a finite number ≥ 0, got %v", speed)
	}
	return nil
}

// simEnd is where a sim run stops: the trace's end, or --until inside it.
// Past the end there is no traffic to simulate, only time.
func simEnd(tr *sim.Trace, until string) (time.Time, error) {
	end := tr.Start.Add(tr.Duration())
	if until == "" {
		return end, nil
	}
	at, err := tr.ParseTime(until)
	if err != nil {
		return time.Time{}, fmt.Errorf("--until: %w", err)
	}
	switch {
	case !at.After(tr.Start):
		return time.Time{}, fmt.Errorf("--until %s is not after the trace's start (%s)", until, tr.Start.UTC().Format(time.RFC3339))
	case at.After(end):
		return time.Time{}, fmt.Errorf("--until %s is after the end of the trace: it ends at %s, %s from its start", until, end.UTC().Format(time.RFC3339), tr.Duration())
	}
	return at, nil
}

// Summary of a sim run.
type Summary struct {
	Virtual      string             `json:"virtual"`
	Wall         string             `json:"wall"`
	Ticks        int                `json:"ticks"`
	Applies      int                `json:"applies"`
	Failed       int                `json:"failed"`
	Held         map[string]int     `json:"held"`
	ReplicaHours map[string]float64 `json:"replicaHours"`
	// OverLatency is, per NFR with a latency target, the time its p99 was
	// above it, and the time it was measured at all.
	OverLatency map[string]string `json:"overLatency"`
	Final       map[string]string `json:"final"`
	over        map[string]time.Duration
	measured    map[string]time.Duration
}

// runSim runs the loop to end. The world lives only in the sim provider
// process (sim runs on a fresh world, without a state file to replay), so
// if that process exits the world is lost: the manager would start a new
// one, which simulates an empty world from the trace's start, and the rest
// of the run would measure that. runSim fails instead, at the tick where
// the process it started with is found gone. (Resuming would mean
// replaying the applied changes into the new process and waiting out its
// restart backoff; a run that is cheap to repeat is better failed than
// patched.)
func runSim(ctx context.Context, w *workspace, end time.Time, speed float64, out io.Writer) (*Summary, error) {
	sum := &Summary{Held: map[string]int{}, ReplicaHours: map[string]float64{}, OverLatency: map[string]string{}, Final: map[string]string{},
		over: map[string]time.Duration{}, measured: map[string]time.Duration{}}
	tick := w.env.Spec.Tick.D()
	if tick <= 0 {
		tick = 5 * time.Second
	}
	st := state.New()
	start := w.trace.Start
	wallStart := time.Now()
	var workloads []addrs.Object
	seen := map[addrs.Object]bool{}
	for _, n := range w.nfrs {
		a := addrs.Object{Provider: "sim", Kind: n.Spec.Target.Kind, Namespace: n.Metadata.Namespace, Name: n.Spec.Target.Name}
		if !seen[a] {
			seen[a] = true
			workloads = append(workloads, a)
		}
	}
	// 0 when the provider runs in process: nothing can exit on its own.
	pid := w.mgr.Pid("sim")
	lost := func(at time.Time) error {
		if pid == 0 || w.mgr.Pid("sim") == pid {
			return nil
		}
		return fmt.Errorf("the sim provider exited at virtual time %s (%s into the trace): the world it simulated, with the changes applied to it, is lost; sim does not go on with a new world, run it again",
			at.UTC().Format(time.RFC3339), at.Sub(start).Round(time.Second))
	}
	clk := clock.NewVirtual(start)
	for clk.Advance(tick); !clk.Now().After(end); clk.Advance(tick) {
		now := clk.Now()
		if ctx.Err() != nil {
			break
		}
		if speed > 0 {
			if wait := time.Duration(float64(now.Sub(start))/speed) - time.Since(wallStart); wait > 0 {
				time.Sleep(wait)
			}
		}
		sum.Ticks++
		p := w.eng.Plan(ctx, now, st, nil)
		for _, h := range p.Held {
			sum.Held[h.Held.Kind.String()]++
		}
		if !p.Empty() {
			for _, r := range w.eng.Apply(ctx, now, p, st) {
				at := now.Sub(start).Round(time.Second)
				if r.Err != "" {
					sum.Failed++
					fmt.Fprintf(out, "[%s] failed %s %s: %s\n", at, r.Change.Address, r.Change.Attribute, r.Err)
					continue
				}
				sum.Applies++
				c := r.Change
				fmt.Fprintf(out, "[%s] %s %s %s: %s → %s (wanted %s: %s)\n", at, c.Action.Symbol(), c.Address, shortAttr(c.Attribute), c.From, c.To, c.Wanted, c.Reason)
			}
		}
		sum.measure(ctx, w, now, tick, workloads)
		if err := lost(now); err != nil {
			return nil, err
		}
	}
	sum.Virtual = end.Sub(start).Round(time.Second).String()
	sum.Wall = time.Since(wallStart).Round(time.Millisecond).String()
	for k, d := range sum.over {
		m := sum.measured[k]
		pct := 0.0
		if m > 0 {
			pct = 100 * float64(d) / float64(m)
		}
		sum.OverLatency[k] = fmt.Sprintf("%s of %s (%.1f%%)", d, m, pct)
	}
	resp := w.providers["sim"].Read(ctx, providers.ReadRequest{Now: end, Addresses: workloads})
	if err := lost(end); err != nil {
		return nil, err
	}
	for _, o := range resp.Objects {
		sum.Final[o.Address.String()] = "ready " + o.Attributes[sim.AttrReadyReplicas].String()
	}
	return sum, nil
}

// measure accumulates replica-hours and time over each latency target.
func (s *Summary) measure(ctx context.Context, w *workspace, now time.Time, tick time.Duration, workloads []addrs.Object) {
	resp := w.providers["sim"].Read(ctx, providers.ReadRequest{Now: now, Addresses: workloads})
	for _, o := range resp.Objects {
		if n, ok := o.Attributes[sim.AttrReadyReplicas]; ok && n.Type() == values.Count {
			s.ReplicaHours[o.Address.Namespace+"/"+o.Address.Name] += float64(n.Int()) * tick.Hours()
		}
	}
	r, err := w.eng.Signals.Query(ctx, nfrkind.QueryP99, now)
	if err != nil {
		return
	}
	p99 := r.By("namespace", "app")
	for _, n := range w.nfrs {
		if n.Spec.Latency == nil {
			continue
		}
		v, ok := p99[n.Metadata.Namespace+"/"+n.Spec.Target.Name]
		if !ok {
			continue
		}
		id := n.ID()
		s.measured[id] += tick
		if time.Duration(v*float64(time.Second)) > n.Spec.Latency.P99.D() {
			s.over[id] += tick
		}
	}
}

func shortAttr(p addrs.Path) string {
	a := p.String()
	a = strings.Replace(a, "spec.template.spec.containers", "containers", 1)
	return strings.Replace(a, `spec.template.metadata.annotations["autoscaling.knative.dev/min-scale"]`, "min-scale", 1)
}

func (s *Summary) print(w io.Writer) {
	fmt.Fprintf(w, "\nSimulated %s of trace in %s (%d ticks): %d applied, %d failed.\n", s.Virtual, s.Wall, s.Ticks, s.Applies, s.Failed)
	if len(s.Held) > 0 {
		fmt.Fprintf(w, "Held (change × tick): %s\n", joinCounts(s.Held))
	}
	for _, k := range slices.Sorted(maps.Keys(s.ReplicaHours)) {
		fmt.Fprintf(w, "Replica-hours %-22s %6.2f\n", k, s.ReplicaHours[k])
	}
	for _, k := range slices.Sorted(maps.Keys(s.OverLatency)) {
		fmt.Fprintf(w, "p99 over target  %-22s %s\n", k, s.OverLatency[k])
	}
}

func joinCounts(m map[string]int) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
