package spec

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/setpoint-dev/setpoint/engine/decide/fleet"
)

func init() {
	Register(Kind{Name: "Fleet", New: func() Document { return &Fleet{} }})
}

// Fleet sizes a pool of clusters and their nodes by capacity dimensions.
type Fleet struct {
	Header
	Spec FleetSpec `json:"spec"`
}

// FleetSpec mirrors #FleetSpec.
type FleetSpec struct {
	Target struct {
		Provider string `json:"provider,omitempty"`
	} `json:"target"`
	Cloud           string           `json:"cloud"`
	Regions         []string         `json:"regions"`
	MultiAZ         bool             `json:"multiAZ"`
	Zones           int              `json:"zones"`
	ClusterTemplate string           `json:"clusterTemplate"`
	Capacity        []FleetDimension `json:"capacity"`
	Nodes           struct {
		Step            int `json:"step"`
		Floor           int `json:"floor"`
		Ceiling         int `json:"ceiling"`
		WorkloadMinimum int `json:"workloadMinimum"`
		// SpareFor: a scale-down waits until every dimension has spared a
		// step's worth for this long (0: at once).
		SpareFor Duration `json:"spareFor"`
	} `json:"nodes"`
	Remaining map[string]string `json:"remaining"`
	Instances string            `json:"instances,omitempty"`
	Reporter  string            `json:"reporter,omitempty"`
	Overrides struct {
		Floor           string `json:"floor,omitempty"`
		Ceiling         string `json:"ceiling,omitempty"`
		WorkloadMinimum string `json:"workloadMinimum,omitempty"`
	} `json:"overrides"`
	Clusters struct {
		CreateWhenAllFull bool     `json:"createWhenAllFull"`
		Delete            bool     `json:"delete"`
		EmptyFor          Duration `json:"emptyFor"`
		MaxCreatesPerHour int      `json:"maxCreatesPerHour"`
	} `json:"clusters"`
	Paused      bool `json:"paused"`
	Enforcement struct {
		Nodes    Mode `json:"nodes"`
		Clusters Mode `json:"clusters"`
	} `json:"enforcement"`
}

// FleetDimension is one capacity dimension.
type FleetDimension struct {
	Name        string  `json:"name"`
	PerInstance float64 `json:"perInstance"`
	PerNode     float64 `json:"perNode"`
}

var (
	_ = RegisterCheck(Check{Kind: "Fleet", Path: "spec.capacity.*.name", What: "capacity dimensions named once, each with a query under spec.remaining", Why: WhyCompare, Example: "invalid/fleet-errors.yaml"})
	_ = RegisterCheck(Check{Kind: "Fleet", Path: "spec.remaining.*", What: "remaining names only the declared dimensions, and each query parses", Why: WhyPromQL, Example: "invalid/fleet-errors.yaml"})
	_ = RegisterCheck(Check{Kind: "Fleet", Path: "spec.instances", What: "the instances and reporter queries parse", Why: WhyPromQL, Example: "invalid/fleet-errors.yaml"})
	_ = RegisterCheck(Check{Kind: "Fleet", Path: "spec.nodes.*", What: "floor, step and workloadMinimum ≤ ceiling, once rounded to the zones when multi-AZ", Why: WhyCompare, Example: "invalid/fleet-errors.yaml"})
	_ = RegisterCheck(Check{Kind: "Fleet", Path: "spec.nodes.ceiling", What: "a multi-AZ ceiling of at least the zones (rounded down, it would leave no node)", Why: WhyCompare, Example: "invalid/fleet-errors.yaml"})
)

// MaxFleetSpareFor bounds nodes.spareFor: a scale-down that waits longer
// than an hour for a spare step to last, under churn, hardly comes.
const MaxFleetSpareFor = time.Hour

