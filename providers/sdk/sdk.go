// Package sdk is what a provider author needs: implement Provider (embed
// Base for the optional parts) and serve it from main:
//
//	func main() {
//		sdk.Serve(&myProvider{})
//	}
//
// The binary is named setpoint-provider-NAME and put on the Environment's
// pluginPath; setpoint starts it, talks gRPC to it over go-plugin, and
// restarts it if it dies.
package sdk

import (
	"context"
	"time"

	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/plugin"
)

// Provider is the interface an author implements.
type Provider = providers.Full

// Base gives the optional parts of Provider: no signals, no events, no
// configuration. Embed it and implement Read, Apply and Schema.
type Base struct{}

// Configure accepts any configuration.
func (Base) Configure(context.Context, providers.ConfigureRequest) []providers.Diagnostic { return nil }

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
