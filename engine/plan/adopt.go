package plan

import (
	"time"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/values"
)

// Adoption is what a plan recorded of an attribute it read for the first
// time: the user's value, or (on an object setpoint created, known from a
// release's tombstone) that the value there is setpoint's own write.
type Adoption struct {
	Address   addrs.Object  `json:"address"`
	Attribute addrs.Path    `json:"attribute"`
	User      *values.Value `json:"user,omitempty"`
	// Own is setpoint's own write, recognised: no user value.
	Own   *values.Value `json:"own,omitempty"`
	OwnBy []string      `json:"ownBy,omitempty"`
	OwnAt time.Time     `json:"ownAt,omitzero"`
}
