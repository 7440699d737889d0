package plan

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/setpoint-dev/setpoint/engine/values"
)

// BoundKind says how the gate moved a value away from what was wanted.
type BoundKind uint8

// Bound kinds.
const (
	BoundNone     BoundKind = iota
	BoundStep               // the bounded step: at most Percent of Of
	BoundCap                // a hard cap: at most Cap, set by Field
	BoundTakeover           // the field is taken from Manager
	BoundPolicy             // a kind's policy bounded it, as Field says
)

var boundNames = [...]string{"none", "step", "cap", "takeover", "policy"}

func (k BoundKind) String() string {
	if int(k) < len(boundNames) {
		return boundNames[k]
	}
	return fmt.Sprintf("bound(%d)", uint8(k))
}

// MarshalText prints the kind's name.
func (k BoundKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads a kind's name.
func (k *BoundKind) UnmarshalText(b []byte) error {
	for i, n := range boundNames {
		if n == string(b) {
			*k = BoundKind(i)
			return nil
		}
	}
	return fmt.Errorf("unknown bound kind %q", b)
}

// Bound is one adjustment the gate made to a change, with its numbers;
// its text and its JSON come from the same value.
type Bound struct {
	Kind BoundKind
	// Percent of Of (the current value) a step may move; Up its direction.
	Percent float64
	Of      values.Value
	Up      bool
	// Cap and the Field that sets it; a policy bound says itself in Field.
	Cap   values.Value
	Field string
	// Manager the field is taken from.
	Manager string
	// Period, for a step, is the time the step bounds the change over
	// (0: each apply alone); Of is then the value at the period's start.
	Period time.Duration
	// AtLeast, for a step of a count, is the least it may move (0: 1).
	AtLeast int64
}

// String is the bound as a plan prints it.
func (b Bound) String() string {
	pct := strconv.FormatFloat(b.Percent*100, 'g', -1, 64)
	switch b.Kind {
	case BoundStep:
		if b.Of.Type() == values.Count {
			sign := "-"
			if b.Up {
				sign = "+"
			}
			return fmt.Sprintf("bounded to %s%s%% of %s%s, at least %d", sign, pct, b.Of, b.per(), max(b.AtLeast, 1))
		}
		return fmt.Sprintf("step bounded to %s%% of %s%s", pct, b.Of, b.per())
	case BoundCap:
		return fmt.Sprintf("capped at %s by %s", b.Cap, b.Field)
	case BoundTakeover:
		return "takes the field from " + b.Manager
	case BoundPolicy:
		return b.Field
	}
	return ""
}

// per says the period a step bound runs over ("" for one apply).
func (b Bound) per() string {
	if b.Period <= 0 {
		return ""
	}
	return " per " + b.Period.String()
}

type boundJSON struct {
	Kind    BoundKind     `json:"kind"`
	Percent float64       `json:"percent,omitempty"`
	Of      *values.Value `json:"of,omitempty"`
	Up      bool          `json:"up,omitempty"`
	Cap     *values.Value `json:"cap,omitempty"`
	Field   string        `json:"field,omitempty"`
	Manager string        `json:"manager,omitempty"`
	Period  string        `json:"period,omitempty"`
	AtLeast int64         `json:"atLeast,omitempty"`
	Text    string        `json:"text"`
}

func optional(v values.Value) *values.Value {
	if !v.IsValid() {
		return nil
	}
	return &v
}

// MarshalJSON writes the bound's numbers and its text.
func (b Bound) MarshalJSON() ([]byte, error) {
	j := boundJSON{Kind: b.Kind, Percent: b.Percent, Of: optional(b.Of), Up: b.Up, Cap: optional(b.Cap), Field: b.Field, Manager: b.Manager, AtLeast: b.AtLeast, Text: b.String()}
	if b.Period > 0 {
		j.Period = b.Period.String()
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (b *Bound) UnmarshalJSON(data []byte) error {
	var j boundJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*b = Bound{Kind: j.Kind, Percent: j.Percent, Up: j.Up, Field: j.Field, Manager: j.Manager, AtLeast: j.AtLeast}
	if j.Period != "" {
		d, err := time.ParseDuration(j.Period)
		if err != nil || d < 0 {
			return fmt.Errorf("bound period %q: not a duration", j.Period)
		}
		b.Period = d
	}
	if j.Of != nil {
		b.Of = *j.Of
	}
	if j.Cap != nil {
		b.Cap = *j.Cap
	}
	return nil
}
