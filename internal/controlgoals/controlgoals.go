// Package controlgoals holds the goals setpoint's NFR control is held to
// on the control-quality scenarios (testdata/scenarios), and reads them
// from `setpoint sim --baseline --json`.
//
// Every scenario and seed: time over target at most the world's HPA
// alone's, and no fixed count dominates setpoint (none has both less or
// equal time over and less or equal replica-hours). Then each scenario has
// its own row of Goals: a time over, and a cost against the hindsight
// oracle, the cheapest fixed count as good, or the reactive bound at
// setpoint's own time over.
package controlgoals

import (
	"encoding/json"
	"fmt"
	"sort"
)

// Goal is one scenario's row. A zero ratio is no goal of that kind.
type Goal struct {
	MaxOverPct float64 // % of seconds over target, the cold start included
	// MaxOracle bounds replica-hours as a multiple of the oracle's.
	MaxOracle float64
	// MaxFixedRatio bounds replica-hours as a multiple of the cheapest
	// fixed count with equal or less time over.
	MaxFixedRatio float64
	// MaxReactive bounds replica-hours as a multiple of the reactive
	// bound at setpoint's time over: the cheapest member of the reactive
	// family whose time over is at or below setpoint's.
	MaxReactive float64
}

// burstyGoal is the row of the scenarios of bursts at random gaps.
var burstyGoal = Goal{MaxOverPct: 5, MaxReactive: 1.05}

// Goals is the table of the issue that set them, by scenario directory.
// They were written down before the policy was changed to meet them; one
// that proves unreachable is reported with its figure, never loosened
// here.
var Goals = map[string]Goal{
	"decline":     {MaxOverPct: 4, MaxOracle: 1.15, MaxFixedRatio: 0.80},
	"diurnal":     {MaxOverPct: 1, MaxOracle: 1.15},
	"flash-crowd": {MaxOverPct: 4, MaxOracle: 1.25},
	"shipped-5m":  {MaxOverPct: 3, MaxOracle: 1.20},
	"on-off":      burstyGoal,
	"heavy-tail":  burstyGoal,
}

// Variant is one replay's figures for the workload.
type Variant struct {
	OverPct      float64 `json:"overExactPct"`
	ReplicaHours float64 `json:"replicaHours"`
	// Fixed is the fixed baseline's count (negative: none as good up to
	// that many).
	Fixed int `json:"fixedReplicas"`
}

// Point is one member of the reactive family: its time over and cost.
type Point struct {
	OverPct      float64 `json:"overPct"`
	ReplicaHours float64 `json:"replicaHours"`
}

// Row is one scenario × seed.
type Row struct {
	Workload string
	Setpoint Variant
	HPA      Variant // the world's autoscalers alone
	Fixed    Variant // the cheapest fixed count as good as setpoint
	Oracle   float64 // replica-hours
	// Default is setpoint with its defaults where the scenario's spec opts
	// in to more (nil when it does not).
	Default *Variant
	// Reactive is the reactive family (one member per floor kept), by
	// time over.
	Reactive []Point
}

// ReactiveAt is the reactive bound at a time over: the cheapest member
// whose time over is at or below overPct (ok false: none is).
func (r Row) ReactiveAt(overPct float64) (float64, bool) {
	best, ok := 0.0, false
	for _, p := range r.Reactive {
		if p.OverPct <= overPct+1e-9 && (!ok || p.ReplicaHours < best) {
			best, ok = p.ReplicaHours, true
		}
	}
	return best, ok
}

// The names of `sim --baseline`'s rows the goals read (cmd/setpoint's
// baseline.go names them so).
const (
	BaselineHPA     = "autoscalers alone (observe)"
	BaselineFixed   = "fixed"
	BaselineOracle  = "oracle"
	BaselineDefault = "setpoint defaults"
)

// summary is the part of `sim --json` the goals read.
type summary struct {
	Workloads []struct {
		Variant
		Workload string `json:"workload"`
	} `json:"workloads"`
	Baselines []struct {
		Name      string `json:"name"`
		Workloads []struct {
			Variant
			Oracle *struct {
				Reactive []Point `json:"reactive"`
			} `json:"oracle"`
		} `json:"workloads"`
	} `json:"baselines"`
}

