package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/internal/controlgoals"
	"github.com/setpoint-dev/setpoint/internal/simtable"
	"github.com/setpoint-dev/setpoint/providers/sim"
)

// baselines are the replays --baseline compares setpoint with: each
// changes every NFR (and, observing, every Schedule) the same way before
// the run.
var baselines = []struct {
	name    string
	mutate  func(n *spec.NFR)
	observe bool // Schedules plan but apply nothing
	// when, if set, says whether the baseline differs from the run at
	// all for these NFRs (it is skipped when it does not).
	when func(n *spec.NFR) bool
}{
	// setpoint as a spec gets it without opting in: where a spec hands
	// setpoint an HPA's target and way down (autoscaler.owns: count), the
	// default that writes only its floor.
	{controlgoals.BaselineDefault, func(n *spec.NFR) {
		if n.Spec.OwnsCount() {
			n.Spec.Autoscaler.Owns = spec.OwnsFloor
		}
	}, false, func(n *spec.NFR) bool { return n.Spec.OwnsCount() }},
	// The reference's formula with the gate it shipped with: an increase
	// waits for stability and cooldown as a decrease does.
	{"reference policy", func(n *spec.NFR) {
		n.Spec.Policy = spec.PolicyReference
		n.Spec.Safety.ScaleUp = "stable"
		if n.Spec.OwnsCount() {
			n.Spec.Autoscaler.Owns = spec.OwnsFloor
		}
	}, false, nil},
	// setpoint plans but applies nothing: the world's own HPA and Knative
	// autoscaler act alone.
	{controlgoals.BaselineHPA, func(n *spec.NFR) {
		if n.Spec.Enforcement.Replicas == spec.ModeEnforce {
			n.Spec.Enforcement.Replicas = spec.ModeObserve
		}
		if n.Spec.Enforcement.Memory == spec.ModeEnforce {
			n.Spec.Enforcement.Memory = spec.ModeObserve
		}
	}, true, nil},
}

// maxFixed bounds the fixed replica counts tried per workload.
const maxFixed = 200

// runBaselines replays the world for each baseline, then searches the
// smallest fixed replica count of each workload whose time over target is
// at most setpoint's, and adds them to sum.
func runBaselines(ctx context.Context, dir string, o simOptions, main *workspace, end time.Time, sum *simtable.Summary, progress io.Writer) error {
	for _, b := range baselines {
		if b.when != nil && !slices.ContainsFunc(main.nfrs, b.when) {
			continue
		}
		fmt.Fprintf(progress, "baseline: %s…\n", b.name)
		w, err := openWorkspace(dir, o)
		if err != nil {
			return err
		}
		for _, n := range w.nfrs {
			b.mutate(n)
		}
		// The baselines compare the workloads' policies: route groups play
		// no part in them, and their loops would only cost time.
		w.eng.Specs = slices.DeleteFunc(slices.Clone(w.eng.Specs), func(d spec.Document) bool {
			_, ok := d.(*spec.RouteGroup)
			return ok
		})
		for _, d := range w.specs {
			if s, ok := d.(*spec.Schedule); ok && b.observe && s.Spec.Enforcement.Replicas == spec.ModeEnforce {
				s.Spec.Enforcement.Replicas = spec.ModeObserve
			}
		}
		res, err := runSim(ctx, w, end, 0, io.Discard)
		w.close()
		if err != nil {
			return fmt.Errorf("baseline %s: %w", b.name, err)
		}
		sum.Baselines = append(sum.Baselines, simtable.Variant{Name: b.name, Workloads: res.Workloads})
	}
	fmt.Fprintf(progress, "baseline: fixed replica counts…\n")
	fixed, curve, err := fixedBaseline(ctx, main, end, sum.Workloads)
	if err != nil {
		return fmt.Errorf("baseline fixed: %w", err)
	}
	sum.Baselines = append(sum.Baselines, fixed)
	sum.Fixed = curve
	fmt.Fprintf(progress, "baseline: oracle…\n")
	sum.Baselines = append(sum.Baselines, oracleBaseline(main, end, sum.Workloads, progress))
	return nil
}

