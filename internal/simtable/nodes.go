package simtable

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/setpoint-dev/setpoint/providers/sim"
)

// NodeTable is a node's part of the sim summary: the policy it ran, how
// often it rebalanced and moved a container, and each pool at the end
// with the range its size took over the run.
func NodeTable(r sim.NodeReport) string {
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
		nameW, cpuW = max(nameW, len(p.Name)), max(cpuW, len(cmp.Or(p.CPUs.String(), "-")))
	}
	fmt.Fprintf(&b, "  %-*s  %-*s  %10s  %9s  %12s\n", nameW, "pool", cpuW, "CPUs at the end", "containers", "requested", "CPUs min–max")
	for _, p := range r.Pools {
		fmt.Fprintf(&b, "  %-*s  %-*s  %10d  %9s  %12s\n", nameW, p.Name, cpuW, cmp.Or(p.CPUs.String(), "-"), len(p.Containers),
			fmt.Sprintf("%dm", p.RequestMilli), fmt.Sprintf("%d–%d", p.MinSize, p.MaxSize))
	}
	for _, p := range r.Problems {
		fmt.Fprintf(&b, "  ! %s\n", p)
	}
	return b.String()
}