// Read reads workload's row from the output of `setpoint sim --baseline
// --json` ("" for the only workload).
func Read(out []byte, workload string) (Row, error) {
	var s summary
	if err := json.Unmarshal(out, &s); err != nil {
		return Row{}, fmt.Errorf("reading the sim summary: %w", err)
	}
	i := -1
	for j, w := range s.Workloads {
		if w.Workload == workload || workload == "" && len(s.Workloads) == 1 {
			i = j
		}
	}
	if i < 0 {
		return Row{}, fmt.Errorf("the sim summary has no workload %q among %d", workload, len(s.Workloads))
	}
	r := Row{Workload: s.Workloads[i].Workload, Setpoint: s.Workloads[i].Variant}
	seen := map[string]bool{}
	for _, b := range s.Baselines {
		if i >= len(b.Workloads) {
			continue
		}
		w := b.Workloads[i]
		seen[b.Name] = true
		switch b.Name {
		case BaselineHPA:
			r.HPA = w.Variant
		case BaselineFixed:
			r.Fixed = w.Variant
		case BaselineDefault:
			v := w.Variant
			r.Default = &v
		case BaselineOracle:
			r.Oracle = w.ReplicaHours
			if w.Oracle != nil {
				r.Reactive = append([]Point(nil), w.Oracle.Reactive...)
				sort.SliceStable(r.Reactive, func(a, b int) bool { return r.Reactive[a].OverPct > r.Reactive[b].OverPct })
			}
		}
	}
	for _, name := range []string{BaselineHPA, BaselineFixed, BaselineOracle} {
		if !seen[name] {
			return Row{}, fmt.Errorf("the sim summary has no %q row for %s (run sim with --baseline)", name, r.Workload)
		}
	}
	if r.Oracle == 0 {
		return Row{}, fmt.Errorf("the sim summary's oracle row for %s is empty: no oracle was found", r.Workload)
	}
	return r, nil
}

// The goals, as Miss names them.
const (
	GoalOver      = "over"      // time over at most the scenario's
	GoalHPA       = "hpa"       // time over at most the HPA alone's
	GoalDominated = "dominated" // no fixed count both as good and as cheap
	GoalFixed     = "fixed"     // replica-hours at most a share of the fixed count as good
	GoalOracle    = "oracle"    // replica-hours at most a multiple of the oracle's
	GoalReactive  = "reactive"  // replica-hours at most a multiple of the reactive bound
)

// Miss is one goal missed, with its numbers.
type Miss struct {
	Goal, Text string
}

func (m Miss) String() string { return m.Text }

// Missed lists every goal the row misses under g (none: all met).
func (r Row) Missed(g Goal) []Miss {
	var out []Miss
	miss := func(goal, format string, args ...any) {
		out = append(out, Miss{Goal: goal, Text: fmt.Sprintf(format, args...)})
	}
	sp := r.Setpoint
	if g.MaxOverPct > 0 && sp.OverPct > g.MaxOverPct+1e-9 {
		miss(GoalOver, "over %.1f%% > %g%%", sp.OverPct, g.MaxOverPct)
	}
	if sp.OverPct > r.HPA.OverPct+1e-9 {
		miss(GoalHPA, "over %.1f%% > the HPA's %.1f%%", sp.OverPct, r.HPA.OverPct)
	}
	// The fixed baseline is the cheapest count whose time over is at most
	// setpoint's: it dominates unless it costs more.
	if f := r.Fixed; f.Fixed > 0 && f.ReplicaHours <= sp.ReplicaHours+1e-9 {
		miss(GoalDominated, "fixed %d dominates: %.1f%% over ≤ %.1f%% at %.2f ≤ %.2f replica-hours", f.Fixed, f.OverPct, sp.OverPct, f.ReplicaHours, sp.ReplicaHours)
	}
	if g.MaxFixedRatio > 0 && r.Fixed.Fixed > 0 && sp.ReplicaHours > g.MaxFixedRatio*r.Fixed.ReplicaHours+1e-9 {
		miss(GoalFixed, "%.2f replica-hours > %.2f × fixed %d's %.2f", sp.ReplicaHours, g.MaxFixedRatio, r.Fixed.Fixed, r.Fixed.ReplicaHours)
	}
	if g.MaxOracle > 0 && sp.ReplicaHours > g.MaxOracle*r.Oracle+1e-9 {
		miss(GoalOracle, "%.2f replica-hours > %.2f × the oracle's %.2f", sp.ReplicaHours, g.MaxOracle, r.Oracle)
	}
	if g.MaxReactive > 0 {
		switch b, ok := r.ReactiveAt(sp.OverPct); {
		case !ok:
			miss(GoalReactive, "no member of the reactive family is at or below %.1f%% over", sp.OverPct)
		case sp.ReplicaHours > g.MaxReactive*b+1e-9:
			miss(GoalReactive, "%.2f replica-hours > %.2f × the reactive bound's %.2f at ≤ %.1f%% over", sp.ReplicaHours, g.MaxReactive, b, sp.OverPct)
		}
	}
	return out
}