// oracleBaseline is the hindsight bound of each workload with a latency
// target (sim.FindOracle), over the same span as the run and the same
// requests; a workload without one, whose target no schedule up to
// maxFixed pods meets, or whose oracle could not be searched (said on
// progress) has an empty row.
func oracleBaseline(w *workspace, end time.Time, mine []simtable.WorkloadResult, progress io.Writer) simtable.Variant {
	seconds := int(end.Sub(w.trace.Start) / time.Second)
	v := simtable.Variant{Name: controlgoals.BaselineOracle}
	for i, wl := range w.simWorkloads() {
		res := simtable.WorkloadResult{Workload: mine[i].Workload, Target: mine[i].Target}
		if wl.target > 0 {
			o, ok, err := sim.FindOracle(w.simCfg, w.trace, sim.Options{}, wl.addr.Namespace, wl.addr.Name, wl.target, maxFixed, seconds)
			switch {
			case err != nil:
				fmt.Fprintf(progress, "baseline: no oracle for %s: %v\n", res.Workload, err)
			case !ok:
				fmt.Fprintf(progress, "baseline: no oracle for %s: no schedule of at most %d pods meets p99 ≤ %s\n", res.Workload, maxFixed, wl.target)
			default:
				res.Oracle = &o
				res.ReplicaHours = o.ReplicaHours()
				// Point j is the world's second (j+1)·step − 1.
				step := mine[i].Report.Step
				for j := range mine[i].Report.Points.Ready {
					m := min(((j+1)*step-1)/60, len(o.Replicas)-1)
					res.Report.Points.Ready = append(res.Report.Points.Ready, float64(o.Replicas[m]))
				}
			}
		}
		v.Workloads = append(v.Workloads, res)
	}
	return v
}

// fixedBaseline finds, for each workload with a latency target, the
// smallest fixed count of pods (no autoscaler) whose time over target is
// at most setpoint's: doubling from 1 until one is, then bisecting, up to
// maxFixed. The world alone runs in process (no loop, no provider), each
// round with only the workloads still searching, each at its probe: a
// workload's requests do not depend on the others (sim seeds each by its
// name). A workload without a target is run once, at 1 pod.
func fixedBaseline(ctx context.Context, w *workspace, end time.Time, mine []simtable.WorkloadResult) (simtable.Variant, map[string][]simtable.FixedPoint, error) {
	type search struct {
		cfg             int // index in the sim config
		lo, hi, probe   int // largest count over, smallest within (0: none yet), next
		best            simtable.WorkloadResult
		done, hasTarget bool
	}
	wls := w.simWorkloads()
	ss := make([]search, len(wls))
	for i, wl := range wls {
		ss[i] = search{probe: 1, hasTarget: wl.target > 0}
		ss[i].cfg = slices.IndexFunc(w.simCfg.Workloads, func(c spec.SimWorkload) bool {
			return c.Kind == wl.addr.Kind && c.Namespace == wl.addr.Namespace && c.Name == wl.addr.Name
		})
		ss[i].done = ss[i].cfg < 0
	}
	curve := map[string][]simtable.FixedPoint{}
	traces := map[string]*sim.Trace{}
	for {
		if ctx.Err() != nil {
			return simtable.Variant{}, nil, ctx.Err()
		}
		cfg := w.simCfg
		// Route groups serve none of the workloads, and nodes do not
		// change how they serve: only their cost would change with them.
		cfg.Workloads, cfg.RouteGroups, cfg.Nodes = nil, nil, nil
		for i := range ss {
			if ss[i].done {
				continue
			}
			c := w.simCfg.Workloads[ss[i].cfg]
			c.HPA, c.Replicas = nil, ss[i].probe
			if c.Knative != nil {
				k := *c.Knative
				k.MinScale, k.MaxScale = ss[i].probe, ss[i].probe
				c.Knative = &k
			}
			cfg.Workloads = append(cfg.Workloads, c)
		}
		if len(cfg.Workloads) == 0 {
			break
		}
		world, err := sim.NewWithTrace(cfg, w.trace, sim.Options{Traces: traces})
		if err != nil {
			return simtable.Variant{}, nil, err
		}
		world.AdvanceTo(end)
		for i, wl := range wls {
			s := &ss[i]
			if s.done {
				continue
			}
			r, _ := world.Report(wl.addr.Namespace, wl.addr.Name)
			res := simtable.Result(r, wl.target)
			res.Fixed = s.probe
			curve[res.Workload] = append(curve[res.Workload], simtable.FixedPoint{Replicas: s.probe, OverExact: res.OverExact, ReplicaHours: res.ReplicaHours})
			if !s.hasTarget || res.OverExact <= mine[i].OverExact+1e-9 {
				s.hi, s.best = s.probe, res
			} else {
				s.lo = s.probe
				if s.hi == 0 && s.probe >= maxFixed {
					res.Fixed = -s.probe // the most tried, still worse
					s.best, s.done = res, true
					continue
				}
			}
			switch {
			case s.hi == 0:
				s.probe = min(2*s.lo, maxFixed)
			case s.hi-s.lo <= 1:
				s.done = true
			default:
				s.probe = (s.lo + s.hi) / 2
			}
		}
	}
	best := make([]simtable.WorkloadResult, len(ss))
	for i := range ss {
		best[i] = ss[i].best
	}
	for k := range curve {
		slices.SortFunc(curve[k], func(a, b simtable.FixedPoint) int { return a.Replicas - b.Replicas })
	}
	return simtable.Variant{Name: controlgoals.BaselineFixed, Workloads: best}, curve, nil
}
