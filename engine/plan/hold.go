package plan

import (
	"encoding/json"
	"fmt"
	"time"
)

// HoldKind says why a change is held.
type HoldKind uint8

// Hold kinds.
const (
	HoldNone      HoldKind = iota
	HoldPaused             // the spec or the target is paused
	HoldMode               // the dimension is in observe mode
	HoldConflict           // a GitOps controller owns the field
	HoldCooldown           // too soon after the last apply
	HoldStability          // the recommendation has not been stable long enough
	HoldTwoExact           // two specs want different exact values
	HoldCoupled            // a coupled attribute is held
	HoldInvalid            // the group's values would break a rule (request > limit)
	HoldRejected           // the provider's dry run refused the change
	HoldPolicy             // a kind's policy holds it for its own reason
)

var holdNames = [...]string{"none", "paused", "mode", "conflict", "cooldown", "stability", "two-exact", "coupled", "invalid", "rejected", "policy"}

func (k HoldKind) String() string {
	if int(k) < len(holdNames) {
		return holdNames[k]
	}
	return fmt.Sprintf("hold(%d)", uint8(k))
}

// MarshalText prints the kind's name.
func (k HoldKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads a kind's name.
func (k *HoldKind) UnmarshalText(b []byte) error {
	for i, n := range holdNames {
		if n == string(b) {
			*k = HoldKind(i)
			return nil
		}
	}
	return fmt.Errorf("unknown hold kind %q", b)
}

// Hold is why a change is not applied, with its numbers. Text and JSON
// are rendered from the same value.
type Hold struct {
	Kind HoldKind `json:"kind"`
	// Mode of the dimension (HoldMode).
	Mode string `json:"mode,omitempty"`
	// Manager owning the field (HoldConflict).
	Manager string `json:"manager,omitempty"`
	// Elapsed of Total (HoldCooldown: since the last apply; HoldStability:
	// since the window opened); Until is when the hold ends.
	Elapsed time.Duration `json:"elapsed,omitempty"`
	Total   time.Duration `json:"total,omitempty"`
	Until   time.Time     `json:"until,omitzero"`
	// Attribute is the coupled attribute that is held (HoldCoupled).
	Attribute string `json:"attribute,omitempty"`
	// Detail says more: where the pause comes from, the provider's
	// refusal, the two specs' values.
	Detail string `json:"detail,omitempty"`
	// Policy names the kind's policy (HoldPolicy).
	Policy string `json:"policy,omitempty"`
}

// String is the hold as a plan prints it.
func (h Hold) String() string {
	switch h.Kind {
	case HoldPaused:
		return "paused (" + h.Detail + ")"
	case HoldMode:
		return h.Mode + " mode"
	case HoldConflict:
		return fmt.Sprintf("conflict: the field is managed by %s, a GitOps controller; list it under takeOverFrom to let setpoint take it", h.Manager)
	case HoldCooldown:
		return fmt.Sprintf("cooldown %d s of %d s since the last apply", int(h.Elapsed.Seconds()), int(h.Total.Seconds()))
	case HoldStability:
		return fmt.Sprintf("stable %d s of %d s", int(h.Elapsed.Seconds()), int(h.Total.Seconds()))
	case HoldTwoExact:
		return "conflict: two specs want exact values: " + h.Detail
	case HoldCoupled:
		return "coupled with " + h.Attribute + ", which is held: " + h.Detail
	case HoldInvalid:
		return "invalid together: " + h.Detail
	case HoldRejected:
		return "the provider would refuse it: " + h.Detail
	case HoldPolicy:
		return h.Policy + ": " + h.Detail
	}
	return h.Detail
}

// IsConflict reports whether the hold is about ownership or two specs.
func (h Hold) IsConflict() bool { return h.Kind == HoldConflict || h.Kind == HoldTwoExact }

// MarshalJSON adds the text beside the numbers.
func (h Hold) MarshalJSON() ([]byte, error) {
	type plain Hold
	return json.Marshal(struct {
		plain
		Text string `json:"text"`
	}{plain(h), h.String()})
}

// UnmarshalJSON reads what MarshalJSON wrote (the text is derived).
func (h *Hold) UnmarshalJSON(b []byte) error {
	type plain Hold
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*h = Hold(p)
	return nil
}
