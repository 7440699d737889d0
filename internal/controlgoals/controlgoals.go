// Package controlgoals holds the goals setpoint's NFR control is held to
// on the control-quality scenarios (testdata/scenarios), and reads them
// from `setpoint sim --baseline --json`: time over target at most 5% and
// at most the world's HPA alone, replica-hours at most 0.85 × the cheapest
// fixed count with equal or less time over, and at most 1.3 × the
// hindsight oracle.
package controlgoals

import (
	"encoding/json"
	"fmt"
)

// The goals.
const (
	MaxOverPct    = 5.0  // % of seconds over target, the cold start included
	MaxFixedRatio = 0.85 // of the cheapest fixed count with equal or less time over
	MaxOracle     = 1.3  // of the oracle's replica-hours
	// MaxOverBoundPct is the time over the reactive bound is read at.
	MaxOverBoundPct = MaxOverPct
)

// Variant is one replay's figures for the workload.
type Variant struct {
	OverPct      float64 `json:"overExactPct"`
	ReplicaHours float64 `json:"replicaHours"`
	// Fixed is the fixed baseline's count (negative: none as good up to
	// that many).
	Fixed int `json:"fixedReplicas"`
}

// Row is one scenario × seed.
type Row struct {
	Workload string
	Setpoint Variant
	HPA      Variant // the world's autoscalers alone
	Fixed    Variant // the cheapest fixed count as good as setpoint
	Oracle   float64 // replica-hours
	// Reactive is the cheapest a controller that can only react could
	// do within MaxOverBoundPct (replica-hours; 0: none of the floors
	// tried).
	Reactive float64
}

// The names of `sim --baseline`'s rows the goals read (cmd/setpoint's
// baseline.go names them so).
const (
	BaselineHPA    = "autoscalers alone (observe)"
	BaselineFixed  = "fixed"
	BaselineOracle = "oracle"
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
				Reactive []struct {
					OverPct      float64 `json:"overPct"`
					ReplicaHours float64 `json:"replicaHours"`
				} `json:"reactive"`
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
		case BaselineOracle:
			r.Oracle = w.ReplicaHours
			if w.Oracle != nil {
				for _, p := range w.Oracle.Reactive {
					if p.OverPct <= MaxOverBoundPct && (r.Reactive == 0 || p.ReplicaHours < r.Reactive) {
						r.Reactive = p.ReplicaHours
					}
				}
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
	GoalOver   = "over"   // time over at most MaxOverPct
	GoalHPA    = "hpa"    // time over at most the HPA alone's
	GoalFixed  = "fixed"  // replica-hours at most MaxFixedRatio × the fixed count as good
	GoalOracle = "oracle" // replica-hours at most MaxOracle × the oracle
)

// Miss is one goal missed, with its numbers.
type Miss struct {
	Goal, Text string
}

func (m Miss) String() string { return m.Text }

// Missed lists every goal the row misses (none: all met).
func (r Row) Missed() []Miss {
	var out []Miss
	miss := func(goal, format string, args ...any) {
		out = append(out, Miss{Goal: goal, Text: fmt.Sprintf(format, args...)})
	}
	sp := r.Setpoint
	if sp.OverPct > MaxOverPct {
		miss(GoalOver, "over %.1f%% > %.0f%%", sp.OverPct, MaxOverPct)
	}
	if sp.OverPct > r.HPA.OverPct+1e-9 {
		miss(GoalHPA, "over %.1f%% > the HPA's %.1f%%", sp.OverPct, r.HPA.OverPct)
	}
	if r.Fixed.Fixed > 0 && sp.ReplicaHours > MaxFixedRatio*r.Fixed.ReplicaHours+1e-9 {
		miss(GoalFixed, "%.2f replica-hours > %.2f × fixed %d's %.2f", sp.ReplicaHours, MaxFixedRatio, r.Fixed.Fixed, r.Fixed.ReplicaHours)
	}
	if sp.ReplicaHours > MaxOracle*r.Oracle+1e-9 {
		miss(GoalOracle, "%.2f replica-hours > %.1f × the oracle's %.2f", sp.ReplicaHours, MaxOracle, r.Oracle)
	}
	return out
}
