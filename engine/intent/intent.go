// Package intent is what deciders produce: for one attribute of one
// object, a lower bound, an upper bound or an exact value, with the numbers
// that led to it.
package intent

import (
	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/values"
)

// Kind of an intent.
type Kind string

// Intent kinds.
const (
	LowerBound Kind = "lower-bound"
	UpperBound Kind = "upper-bound"
	Exact      Kind = "exact"
)

// Dimension groups attributes under one enforcement mode.
type Dimension string

// Intent is one decider's wish for one attribute.
type Intent struct {
	Attr      addrs.Attr
	Kind      Kind
	Value     values.Value
	Dimension Dimension
	// Recommended is the raw recommendation before bounds from the user's
	// value.
	Recommended values.Value
	Rationale   string
	// Source is the spec (kind/namespace/name) and the position of the
	// field that asked for it.
	Source    string
	SourcePos spec.Pos
	// Create asks for the object to be created when it does not exist,
	// with these attributes besides this one.
	Create *Create
	// Restore puts back the user's value after enforcement was turned off;
	// once applied, setpoint forgets the attribute. Any other intent on the
	// attribute wins over a restore.
	Restore bool
	// Group names a set of coupled attributes of one object that move in
	// one apply or not at all (a container's memory request and limit).
	Group string
	// InPlace asks for the value to reach running pods without a restart
	// too (container memory through the resize subresource); it names
	// what a refused resize does: "hold" or "rollout".
	InPlace string
	// Sleep marks an exact value that puts the target to sleep (a
	// Schedule's idle decision): the lower bounds of other specs yield to
	// it, as a minimum is meant for a workload that is awake. A spec that
	// must keep the target warm says so to the sleeping spec's decider
	// (NFR's throughput.keepWarm), which then does not ask for sleep.
	Sleep bool
	// Delete asks for the whole object to go (a Fleet's empty cluster):
	// Attr names the object (its path is only a key), Value is unset.
	Delete bool
}

// Create describes an object to create (an HPA the spec asks for).
type Create struct {
	Attributes map[addrs.Path]values.Value
}
