// Package intent is what deciders produce: for one attribute of one
// object, a lower bound, an upper bound or an exact value, with the numbers
// that led to it.
package intent

import (
	"fmt"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/providers"
)

// Kind of an intent.
type Kind string

// Intent kinds.
const (
	LowerBound Kind = "lower-bound"
	UpperBound Kind = "upper-bound"
	Exact      Kind = "exact"
)

// Unit says how a value is printed and stepped.
type Unit string

// Units.
const (
	Count Unit = "count" // replicas
	Bytes Unit = "bytes" // memory
)

// Dimension groups attributes under one enforcement mode.
type Dimension string

// Dimensions of an NFR.
const (
	Replicas Dimension = "replicas"
	Memory   Dimension = "memory"
)

// Intent is one decider's wish for one attribute.
type Intent struct {
	Address   providers.Address
	Attribute string
	Kind      Kind
	Value     int64
	Unit      Unit
	Dimension Dimension
	// Recommended is the raw recommendation before bounds from the user's
	// value (what the stability window tracks).
	Recommended int64
	Rationale   string
	// Source is the spec and the position of the field that asked for it.
	Source    string // kind/namespace/name of the spec
	SourcePos spec.Pos
	// Create asks for the object to be created when it does not exist.
	Create *Create
	// Restore puts back the user's value after enforcement was turned off;
	// once applied, setpoint forgets the attribute.
	Restore bool
}

// Create describes an object to create (an HPA the spec asks for).
type Create struct {
	Attributes map[string]string
}

// Format prints a value in its unit.
func Format(v int64, u Unit) string {
	if u == Bytes {
		return spec.Bytes(v).String()
	}
	return fmt.Sprint(v)
}
