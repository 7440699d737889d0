package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/sim"
)

// readNodeReports reads the world's report of each of its nodes at end.
func readNodeReports(ctx context.Context, w *workspace, end time.Time) ([]sim.NodeReport, error) {
	if len(w.simCfg.Nodes) == 0 {
		return nil, nil
	}
	var as []addrs.Object
	for _, n := range w.simCfg.Nodes {
		as = append(as, addrs.Object{Provider: "sim", Kind: sim.KindNodeReport, Name: n.Name})
	}
	resp := w.providers["sim"].Read(ctx, providers.ReadRequest{Now: end, Addresses: as})
	if len(resp.Objects) != len(as) {
		return nil, fmt.Errorf("reading the sim world's node reports: %d of %d", len(resp.Objects), len(as))
	}
	out := make([]sim.NodeReport, len(as))
	for i, o := range resp.Objects {
		r, err := sim.DecodeNodeReport(o)
		if err != nil {
			return nil, fmt.Errorf("reading the sim world's node report: %w", err)
		}
		out[i] = r
	}
	return out, nil
}

// nodeTable is a node's part of the sim summary: the policy it ran, how
// often it rebalanced and moved a container, and each pool at the end
// with the range its size took over the run.
func nodeTable(r sim.NodeReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "node %s (%s", r.Node, r.Topology)
	for _, k := range slices.Sorted(maps.Keys(r.Labels)) {
		fmt.Fprintf(&b, ", %s=%s", k, r.Labels[k])
	}
	b.WriteString(")")
	if r.Policy == "" {
		fmt.Fprintf(&b, ": no node policy at the end; %d rebalances\n", r.Rebalances)
		return b.String()
	}
	fmt.Fprintf(&b, ": node policy %s, cpus %s; %d containers, %d rebalances, %d container updates", r.Policy, r.CPUs, r.Containers, r.Rebalances, r.Moves)
	if r.Unplaced > 0 {
		fmt.Fprintf(&b, ", up to %d pods beyond the node's %d left out", r.Unplaced, sim.MaxNodePods)
	}
	b.WriteString("\n")
	nameW, cpuW := len("pool"), len("CPUs at the end")
	for _, p := range r.Pools {
		nameW, cpuW = max(nameW, len(p.Name)), max(cpuW, len(orDash(p.CPUs.String())))
	}
	fmt.Fprintf(&b, "  %-*s  %-*s  %10s  %9s  %12s\n", nameW, "pool", cpuW, "CPUs at the end", "containers", "requested", "CPUs min–max")
	for _, p := range r.Pools {
		fmt.Fprintf(&b, "  %-*s  %-*s  %10d  %9s  %12s\n", nameW, p.Name, cpuW, orDash(p.CPUs.String()), len(p.Containers),
			fmt.Sprintf("%dm", p.RequestMilli), fmt.Sprintf("%d–%d", p.MinSize, p.MaxSize))
	}
	for _, p := range r.Problems {
		fmt.Fprintf(&b, "  ! %s\n", p)
	}
	return b.String()
}
