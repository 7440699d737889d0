// Package action is what a plan does to an object or an attribute:
// create, update, delete, or nothing. A small enum with a stringer, as
// Terraform's plans.Action, shared by the plan and the provider protocol.
package action

import "fmt"

// Action on an object.
type Action uint8

// Actions. NoOp is the zero value: nothing to do.
const (
	NoOp Action = iota
	Create
	Update
	Delete
)

var names = [...]string{"no-op", "create", "update", "delete"}

func (a Action) String() string {
	if int(a) < len(names) {
		return names[a]
	}
	return fmt.Sprintf("action(%d)", uint8(a))
}

// Symbol prints an action as a plan does: + ~ - or a space.
func (a Action) Symbol() string {
	switch a {
	case Create:
		return "+"
	case Update:
		return "~"
	case Delete:
		return "-"
	}
	return " "
}

// Parse reads an action's name.
func Parse(s string) (Action, error) {
	for i, n := range names {
		if n == s {
			return Action(i), nil
		}
	}
	return NoOp, fmt.Errorf("unknown action %q (want no-op, create, update or delete)", s)
}

// MarshalText prints the action's name.
func (a Action) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalText reads an action's name.
func (a *Action) UnmarshalText(b []byte) error {
	x, err := Parse(string(b))
	*a = x
	return err
}
