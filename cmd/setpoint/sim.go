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

	"github.com/setpoint-dev/setpoint/cue/load"
	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/clock"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/internal/controlgoals"
	"github.com/setpoint-dev/setpoint/internal/simreport"
	"github.com/setpoint-dev/setpoint/providers"
	fleetcluster "github.com/setpoint-dev/setpoint/providers/cluster"
	"github.com/setpoint-dev/setpoint/providers/sim"
)

func newSimCmd() *cobra.Command {
	var o simOptions
	var speed float64
	var until string
	var asJSON, quiet, baseline bool
	var seed int64
	var reportDir string
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
			if cmd.Flags().Changed("seed") {
				o.seed = &seed
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
				files, err := writeReport(reportDir, w, sum)
				if err != nil {
					return fmt.Errorf("--report: %w", err)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "wrote %d files to %s (index.html)\n", len(files), reportDir)
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
	cmd.Flags().Int64Var(&seed, "seed", 0, "seed the world's draws with this instead of the Environment's seed")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print only the summary, as JSON")
	cmd.Flags().BoolVar(&quiet, "quiet", false, "print only the summary")
	cmd.Flags().BoolVar(&baseline, "baseline", false, "replay the same world with the reference policy, with setpoint only observing (the world's own autoscalers act), and with the smallest fixed replica counts as good as setpoint, add the hindsight oracle, and compare")
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

// Summary of a sim run.
type Summary struct {
	// Seed is the sim world's seed the run drew with.
	Seed    int64          `json:"seed"`
	Virtual string         `json:"virtual"`
	Wall    string         `json:"wall"`
	Ticks   int            `json:"ticks"`
	Applies int            `json:"applies"`
	Failed  int            `json:"failed"`
	Held    map[string]int `json:"held"`
	// Workloads are what the world measured for each workload an NFR
	// targets, from every request it simulated.
	Workloads []WorkloadResult `json:"workloads"`
	// Baselines are the same world replayed otherwise (--baseline).
	Baselines []Variant `json:"baselines,omitempty"`
	// Fixed is, per workload, time over target at each fixed replica
	// count tried (--baseline).
	Fixed map[string][]FixedPoint `json:"fixed,omitempty"`
	Final map[string]string       `json:"final"`
	// Fleets are what each Fleet spec did to its clusters.
	Fleets []FleetResult `json:"fleets,omitempty"`
	// RouteGroups are what the world measured of each of its route
	// groups: where requests went, and what the field did.
	RouteGroups []sim.RouteReport `json:"routeGroups,omitempty"`
	// Nodes are what each sim node's policy did with its CPUs.
	Nodes []sim.NodeReport `json:"nodes,omitempty"`
}

// FleetResult is one fleet's run: clusters and nodes at the end, and the
// clusters created and deleted and node steps applied on the way.
type FleetResult struct {
	Fleet    string `json:"fleet"` // namespace/name
	Clusters int    `json:"clusters"`
	Nodes    int64  `json:"nodes"`
	Created  int    `json:"created"`
	Deleted  int    `json:"deleted"`
	Steps    int    `json:"steps"`
}

// Variant is one replay of the world.
type Variant struct {
	Name      string           `json:"name"`
	Workloads []WorkloadResult `json:"workloads"`
}

// WorkloadResult is one workload's figures in one replay.
type WorkloadResult struct {
	Workload string `json:"workload"` // namespace/name
	Target   string `json:"target,omitempty"`
	// OverExact and OverHist are the shares (%) of seconds whose
	// trailing-minute p99 was over the target: exactly, from every
	// request, and as the world's histogram (with a bucket at the target)
	// says.
	OverExact    float64 `json:"overExactPct"`
	OverHist     float64 `json:"overHistogramPct"`
	Late         float64 `json:"latePct"` // requests over the target, refused ones included
	Dropped      int64   `json:"dropped"`
	Cold         int64   `json:"coldStarts"`
	ReplicaHours float64 `json:"replicaHours"`
	Applies      int     `json:"applies"`
	// Fixed is the replica count of a fixed baseline (0 otherwise;
	// negative: the most tried, still worse than setpoint).
	Fixed int `json:"fixedReplicas,omitempty"`
	// TraceShape and WorldShape are the per-minute envelopes of the rate
	// the trace asks of the workload and of the requests the world made.
	// Oracle is the hindsight bound's schedule (its row only).
	Oracle     *sim.Oracle `json:"oracle,omitempty"`
	TraceShape sim.Shape   `json:"traceShape"`
	WorldShape sim.Shape   `json:"worldShape"`
	report     sim.Report
	markers    []simreport.Marker
}

// FixedPoint is a fixed replica count and how it did.
type FixedPoint struct {
	Replicas     int     `json:"replicas"`
	OverExact    float64 `json:"overExactPct"`
	ReplicaHours float64 `json:"replicaHours"`
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
func runSim(ctx context.Context, w *workspace, end time.Time, speed float64, out io.Writer) (*Summary, error) {
	sum := &Summary{Held: map[string]int{}, Final: map[string]string{}}
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
	fleetSteps := map[string]FleetResult{} // by namespace
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
		for _, h := range p.Held {
			sum.Held[h.Held.Kind.String()]++
			if h.Dimension == "replicas" {
				k := key(h.Address)
				markers[k] = append(markers[k], simreport.Marker{At: now.Sub(start), Text: fmt.Sprintf("held %s %s → %s: %s", shortAttr(h.Attribute), h.From, h.To, h.Held)})
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
						fs.Steps++
					}
					fleetSteps[c.Address.Namespace] = fs
				}
				if c.Dimension == "replicas" {
					markers[k] = append(markers[k], simreport.Marker{At: now.Sub(start), Applied: true, Text: fmt.Sprintf("%s %s → %s", shortAttr(c.Attribute), c.From, c.To)})
				}
				switch c.Action {
				case action.Delete:
					fmt.Fprintf(out, "[%s] %s %s (%s)\n", at, c.Action.Symbol(), c.Address, c.Reason)
				case action.Create:
					fmt.Fprintf(out, "[%s] %s %s %s: %s (%s)\n", at, c.Action.Symbol(), c.Address, shortAttr(c.Attribute), c.To, c.Reason)
				default:
					fmt.Fprintf(out, "[%s] %s %s %s: %s → %s (wanted %s: %s)\n", at, c.Action.Symbol(), c.Address, shortAttr(c.Attribute), c.From, c.To, c.Wanted, c.Reason)
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
		results[i].markers = markers[results[i].Workload]
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
func readReports(ctx context.Context, w *workspace, end time.Time, wls []simWorkload) ([]WorkloadResult, error) {
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
	out := make([]WorkloadResult, len(wls))
	for i, o := range resp.Objects {
		r, err := sim.DecodeReport(o)
		if err != nil {
			return nil, fmt.Errorf("reading the sim world's report: %w", err)
		}
		out[i] = result(r, wls[i].target)
	}
	return out, nil
}

// result sums up a report against a latency target (0: none).
func result(r sim.Report, target time.Duration) WorkloadResult {
	res := WorkloadResult{Workload: r.Namespace + "/" + r.Name, Dropped: r.Dropped, Cold: r.Cold,
		ReplicaHours: float64(r.PodSeconds) / 3600, TraceShape: r.Trace, WorldShape: r.World, report: r}
	if target <= 0 {
		return res
	}
	res.Target = target.String()
	for _, t := range r.Targets {
		if math.Abs(t.Target-target.Seconds()) > 1e-9 {
			continue
		}
		if r.Measured > 0 {
			res.OverExact = 100 * float64(t.OverExact) / float64(r.Measured)
			res.OverHist = 100 * float64(t.OverHist) / float64(r.Measured)
		}
		if r.Arrived > 0 {
			res.Late = 100 * float64(t.Late) / float64(r.Arrived)
		}
	}
	return res
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
	fmt.Fprintln(w)
	fmt.Fprint(w, s.table())
	for _, f := range s.Fleets {
		fmt.Fprintf(w, "fleet %s: %d clusters, %d nodes at the end; %d created, %d deleted, %d node steps\n", f.Fleet, f.Clusters, f.Nodes, f.Created, f.Deleted, f.Steps)
	}
	for _, r := range s.RouteGroups {
		fmt.Fprintln(w)
		fmt.Fprint(w, routeTable(r))
	}
	if len(s.Nodes) > 0 {
		fmt.Fprintln(w)
	}
	for _, r := range s.Nodes {
		fmt.Fprint(w, nodeTable(r))
	}
}

// table compares the variants per workload. Time over target is the
// share of seconds whose trailing-minute p99 was over it, exactly and as
// the histogram says; late is the share of requests over it.
func (s *Summary) table() string {
	var b strings.Builder
	variants := append([]Variant{{Name: "setpoint", Workloads: s.Workloads}}, s.Baselines...)
	for i, wl := range s.Workloads {
		head := wl.Workload
		if wl.Target != "" {
			head += " (p99 ≤ " + wl.Target + ")"
		}
		var oracle *sim.Oracle
		for _, v := range variants {
			if i < len(v.Workloads) && v.Workloads[i].Oracle != nil {
				oracle = v.Workloads[i].Oracle
			}
		}
		fmt.Fprintf(&b, "%-38s %22s %7s %8s %6s %9s %7s", head, "time over exact / hist", "late", "dropped", "cold", "replica-h", "applies")
		if oracle != nil {
			fmt.Fprintf(&b, " %8s", "÷ oracle")
		}
		fmt.Fprintln(&b)
		for _, v := range variants {
			if i >= len(v.Workloads) {
				continue
			}
			r := v.Workloads[i]
			if v.Name == controlgoals.BaselineOracle && r.Oracle == nil {
				continue
			}
			over, late := "-", "-"
			if r.Target != "" {
				over, late = fmt.Sprintf("%5.1f%% / %5.1f%%", r.OverExact, r.OverHist), fmt.Sprintf("%.2f%%", r.Late)
			}
			name := v.Name
			switch {
			case r.Fixed > 0:
				name = "fixed " + load.CountNoun(r.Fixed, "pod") + " (as good as setpoint)"
			case r.Fixed < 0:
				name = "fixed " + load.CountNoun(-r.Fixed, "pod") + " (not as good: the most tried)"
			}
			if r.Oracle != nil {
				name = "oracle (" + oracleKind(r.Oracle) + ")"
				over, late = fmt.Sprintf("%5.1f%% / %6s", 0.0, "-"), "-"
			}
			fmt.Fprintf(&b, "  %-36s %22s %7s %8d %6d %9.2f %7d", name, over, late, r.Dropped, r.Cold, r.ReplicaHours, r.Applies)
			if oracle != nil && oracle.PodSeconds > 0 {
				fmt.Fprintf(&b, " %8.2f", r.ReplicaHours/oracle.ReplicaHours())
			}
			fmt.Fprintln(&b)
		}
		if wl.TraceShape.Minutes > 0 {
			fmt.Fprintf(&b, "  rate a minute: trace %s · world %s\n", shapeText(wl.TraceShape), shapeText(wl.WorldShape))
		}
		fmt.Fprintln(&b)
	}
	return b.String()
}

// oracleKind says which schedule the oracle kept.
func oracleKind(o *sim.Oracle) string {
	if o.Greedy {
		lo, hi := slices.Min(o.Replicas), slices.Max(o.Replicas)
		return fmt.Sprintf("%d–%d pods, by the minute", lo, hi)
	}
	return "fixed " + load.CountNoun(o.Constant, "pod")
}

// shapeText is a per-minute envelope at a glance.
func shapeText(s sim.Shape) string {
	return fmt.Sprintf("%s–%s req/s (mean %s, CV %.2f)", rateNum(s.Min), rateNum(s.Max), rateNum(s.Mean), s.CV)
}

// rateNum prints a rate with the digits that say something at its size.
func rateNum(r float64) string {
	switch {
	case r >= 100:
		return fmt.Sprintf("%.0f", r)
	case r >= 1:
		return fmt.Sprintf("%.1f", r)
	}
	return fmt.Sprintf("%.3g", r)
}

func joinCounts(m map[string]int) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
