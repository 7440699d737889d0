// Package providers defines what the engine asks of a provider: read and
// list the objects specs target, dry-run and apply changes grouped per
// object, every request carrying the engine's now (wall or virtual). The sim world implements it in
// process; the gRPC protocol carries the same requests out of process.
package providers

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/diag"
	"github.com/setpoint-dev/setpoint/engine/values"
)

// Address names one object: PROVIDER:Kind/namespace/name.
type Address = addrs.Object

// ParseAddress reads "sim:Deployment/shop/checkout".
func ParseAddress(s string) (Address, error) { return addrs.ParseObject(s) }

// Object is what a provider read of one address: typed attribute values
// by path, the field manager of each, labels (for List selectors),
// annotations and the generation.
type Object struct {
	Address     Address
	Exists      bool
	Attributes  map[addrs.Path]values.Value
	Managers    map[addrs.Path]string
	Labels      map[string]string
	Annotations map[string]string
	Generation  int64
	// ObservedGeneration is the generation the object's controller has
	// acted on; behind Generation mid-rollout, when changes to it are
	// held. 0 when the provider does not report it.
	ObservedGeneration int64
	// Repair, when set, says why an apply of the object was cut off
	// midway (a process killed between two of its steps), leaving it in a
	// state no spec asks for: the next plan applies the object again, with
	// nothing changed, so the provider finishes what was left (Terraform
	// marks such a resource tainted).
	Repair string
}

// Diagnostic is a provider's report on a request, as Terraform's are: the
// one diagnostics type of setpoint.
type Diagnostic = diag.Diagnostic

// Severities.
const (
	Error   = diag.Error
	Warning = diag.Warning
)

// ReadRequest asks for the objects at addresses as of Now.
type ReadRequest struct {
	Now       time.Time
	Addresses []Address
}

// ReadResponse holds one Object per requested address, in order.
type ReadResponse struct {
	Objects     []Object
	Diagnostics []Diagnostic
}

// ListRequest asks for every object of a kind (in a namespace, or all of
// them when Namespace is empty) whose labels match Selector: discovery of
// a Fleet's clusters or a RouteGroup's backends.
type ListRequest struct {
	Now       time.Time
	Provider  string
	Kind      string
	Namespace string
	Selector  map[string]string
}

// ListResponse holds the matching objects, in address order.
type ListResponse struct {
	Objects     []Object
	Diagnostics []Diagnostic
}

// ObjectChange is one object's change, grouped so a server-side-apply
// provider can send one applied configuration: Attributes holds every
// attribute setpoint owns on the object after the change (the ones it
// moves and the ones it owned before and keeps), so no owned field is
// ever dropped; Changed says which of them this change moves.
type ObjectChange struct {
	Address    Address
	Action     action.Action
	Attributes map[addrs.Path]values.Value
	Changed    []addrs.Path
	// Manager is the field manager setpoint writes as.
	Manager string
	// Force takes fields other managers own: set only when the gate
	// allowed the takeover.
	Force bool
	// Released are fields Manager stops managing: every spec that set
	// them is gone. Their values stay as they are; they are not in
	// Attributes, and no other field changes because of them.
	Released []addrs.Path
	// Reason is why, with the plan's numbers, for the provider's own
	// record of the change (a Kubernetes Event).
	Reason string
	// InPlace, when set, says the change's container memory also goes to
	// running pods without a restart (Kubernetes' pods/resize), and what a
	// refused resize does: InPlaceFallbackHold or InPlaceFallbackRollout.
	InPlace string
	// Seen is the value each changed attribute had when the plan read it
	// (absent: not read, or not set). A provider that can write
	// conditionally tests it, so a change made since is not overwritten.
	Seen map[addrs.Path]values.Value
	// Restored are fields handed back with the user's value setpoint
	// recorded (enforcement turned off): the provider writes each value
	// and gives the field up in the same change, as a release does. A
	// restore left owned by Manager would be dropped by its next apply
	// that no longer names it, or carried with a stale value. Neither in
	// Attributes nor in Released.
	Restored map[addrs.Path]values.Value
}

// CheckRestored refuses a change whose restored fields it could not hold
// whole: a restore is an update of an object that exists, and a field is
// set, released or restored, never two of them. Every provider and the
// protocol call it; what value each field may take is the provider's.
func (c ObjectChange) CheckRestored() error {
	if len(c.Restored) == 0 {
		return nil
	}
	if c.Action != action.Update {
		return fmt.Errorf("%s: a restore is an update of an object that exists, not a %s", c.Address, c.Action)
	}
	// In order, so the first wrong one named is the same every time.
	for _, p := range slices.SortedFunc(maps.Keys(c.Restored), func(a, b addrs.Path) int { return strings.Compare(a.String(), b.String()) }) {
		if _, set := c.Attributes[p]; set || p.IsZero() || slices.Contains(c.Released, p) {
			return fmt.Errorf("restored %q is also set or released, or has no path", p)
		}
	}
	return nil
}

