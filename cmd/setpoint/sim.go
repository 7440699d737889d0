package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/clock"
	fleetkind "github.com/setpoint-dev/setpoint/engine/kinds/fleet"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/internal/simreport"
	"github.com/setpoint-dev/setpoint/internal/simtable"
	"github.com/setpoint-dev/setpoint/providers"
	fleetcluster "github.com/setpoint-dev/setpoint/providers/cluster"
	"github.com/setpoint-dev/setpoint/providers/sim"
)

func newSimCmd() *cobra.Command {
	var o simOptions
	var speed float64
	var until string
	var asJSON, quiet, baseline, providerProcess bool
	var seed int64
	var reportDir string
	cmd := &cobra.Command{
		Use:   "sim DIR",
		Short: "Run the reconcile loop on virtual time against the sim world, to the trace's end",
		Long: `sim runs the same loop as watch — plan, then apply what the gate lets
through — every Environment tick of virtual time, from the start of the trace to
its end (or --until), against a fresh sim world; the directory's state files
are not touched. It prints applies as they happen and a summary: applies, held
changes by reason, replica-hours, and time over each latency target. The sim
provider runs inside this process, its world the run's own; with
--provider-process it runs as a provider process, as watch runs it,
and if that process dies sim fails (exit 1) rather than go on with a new,
empty world.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// Checked before anything starts, as the schema checks the
			// Environment's rateScale and speed: a flag overrides a field
			// and may not get past what the field may not.
			if err := checkSimFlags(cmd, o.rateScale, speed); err != nil {
				return err
			}
			if cmd.Flags().Changed("seed") {
				o.seed = &seed
			}
			o.fresh = true
			o.simProcess = providerProcess
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
			if reportDir != "" {
				// The report is written after the whole run: what would
				// stop it there (a file at the path, a directory where a
				// plot goes) is said before the run starts.
				var names []string
				for _, wl := range w.simWorkloads() {
					names = append(names, wl.addr.Namespace+"/"+wl.addr.Name)
				}
				if err := simreport.Check(reportDir, names); err != nil {
					return fmt.Errorf("--report: %w", err)
				}
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
			sum.Seed = w.simCfg.Seed
			if baseline {
				if err := runBaselines(cmd.Context(), args[0], o, w, end, sum, cmd.ErrOrStderr()); err != nil {
					return err
				}
			}
			if reportDir != "" {
				files, err := simreport.Write(reportDir, simtable.Draw(sum, "setpoint sim "+w.dir, w.trace.Start))
				if err != nil {
					return fmt.Errorf("--report: %w", err)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "wrote %d files to %s (index.html)\n", len(files), reportDir)
			}
			if asJSON {
				return jsonOut(cmd.OutOrStdout()).Encode(sum)
			}
			sum.Print(cmd.OutOrStdout())
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
	cmd.Flags().Int64Var(&seed, "seed", 0, "seed the world's draws with this instead of the Environment's seed")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print only the summary, as JSON")
	cmd.Flags().BoolVar(&quiet, "quiet", false, "print only the summary")
	cmd.Flags().BoolVar(&baseline, "baseline", false, "replay the same world with the reference policy, with setpoint only observing (the world's own autoscalers act), and with the smallest fixed replica counts as good as setpoint, add the hindsight oracle, and compare")
	cmd.Flags().BoolVar(&providerProcess, "provider-process", false, "run the sim provider as a provider process (go-plugin), as watch does, instead of inside sim")
	cmd.Flags().StringVar(&reportDir, "report", "", "write plots (SVG, PNG) of replicas, request rate and p99 against its target per workload, and an index page, into this directory")
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

// simWorkload is a workload an NFR targets, with its latency target.
type simWorkload struct {
	addr   addrs.Object
	target time.Duration
}

// simWorkloads lists the workloads the NFRs target, in spec order, each
// with the tightest p99 target of the NFRs on it, then those only
// Schedules target.
func (w *workspace) simWorkloads() []simWorkload {
	var out []simWorkload
	seen := map[addrs.Object]int{}
	for _, n := range w.nfrs {
		a := addrs.Object{Provider: "sim", Kind: n.Spec.Target.Kind, Namespace: n.Metadata.Namespace, Name: n.Spec.Target.Name}
		var t time.Duration
		if n.Spec.Latency != nil {
			t = n.Spec.Latency.P99.D()
		}
		if i, ok := seen[a]; ok {
			if t > 0 && (out[i].target == 0 || t < out[i].target) {
				out[i].target = t
			}
			continue
		}
		seen[a] = len(out)
		out = append(out, simWorkload{addr: a, target: t})
	}
	// A Schedule's workload too: its cold starts are the requests the
	// gateway held while it woke, its drops those held past the timeout.
	for _, d := range w.specs {
		s, ok := d.(*spec.Schedule)
		if !ok {
			continue
		}
		a := addrs.Object{Provider: "sim", Kind: s.Spec.Target.Kind, Namespace: s.Metadata.Namespace, Name: s.Spec.Target.Name}
		if _, ok := seen[a]; !ok {
			seen[a] = len(out)
			out = append(out, simWorkload{addr: a})
		}
	}
	return out
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
func runSim(ctx context.Context, w *workspace, end time.Time, speed float64, out io.Writer) (*simtable.Summary, error) {
	sum := &simtable.Summary{Held: map[string]int{}, Final: map[string]string{}}
	tick := w.env.Spec.Tick.D()
	if tick <= 0 {
		tick = 5 * time.Second
	}
	st := state.New()
	start := w.trace.Start
	wallStart := time.Now()
	wls := w.simWorkloads()
	markers := map[string][]simreport.Marker{}
	applies := map[string]int{}
	fleetSteps := map[string]simtable.FleetResult{} // by namespace
	key := func(a addrs.Object) string { return a.Namespace + "/" + a.Name }
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
		for _, n := range p.Notes {
			// Each fleet's clusters' statuses: the time each was short.
			if sts, ok := fleetkind.StatusesNoted(n); ok {
				ns := strings.Split(n.Spec, "/")[1]
				fs := fleetSteps[ns]
				for name, s := range sts {
					if fleetkind.Short(s) {
						fs.Short(name, tick)
					} else {
						fs.Short(name, 0)
					}
				}
				fleetSteps[ns] = fs
			}
		}
		for _, h := range p.Held {
			sum.Held[h.Held.Kind.String()]++
			if h.Dimension == "replicas" {
				k := key(h.Address)
				markers[k] = append(markers[k], simreport.Marker{At: now.Sub(start), Text: fmt.Sprintf("held %s %s → %s: %s", simtable.ShortAttr(h.Attribute), h.From, h.To, h.Held)})
			}
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
				k := key(c.Address)
				applies[k]++
				if c.Address.Kind == fleetcluster.Kind {
					fs := fleetSteps[c.Address.Namespace]
					switch c.Action {
					case action.Create:
						fs.Created++
					case action.Delete:
						fs.Deleted++
					default:
						fs.Step(c.Address.Name, now.Sub(start))
					}
					fleetSteps[c.Address.Namespace] = fs
				}
				if c.Dimension == "replicas" {
					markers[k] = append(markers[k], simreport.Marker{At: now.Sub(start), Applied: true, Text: fmt.Sprintf("%s %s → %s", simtable.ShortAttr(c.Attribute), c.From, c.To)})
				}
				switch c.Action {
				case action.Delete:
					fmt.Fprintf(out, "[%s] %s %s (%s)\n", at, c.Action.Symbol(), c.Address, c.Reason)
				case action.Create:
					fmt.Fprintf(out, "[%s] %s %s %s: %s (%s)\n", at, c.Action.Symbol(), c.Address, simtable.ShortAttr(c.Attribute), c.To, c.Reason)
				default:
					fmt.Fprintf(out, "[%s] %s %s %s: %s → %s (wanted %s: %s)\n", at, c.Action.Symbol(), c.Address, simtable.ShortAttr(c.Attribute), c.From, c.To, c.Wanted, c.Reason)
				}
			}
		}
		if err := lost(now); err != nil {
			return nil, err
		}
	}
	for _, d := range w.specs {
		f, ok := d.(*spec.Fleet)
		if !ok {
			continue
		}
		fr := fleetSteps[f.Metadata.Namespace]
		fr.Fleet = f.Metadata.Namespace + "/" + f.Metadata.Name
		fr.Finish(end.Sub(start))
		resp := w.providers["sim"].List(ctx, providers.ListRequest{Now: end, Provider: "sim", Kind: fleetcluster.Kind, Namespace: f.Metadata.Namespace, Selector: map[string]string{fleetcluster.LabelFleet: f.Metadata.Name}})
		for _, o := range resp.Objects {
			fr.Clusters++
			fr.Nodes += o.Attributes[fleetcluster.Nodes].Int()
		}
		sum.Fleets = append(sum.Fleets, fr)
	}
	groups, err := readRouteReports(ctx, w, end)
	if err != nil {
		return nil, err
	}
	sum.RouteGroups = groups
	if sum.Nodes, err = readNodeReports(ctx, w, end); err != nil {
		return nil, err
	}
	sum.Virtual = end.Sub(start).Round(time.Second).String()
	sum.Wall = time.Since(wallStart).Round(time.Millisecond).String()
	var as []addrs.Object
	for _, wl := range wls {
		as = append(as, wl.addr)
	}
	resp := w.providers["sim"].Read(ctx, providers.ReadRequest{Now: end, Addresses: as})
	if err := lost(end); err != nil {
		return nil, err
	}
	for _, o := range resp.Objects {
		sum.Final[o.Address.String()] = "ready " + o.Attributes[sim.AttrReadyReplicas].String()
	}
	results, err := readReports(ctx, w, end, wls)
	if err != nil {
		return nil, err
	}
	for i := range results {
		results[i].Applies = applies[results[i].Workload]
		results[i].Markers = markers[results[i].Workload]
	}
	sum.Workloads = results
	return sum, nil
}

// readRouteReports reads the world's report of each of its route groups
// at end.
func readRouteReports(ctx context.Context, w *workspace, end time.Time) ([]sim.RouteReport, error) {
	if len(w.simCfg.RouteGroups) == 0 {
		return nil, nil
	}
	var as []addrs.Object
	for _, g := range w.simCfg.RouteGroups {
		as = append(as, addrs.Object{Provider: "sim", Kind: sim.KindRouteReport, Namespace: g.Namespace, Name: g.Name})
	}
	resp := w.providers["sim"].Read(ctx, providers.ReadRequest{Now: end, Addresses: as})
	if len(resp.Objects) != len(as) {
		return nil, fmt.Errorf("reading the sim world's route group reports: %d of %d", len(resp.Objects), len(as))
	}
	out := make([]sim.RouteReport, len(as))
	for i, o := range resp.Objects {
		r, err := sim.DecodeRouteReport(o)
		if err != nil {
			return nil, fmt.Errorf("reading the sim world's route group report: %w", err)
		}
		out[i] = r
	}
	return out, nil
}

// readReports reads the world's report of each workload at end.
func readReports(ctx context.Context, w *workspace, end time.Time, wls []simWorkload) ([]simtable.WorkloadResult, error) {
	var as []addrs.Object
	for _, wl := range wls {
		a := wl.addr
		a.Kind = sim.KindReport
		as = append(as, a)
	}
	resp := w.providers["sim"].Read(ctx, providers.ReadRequest{Now: end, Addresses: as})
	if len(resp.Objects) != len(as) {
		return nil, fmt.Errorf("reading the sim world's reports: %d of %d", len(resp.Objects), len(as))
	}
	out := make([]simtable.WorkloadResult, len(wls))
	for i, o := range resp.Objects {
		r, err := sim.DecodeReport(o)
		if err != nil {
			return nil, fmt.Errorf("reading the sim world's report: %w", err)
		}
		out[i] = simtable.Result(r, wls[i].target)
	}
	return out, nil
}
