// Package sdk is what a provider author needs: implement Provider (embed
// Base for the optional parts: Read, Apply and Schema are all a provider
// must write) and serve it from main:
//
//	func main() {
//		sdk.Serve(&myProvider{})
//	}
//
// The binary is named setpoint-provider-NAME and put on the Environment's
// pluginPath; setpoint starts it, talks gRPC to it over go-plugin
// (protocol version plugin.ProtocolVersion), and restarts it if it dies.
//
// Values are typed (engine/values) and attributes named by parsed paths
// (engine/addrs); Apply receives changes grouped per object, each with
// every attribute setpoint owns on the object after the change, and
// answers one result per object, in order.
package sdk

import (
	"context"
	"maps"
	"time"

	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/plugin"
)

// Provider is the interface an author implements.
type Provider = providers.Full

// ErrListUnsupported is the message of Base.List's error diagnostic.
const ErrListUnsupported = "List is not supported by this provider"

// Base gives the optional parts of Provider: no configuration, no List,
// a PlanChange that accepts everything, no signals, no events. Embed it
// and implement Read, Apply and Schema.
type Base struct{}

// Configure accepts any configuration.
func (Base) Configure(context.Context, providers.ConfigureRequest) []providers.Diagnostic { return nil }

// List is not supported: it answers one error diagnostic, never an empty
// list, so a caller discovering objects (a Fleet's clusters, a
// RouteGroup's backends) cannot take "cannot list" for "there are none".
func (Base) List(context.Context, providers.ListRequest) providers.ListResponse {
	return providers.ListResponse{Diagnostics: []providers.Diagnostic{{Severity: providers.Error, Message: ErrListUnsupported}}}
}

// PlanChange accepts every change: After is the change's attributes (none
// for a delete). A provider that can refuse a change (a conflict, a
// validation) should implement PlanChange so the refusal shows in a plan.
func (Base) PlanChange(_ context.Context, req providers.PlanChangeRequest) providers.PlanChangeResponse {
	out := providers.PlanChangeResponse{Results: make([]providers.ObjectResult, len(req.Changes))}
	for i, c := range req.Changes {
		r := providers.ObjectResult{Address: c.Address}
		if c.Action != action.Delete {
			r.After = maps.Clone(c.Attributes)
		}
		out.Results[i] = r
	}
	return out
}

// Signals has none.
func (Base) Signals(_ context.Context, req providers.SignalsRequest) providers.SignalsResponse {
	return providers.SignalsResponse{Cursor: req.Cursor}
}

// Events sends none; it returns when ctx ends.
func (Base) Events(ctx context.Context, _ time.Time, _ func(providers.Event) error) error {
	<-ctx.Done()
	return nil
}

// Serve runs the provider as a plugin until setpoint stops it.
func Serve(p Provider) {
	plugin.Serve(p, plugin.ProtocolVersion)
}
