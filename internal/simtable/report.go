package simtable

import (
	"math"
	"slices"
	"time"

	"github.com/setpoint-dev/setpoint/internal/simreport"
)

// Draw is the report of a run and its baselines: its table, and per
// workload each variant's replicas, rate and p99 over the trace (which
// starts at start), with the trace's own per-minute rate.
func Draw(sum *Summary, title string, start time.Time) simreport.Report {
	r := simreport.Report{Title: title, Table: sum.Table()}
	variants := append([]Variant{{Name: "setpoint", Workloads: sum.Workloads}}, sum.Baselines...)
	for i, wl := range sum.Workloads {
		rep := wl.Report
		out := simreport.Workload{Name: wl.Workload, Start: start, Step: time.Duration(rep.Step) * time.Second, Markers: wl.Markers}
		if d, err := time.ParseDuration(wl.Target); err == nil {
			out.Target = d
		}
		for _, v := range variants {
			if i >= len(v.Workloads) || len(v.Workloads[i].Report.Points.Ready) == 0 {
				continue
			}
			p := v.Workloads[i].Report.Points
			s := simreport.Series{Variant: v.Name, Replicas: p.Ready, RPS: p.RPS, P99: finite(p.P99), P99Exact: finite(p.P99Exact)}
			if v.Workloads[i].Oracle != nil {
				// Its pods only: its requests are the world's, its p99 within
				// the target by construction.
				s.RPS, s.P99 = nanOf(len(p.Ready)), nanOf(len(p.Ready))
			}
			out.Series = append(out.Series, s)
		}
		if env := rep.Points.Envelope; len(env) > 0 {
			// The trace's per-minute rate, drawn on the RPS panel only.
			nan := nanOf(len(env))
			out.Series = append(out.Series, simreport.Series{Variant: "trace (per minute)", Replicas: nan, RPS: env, P99: nan})
		}
		r.Workloads = append(r.Workloads, out)
	}
	return r
}

func nanOf(n int) []float64 {
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = math.NaN()
	}
	return xs
}

// finite turns +Inf (everything refused) into a gap: a plot has no room
// for it, and the table counts it.
func finite(xs []float64) []float64 {
	out := slices.Clone(xs)
	for i, x := range out {
		if math.IsInf(x, 0) {
			out[i] = math.NaN()
		}
	}
	return out
}
