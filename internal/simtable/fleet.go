package simtable

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// FleetCluster is one cluster's part of its fleet's run: the node steps
// applied to it, their rate over the run and the most in any hour of it,
// and how long the cluster was short of one instance's need in some
// dimension (as its Fleet saw it: scaling up or full).
type FleetCluster struct {
	Name         string  `json:"name"`
	Steps        int     `json:"steps"`
	PerHour      float64 `json:"stepsPerHour"`
	MostInAnHour int     `json:"mostStepsInAnHour"`
	// ShortSeconds is nil when the run did not measure it.
	ShortSeconds *float64 `json:"shortSeconds,omitempty"`
}

// Step counts a node step applied to a cluster at (into the run).
func (f *FleetResult) Step(cluster string, at time.Duration) {
	f.Steps++
	if f.stepsAt == nil {
		f.stepsAt = map[string][]time.Duration{}
	}
	f.stepsAt[cluster] = append(f.stepsAt[cluster], at)
}

// Short counts d of time in which a cluster was short.
func (f *FleetResult) Short(cluster string, d time.Duration) {
	if f.short == nil {
		f.short = map[string]time.Duration{}
	}
	f.short[cluster] += d
}

// Finish sums each cluster up, by name, once the run (of length run) is
// over: every cluster stepped or seen short.
func (f *FleetResult) Finish(run time.Duration) {
	names := map[string]bool{}
	for n := range f.stepsAt {
		names[n] = true
	}
	for n := range f.short {
		names[n] = true
	}
	f.PerCluster = nil
	for _, n := range slices.Sorted(maps.Keys(names)) {
		at := slices.Sorted(slices.Values(f.stepsAt[n]))
		c := FleetCluster{Name: n, Steps: len(at), MostInAnHour: mostInAnHour(at)}
		if run > 0 {
			c.PerHour = float64(len(at)) / run.Hours()
		}
		if f.short != nil {
			secs := f.short[n].Seconds()
			c.ShortSeconds = &secs
		}
		f.PerCluster = append(f.PerCluster, c)
	}
}

// mostInAnHour is the most of the times (sorted) that fall in any hour.
func mostInAnHour(at []time.Duration) int {
	most, j := 0, 0
	for i := range at {
		for j < len(at) && at[j]-at[i] < time.Hour {
			j++
		}
		most = max(most, j-i)
	}
	return most
}

// FleetTable is a fleet's line of the sim summary and, under it, its
// clusters': node steps in all, an hour over the run, and the most in any
// hour of it; the time short when the run measured it.
func FleetTable(f FleetResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "fleet %s: %d clusters, %d nodes at the end; %d created, %d deleted, %d node steps\n", f.Fleet, f.Clusters, f.Nodes, f.Created, f.Deleted, f.Steps)
	if len(f.PerCluster) == 0 {
		return b.String()
	}
	nameW, short := len("cluster"), false
	for _, c := range f.PerCluster {
		nameW, short = max(nameW, len(c.Name)), short || c.ShortSeconds != nil
	}
	fmt.Fprintf(&b, "  %-*s  %10s  %8s  %15s", nameW, "cluster", "node steps", "an hour", "most in an hour")
	if short {
		fmt.Fprintf(&b, "  %8s", "short")
	}
	b.WriteString("\n")
	for _, c := range f.PerCluster {
		fmt.Fprintf(&b, "  %-*s  %10d  %8.1f  %15d", nameW, c.Name, c.Steps, c.PerHour, c.MostInAnHour)
		if short {
			s := "-"
			if c.ShortSeconds != nil {
				s = shortDur(time.Duration(*c.ShortSeconds * float64(time.Second)))
			}
			fmt.Fprintf(&b, "  %8s", s)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// shortDur is a duration as a spec writes it: 5m, 2m10s, 1h.
func shortDur(d time.Duration) string {
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}