// Check: dimensions unique; remaining names exactly the dimensions; floor
// ≤ ceiling and step ≤ ceiling, also once rounded to the zones when
// multi-AZ; a multi-AZ ceiling of at least the zones; every query parses.
func (f *Fleet) Check() []FieldError {
	var errs []FieldError
	sp := f.Spec
	names := map[string]int{}
	for i, d := range sp.Capacity {
		if j, dup := names[d.Name]; dup {
			errs = append(errs, FieldError{Path: fmt.Sprintf("spec.capacity.%d.name", i), Message: "a second dimension named " + d.Name,
				Expected: "unique dimension names", Related: fmt.Sprintf("spec.capacity.%d.name", j)})
			continue
		}
		names[d.Name] = i
		if _, ok := sp.Remaining[d.Name]; !ok {
			errs = append(errs, FieldError{Path: fmt.Sprintf("spec.capacity.%d.name", i), Message: "dimension " + d.Name + " has no remaining query",
				Expected: "a query under spec.remaining." + d.Name})
		}
	}
	var qs queries
	keys := make([]string, 0, len(sp.Remaining))
	for k := range sp.Remaining {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		path := "spec.remaining." + k
		if _, ok := names[k]; !ok {
			errs = append(errs, FieldError{Path: path, Message: "remaining names dimension " + k + ", which spec.capacity does not declare",
				Expected: "one of " + fmt.Sprint(slices.Sorted(maps.Keys(names)))})
			continue
		}
		errs = append(errs, qs.check(path, sp.Remaining[k], "a PromQL expression grouped by cluster")...)
	}
	n := sp.Nodes
	// Compared as the decisions use them: rounded to the zones when
	// multi-AZ.
	m := fleet.Multiple(sp.MultiAZ, sp.Zones)
	floor, ceiling, step := fleet.RestrictedFloor(n.Floor, m), fleet.RestrictedCeiling(n.Ceiling, m), fleet.StepSize(n.Step, m)
	// A multi-AZ ceiling below the zones rounds down to 0: no cluster can
	// have a node. The floor and step, rounded, would only say it again.
	noRoom := ceiling < m
	if noRoom {
		errs = append(errs, FieldError{Path: "spec.nodes.ceiling", Message: fmt.Sprintf("multi-AZ, ceiling %d is below the %d zones: it rounds down to 0 nodes", n.Ceiling, m),
			Expected: fmt.Sprintf("a ceiling of at least %d (one node per zone), or multiAZ: false", m)})
	}
	switch {
	case n.Floor > n.Ceiling:
		errs = append(errs, FieldError{Path: "spec.nodes.floor", Message: fmt.Sprintf("floor %d is above ceiling %d", n.Floor, n.Ceiling), Expected: "floor <= ceiling"})
	case floor > ceiling && !noRoom:
		errs = append(errs, FieldError{Path: "spec.nodes.floor", Message: fmt.Sprintf("multi-AZ, floor %d rounds up to %d, above ceiling %d rounded down to %d", n.Floor, floor, n.Ceiling, ceiling), Expected: fmt.Sprintf("a floor and a ceiling with a multiple of %d between them", m)})
	}
	// A step above the ceiling could never be taken, and a new cluster
	// (made with at least a step) would start above it.
	switch {
	case n.Step > n.Ceiling:
		errs = append(errs, FieldError{Path: "spec.nodes.step", Message: fmt.Sprintf("step %d is above ceiling %d", n.Step, n.Ceiling), Expected: "step <= ceiling"})
	case step > ceiling && !noRoom:
		errs = append(errs, FieldError{Path: "spec.nodes.step", Message: fmt.Sprintf("multi-AZ, step %d rounds up to %d, above ceiling %d rounded down to %d", n.Step, step, n.Ceiling, ceiling), Expected: fmt.Sprintf("a step that, rounded up to a multiple of %d, is at most the ceiling rounded down", m)})
	}
	if d := n.SpareFor.D(); d < 0 || d > MaxFleetSpareFor {
		errs = append(errs, FieldError{Path: "spec.nodes.spareFor", Message: fmt.Sprintf("spareFor %s: a scale-down would wait that long for a spare step to last", fleet.Dur(d)),
			Expected: fmt.Sprintf("between 0s and %s: under churn, a longer wait hardly ever ends", fleet.Dur(MaxFleetSpareFor))})
	}
	if n.WorkloadMinimum > n.Ceiling {
		errs = append(errs, FieldError{Path: "spec.nodes.workloadMinimum", Message: fmt.Sprintf("workload minimum %d is above ceiling %d", n.WorkloadMinimum, n.Ceiling), Expected: "workloadMinimum <= ceiling"})
	}
	for _, q := range []struct{ path, expr string }{
		{"spec.instances", sp.Instances}, {"spec.reporter", sp.Reporter}, {"spec.overrides.floor", sp.Overrides.Floor},
		{"spec.overrides.ceiling", sp.Overrides.Ceiling}, {"spec.overrides.workloadMinimum", sp.Overrides.WorkloadMinimum},
	} {
		errs = append(errs, qs.check(q.path, q.expr, "a PromQL expression grouped by cluster")...)
	}
	return append(errs, qs.past()...)
}
