package sdk_test

import (
	"context"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/sdk"
)

// minimal implements only what an author must: Read, Apply and Schema.
type minimal struct{ sdk.Base }

func (minimal) Schema(context.Context) (providers.Schema, []providers.Diagnostic) {
	return providers.Schema{Name: "minimal"}, nil
}
func (minimal) Read(context.Context, providers.ReadRequest) providers.ReadResponse {
	return providers.ReadResponse{}
}
func (minimal) Apply(context.Context, providers.ApplyRequest) providers.ApplyResponse {
	return providers.ApplyResponse{}
}

var _ sdk.Provider = minimal{}

func TestBaseDefaults(t *testing.T) {
	ctx := context.Background()
	var p sdk.Provider = minimal{}
	l := p.List(ctx, providers.ListRequest{Kind: "Deployment"})
	if len(l.Objects) != 0 || len(l.Diagnostics) != 1 || l.Diagnostics[0].Severity != providers.Error || l.Diagnostics[0].Message != sdk.ErrListUnsupported {
		t.Fatalf("List: %+v", l)
	}
	a := addrs.Object{Provider: "minimal", Kind: "Deployment", Namespace: "shop", Name: "checkout"}
	replicas := addrs.MustPath("spec.replicas")
	attrs := map[addrs.Path]values.Value{replicas: values.CountOf(3)}
	pc := p.PlanChange(ctx, providers.PlanChangeRequest{Now: time.Now(), Changes: []providers.ObjectChange{
		{Address: a, Action: action.Update, Attributes: attrs, Changed: []addrs.Path{replicas}},
		{Address: a, Action: action.Delete},
	}})
	if len(pc.Results) != 2 || pc.Results[0].Err != "" || pc.Results[0].Address != a || pc.Results[0].After[replicas] != values.CountOf(3) ||
		pc.Results[1].Err != "" || len(pc.Results[1].After) != 0 {
		t.Fatalf("PlanChange: %+v", pc)
	}
	// After is a copy: the provider may not alias the request.
	pc.Results[0].After[replicas] = values.CountOf(9)
	if attrs[replicas] != values.CountOf(3) {
		t.Fatal("PlanChange's After aliases the change's attributes")
	}
	if s := p.Signals(ctx, providers.SignalsRequest{Cursor: 7}); s.Cursor != 7 || len(s.Samples) != 0 {
		t.Fatalf("Signals: %+v", s)
	}
	if d := p.Configure(ctx, providers.ConfigureRequest{Config: []byte(`{}`)}); d != nil {
		t.Fatalf("Configure: %v", d)
	}
	ectx, cancel := context.WithCancel(ctx)
	cancel()
	if err := p.Events(ectx, time.Now(), func(providers.Event) error { return nil }); err != nil {
		t.Fatalf("Events: %v", err)
	}
}
