// Package providers defines what the engine asks of a provider: read the
// objects specs target and apply attribute changes, every request carrying
// the engine's now (wall or virtual). The sim world implements it in
// process; the gRPC protocol carries the same requests out of process.
package providers

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Address names one object: PROVIDER:Kind/namespace/name.
type Address struct {
	Provider, Kind, Namespace, Name string
}

func (a Address) String() string {
	return a.Provider + ":" + a.Kind + "/" + a.Namespace + "/" + a.Name
}

// Key is the address without its provider, as a provider indexes objects.
func (a Address) Key() string { return a.Kind + "/" + a.Namespace + "/" + a.Name }

// ParseAddress reads "sim:Deployment/shop/checkout".
func ParseAddress(s string) (Address, error) {
	prov, rest, ok := strings.Cut(s, ":")
	parts := strings.Split(rest, "/")
	if !ok || prov == "" || len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return Address{}, fmt.Errorf("address %q: want PROVIDER:Kind/namespace/name", s)
	}
	return Address{Provider: prov, Kind: parts[0], Namespace: parts[1], Name: parts[2]}, nil
}

// Object is what a provider read of one address.
type Object struct {
	Address     Address
	Exists      bool
	Attributes  map[string]string // dotted path → value
	Managers    map[string]string // dotted path → field manager
	Annotations map[string]string
	Generation  int64
}

// Change sets one attribute of one object as a field manager. With Create
// set, the object does not exist yet and is created with those attributes.
type Change struct {
	Address   Address
	Attribute string
	Value     string
	Manager   string
	Create    map[string]string
}

// Severity of a diagnostic.
type Severity string

// Severities.
const (
	Error   Severity = "error"
	Warning Severity = "warning"
)

// Diagnostic is a provider's report on a request, as Terraform's are.
type Diagnostic struct {
	Severity Severity
	Summary  string
	Detail   string
	Address  *Address
}

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

// ApplyRequest applies changes as of Now; applying a value an attribute
// already has is a no-op.
type ApplyRequest struct {
	Now     time.Time
	Changes []Change
}

// ChangeResult says what became of one change; Err is empty on success.
type ChangeResult struct {
	Change Change
	Err    string
}

// ApplyResponse holds one result per change, in order.
type ApplyResponse struct {
	Results     []ChangeResult
	Diagnostics []Diagnostic
}

// Provider is the interface every provider implements.
type Provider interface {
	Read(ctx context.Context, req ReadRequest) ReadResponse
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
	Path        string
	Type        string
	ReadOnly    bool
	Description string
}

// KindSchema lists a kind's attributes.
type KindSchema struct {
	Kind       string
	Attributes []AttributeSchema
}

// Schema is what a provider says about itself.
type Schema struct {
	Name    string
	Version string
	Kinds   []KindSchema
	Signals bool
	Events  bool
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