// What a refused in-place resize does.
const (
	InPlaceFallbackHold    = "hold"    // nothing else changes
	InPlaceFallbackRollout = "rollout" // the template changes and pods roll
)

// Conflict is a field another manager owns, which a change without Force
// may not take.
type Conflict struct {
	Path    addrs.Path
	Manager string
}

// ObjectResult says what became of one object's change: Err is empty on
// success; Conflicts name the managers that refused it.
type ObjectResult struct {
	Address   Address
	Err       string
	Conflicts []Conflict
	// After is the object's owned attributes as the provider would leave
	// them (PlanChange) or left them (Apply).
	After map[addrs.Path]values.Value
}

// ApplyRequest applies changes as of Now; applying values an object
// already has is a no-op. Each object's change succeeds or fails whole.
type ApplyRequest struct {
	Now     time.Time
	Changes []ObjectChange
}

// ApplyResponse holds one result per change, in order.
type ApplyResponse struct {
	Results     []ObjectResult
	Diagnostics []Diagnostic
}

// PlanChangeRequest asks, without changing anything, whether each change
// would be accepted and what the object would become (server-side apply
// dry-run for Kubernetes), so rejections show in a plan.
type PlanChangeRequest struct {
	Now     time.Time
	Changes []ObjectChange
}

// PlanChangeResponse holds one result per change, in order: Err says why
// the provider would refuse it.
type PlanChangeResponse struct {
	Results     []ObjectResult
	Diagnostics []Diagnostic
}

// Provider is the interface every provider implements.
type Provider interface {
	Read(ctx context.Context, req ReadRequest) ReadResponse
	List(ctx context.Context, req ListRequest) ListResponse
	PlanChange(ctx context.Context, req PlanChangeRequest) PlanChangeResponse
	Apply(ctx context.Context, req ApplyRequest) ApplyResponse
}

// ConfigureRequest hands a provider its configuration.
type ConfigureRequest struct {
	Now time.Time
	// Config is the provider's config block from the Environment, as JSON.
	Config []byte
	// BaseDir is the Environment file's directory.
	BaseDir string
	// StatePath is where the provider may keep state ("" for none).
	StatePath string
}

// SignalsRequest asks for samples from Cursor on, and for the definitions
// of series from KnownSeries on.
type SignalsRequest struct {
	Now         time.Time
	Cursor      uint64
	KnownSeries uint64
	MaxSamples  int
	// Instance is the provider instance the cursor came from; a provider
	// that is another instance (it restarted) starts from zero.
	Instance string
}

// SeriesDef names a series once; samples refer to it by ID.
type SeriesDef struct {
	ID     uint64
	Labels map[string]string
}

// Sample is one timestamped value (milliseconds since the epoch).
type Sample struct {
	Series uint64
	T      int64
	V      float64
}

// SignalsResponse carries new series and samples, and the next cursor.
// Instance changes when the provider restarts: cursors start again.
type SignalsResponse struct {
	Series      []SeriesDef
	Samples     []Sample
	Cursor      uint64
	More        bool
	Instance    string
	Diagnostics []Diagnostic
}

// Event is a change in the world that should trigger a reconcile.
type Event struct {
	Now     time.Time
	Address Address
	Reason  string
}

// AttributeSchema describes one attribute a provider serves.
type AttributeSchema struct {
	Path        addrs.Path  `json:"path"`
	Type        values.Type `json:"type"`
	ReadOnly    bool        `json:"readOnly,omitempty"`
	Description string      `json:"description,omitempty"`
}

// KindSchema lists a kind's attributes.
type KindSchema struct {
	Kind       string            `json:"kind"`
	Attributes []AttributeSchema `json:"attributes"`
}

// Schema is what a provider says about itself.
type Schema struct {
	Name    string       `json:"name"`
	Version string       `json:"version"`
	Kinds   []KindSchema `json:"kinds"`
	Signals bool         `json:"signals"`
	Events  bool         `json:"events"`
}

// Full is the whole provider protocol: what an out-of-process provider
// implements (through the SDK) and what the engine calls.
type Full interface {
	Provider
	Schema(ctx context.Context) (Schema, []Diagnostic)
	Configure(ctx context.Context, req ConfigureRequest) []Diagnostic
	Signals(ctx context.Context, req SignalsRequest) SignalsResponse
	// Events sends world changes until ctx ends or send fails.
	Events(ctx context.Context, now time.Time, send func(Event) error) error
}

// SignalSource is implemented by providers whose samples feed the
// embedded store.
type SignalSource interface {
	Signals(ctx context.Context, req SignalsRequest) SignalsResponse
}
