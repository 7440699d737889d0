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
	HoldRelease            // a release waits for confirmation (many specs vanished, or some fail to load)
	HoldRollout            // the object is mid-rollout (its controller has not caught up with its generation)
)

var holdNames = [...]string{"none", "paused", "mode", "conflict", "cooldown", "stability", "two-exact", "coupled", "invalid", "rejected", "policy", "release", "rollout"}

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
	Kind HoldKind
	// Mode of the dimension (HoldMode).
	Mode string
	// Manager owning the field (HoldConflict).
	Manager string
	// Elapsed of Total (HoldCooldown: since the last apply; HoldStability:
	// since the window opened); Until is when the hold ends.
	Elapsed time.Duration
	Total   time.Duration
	Until   time.Time
	// Attribute is the coupled attribute that is held (HoldCoupled).
	Attribute string
	// Detail says more: where the pause comes from, the provider's
	// refusal, the two specs' values.
	Detail string
	// Policy names the kind's policy (HoldPolicy).
	Policy string
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
	case HoldRelease:
		return "release not confirmed: " + h.Detail
	case HoldRollout:
		return "mid-rollout: " + h.Detail
	}
	return h.Detail
}

// IsConflict reports whether the hold is about ownership or two specs.
func (h Hold) IsConflict() bool { return h.Kind == HoldConflict || h.Kind == HoldTwoExact }

// holdJSON is a hold for machines: durations as Go duration strings, the
// text beside the numbers.
type holdJSON struct {
	Kind      HoldKind  `json:"kind"`
	Mode      string    `json:"mode,omitempty"`
	Manager   string    `json:"manager,omitempty"`
	Elapsed   string    `json:"elapsed,omitempty"`
	Total     string    `json:"total,omitempty"`
	Until     time.Time `json:"until,omitzero"`
	Attribute string    `json:"attribute,omitempty"`
	Detail    string    `json:"detail,omitempty"`
	Policy    string    `json:"policy,omitempty"`
	Text      string    `json:"text"`
}

// MarshalJSON writes the hold's numbers and its text.
func (h Hold) MarshalJSON() ([]byte, error) {
	j := holdJSON{Kind: h.Kind, Mode: h.Mode, Manager: h.Manager, Until: h.Until, Attribute: h.Attribute, Detail: h.Detail, Policy: h.Policy, Text: h.String()}
	if h.Kind == HoldCooldown || h.Kind == HoldStability || h.Total != 0 {
		j.Elapsed, j.Total = h.Elapsed.String(), h.Total.String()
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON wrote (the text is derived).
func (h *Hold) UnmarshalJSON(b []byte) error {
	var j holdJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*h = Hold{Kind: j.Kind, Mode: j.Mode, Manager: j.Manager, Until: j.Until, Attribute: j.Attribute, Detail: j.Detail, Policy: j.Policy}
	for _, f := range []struct {
		s string
		d *time.Duration
	}{{j.Elapsed, &h.Elapsed}, {j.Total, &h.Total}} {
		if f.s == "" {
			continue
		}
		d, err := time.ParseDuration(f.s)
		if err != nil {
			return fmt.Errorf("hold: %w", err)
		}
		*f.d = d
	}
	return nil
}
