// Package simtable sums a sim run up for people: the tables setpoint sim
// prints (each workload against the baselines and the oracle, each route
// group, each node) and the report it draws (simreport). The command runs
// the worlds; this package only says what they measured.
package simtable

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/setpoint-dev/setpoint/cue/load"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/internal/controlgoals"
	"github.com/setpoint-dev/setpoint/internal/simreport"
	"github.com/setpoint-dev/setpoint/providers/sim"
)

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
	// PerCluster is each cluster's node steps and time short, by name
	// (Step, Short and Finish fill it).
	PerCluster []FleetCluster `json:"perCluster,omitempty"`
	stepsAt    map[string][]time.Duration
	short      map[string]time.Duration
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
	// Report is what the world measured, which the plots draw; Markers
	// the applies and holds drawn on them.
	Report  sim.Report         `json:"-"`
	Markers []simreport.Marker `json:"-"`
}

// FixedPoint is a fixed replica count and how it did.
type FixedPoint struct {
	Replicas     int     `json:"replicas"`
	OverExact    float64 `json:"overExactPct"`
	ReplicaHours float64 `json:"replicaHours"`
}

// Result sums up a report against a latency target (0: none).
func Result(r sim.Report, target time.Duration) WorkloadResult {
	res := WorkloadResult{Workload: r.Namespace + "/" + r.Name, Dropped: r.Dropped, Cold: r.Cold,
		ReplicaHours: float64(r.PodSeconds) / 3600, TraceShape: r.Trace, WorldShape: r.World, Report: r}
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

// ShortAttr is an attribute's path as a plot's marker or a line of the
// run says it: a container's or Knative's long prefixes cut.
func ShortAttr(p addrs.Path) string {
	a := p.String()
	a = strings.Replace(a, "spec.template.spec.containers", "containers", 1)
	return strings.Replace(a, `spec.template.metadata.annotations["autoscaling.knative.dev/min-scale"]`, "min-scale", 1)
}

// Print writes the run's summary: counts, then the tables of its
// workloads, fleets, route groups and nodes.
func (s *Summary) Print(w io.Writer) {
	fmt.Fprintf(w, "\nSimulated %s of trace in %s (%d ticks): %d applied, %d failed.\n", s.Virtual, s.Wall, s.Ticks, s.Applies, s.Failed)
	if len(s.Held) > 0 {
		fmt.Fprintf(w, "Held (change × tick): %s\n", joinCounts(s.Held))
	}
	fmt.Fprintln(w)
	fmt.Fprint(w, s.Table())
	for _, f := range s.Fleets {
		fmt.Fprint(w, FleetTable(f))
	}
	for _, r := range s.RouteGroups {
		fmt.Fprintln(w)
		fmt.Fprint(w, RouteTable(r))
	}
	if len(s.Nodes) > 0 {
		fmt.Fprintln(w)
	}
	for _, r := range s.Nodes {
		fmt.Fprint(w, NodeTable(r))
	}
}

// Table compares the variants per workload. Time over target is the
// share of seconds whose trailing-minute p99 was over it, exactly and as
// the histogram says; late is the share of requests over it.
func (s *Summary) Table() string {
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
