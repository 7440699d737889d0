package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/internal/simreport"
	"github.com/setpoint-dev/setpoint/providers/sim"
)

// baselines are the replays --baseline compares setpoint with: each
// changes every NFR the same way before the run.
var baselines = []struct {
	name   string
	mutate func(n *spec.NFR)
}{
	// The reference's formula with the gate it shipped with: an increase
	// waits for stability and cooldown as a decrease does.
	{"reference policy", func(n *spec.NFR) {
		n.Spec.Policy = spec.PolicyReference
		n.Spec.Safety.ScaleUp = "stable"
	}},
	// setpoint plans but applies nothing: the world's own HPA and Knative
	// autoscaler act alone.
	{"autoscalers alone (observe)", func(n *spec.NFR) {
		if n.Spec.Enforcement.Replicas == spec.ModeEnforce {
			n.Spec.Enforcement.Replicas = spec.ModeObserve
		}
		if n.Spec.Enforcement.Memory == spec.ModeEnforce {
			n.Spec.Enforcement.Memory = spec.ModeObserve
		}
	}},
}

// maxFixed bounds the fixed replica counts tried per workload.
const maxFixed = 200

// runBaselines replays the world for each baseline, then searches the
// smallest fixed replica count of each workload whose time over target is
// at most setpoint's, and adds them to sum.
func runBaselines(ctx context.Context, dir string, o simOptions, main *workspace, end time.Time, sum *Summary, progress io.Writer) error {
	for _, b := range baselines {
		fmt.Fprintf(progress, "baseline: %s…\n", b.name)
		w, err := openWorkspace(dir, o)
		if err != nil {
			return err
		}
		for _, n := range w.nfrs {
			b.mutate(n)
		}
		res, err := runSim(ctx, w, end, 0, io.Discard)
		w.close()
		if err != nil {
			return fmt.Errorf("baseline %s: %w", b.name, err)
		}
		sum.Baselines = append(sum.Baselines, Variant{Name: b.name, Workloads: res.Workloads})
	}
	fmt.Fprintf(progress, "baseline: fixed replica counts…\n")
	fixed, curve, err := fixedBaseline(ctx, main, end, sum.Workloads)
	if err != nil {
		return fmt.Errorf("baseline fixed: %w", err)
	}
	sum.Baselines = append(sum.Baselines, fixed)
	sum.Fixed = curve
	return nil
}

// fixedBaseline runs the world without autoscalers, every workload at a
// fixed count of pods, from 1 upward, until each workload's time over
// target is at most setpoint's (or maxFixed). The world alone runs in
// process: no loop, no provider. A workload without a latency target
// keeps its count of 1.
func fixedBaseline(ctx context.Context, w *workspace, end time.Time, mine []WorkloadResult) (Variant, map[string][]FixedPoint, error) {
	wls := w.simWorkloads()
	idx := make([]int, len(wls))
	for i, wl := range wls {
		idx[i] = slices.IndexFunc(w.simCfg.Workloads, func(c spec.SimWorkload) bool {
			return c.Kind == wl.addr.Kind && c.Namespace == wl.addr.Namespace && c.Name == wl.addr.Name
		})
	}
	n := make([]int, len(wls))
	done := make([]bool, len(wls))
	best := make([]WorkloadResult, len(wls))
	curve := map[string][]FixedPoint{}
	for i, wl := range wls {
		n[i] = 1
		if wl.target <= 0 || idx[i] < 0 {
			done[i] = true
		}
	}
	for round := 0; ; round++ {
		if ctx.Err() != nil {
			return Variant{}, nil, ctx.Err()
		}
		cfg := w.simCfg
		cfg.Workloads = slices.Clone(cfg.Workloads)
		for i := range wls {
			if idx[i] < 0 {
				continue
			}
			c := &cfg.Workloads[idx[i]]
			c.HPA, c.Replicas = nil, n[i]
			if c.Knative != nil {
				k := *c.Knative
				k.MinScale, k.MaxScale = n[i], n[i]
				c.Knative = &k
			}
		}
		world, err := sim.NewWithTrace(cfg, w.trace, sim.Options{})
		if err != nil {
			return Variant{}, nil, err
		}
		world.AdvanceTo(end)
		pending := false
		for i, wl := range wls {
			if idx[i] < 0 || (done[i] && round > 0 && best[i].Workload != "") {
				continue
			}
			r, _ := world.Report(wl.addr.Namespace, wl.addr.Name)
			res := result(r, wl.target)
			curve[res.Workload] = append(curve[res.Workload], FixedPoint{Replicas: n[i], OverExact: res.OverExact, ReplicaHours: res.ReplicaHours})
			if done[i] || res.OverExact <= mine[i].OverExact+1e-9 || n[i] >= maxFixed {
				res.Fixed = n[i]
				if res.OverExact > mine[i].OverExact+1e-9 {
					res.Fixed = -n[i] // not reached
				}
				done[i], best[i] = true, res
				continue
			}
			n[i]++
			pending = true
		}
		if !pending {
			break
		}
	}
	return Variant{Name: "fixed", Workloads: best}, curve, nil
}

// writeReport draws the run and its baselines.
func writeReport(dir string, w *workspace, sum *Summary) ([]string, error) {
	r := simreport.Report{Title: "setpoint sim " + w.dir, Table: sum.table()}
	variants := append([]Variant{{Name: "setpoint", Workloads: sum.Workloads}}, sum.Baselines...)
	for i, wl := range sum.Workloads {
		rep := wl.report
		out := simreport.Workload{Name: wl.Workload, Start: w.trace.Start, Step: time.Duration(rep.Step) * time.Second, Markers: wl.markers}
		if d, err := time.ParseDuration(wl.Target); err == nil {
			out.Target = d
		}
		for _, v := range variants {
			if i >= len(v.Workloads) || len(v.Workloads[i].report.Points.Ready) == 0 {
				continue
			}
			p := v.Workloads[i].report.Points
			out.Series = append(out.Series, simreport.Series{Variant: v.Name, Replicas: p.Ready, RPS: p.RPS, P99: finite(p.P99), P99Exact: finite(p.P99Exact)})
		}
		r.Workloads = append(r.Workloads, out)
	}
	return simreport.Write(dir, r)
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
