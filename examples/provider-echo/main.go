// Command setpoint-provider-echo is an example third-party provider: a tiny
// in-memory store of objects whose attributes it reads and applies as it is
// told. Build it as setpoint-provider-echo, put it on the Environment's
// pluginPath, and list it under providers as "echo".
package main

import (
	"context"
	"sync"

	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/sdk"
)

func main() {
	sdk.Serve(newEcho())
}

// echo keeps objects in memory; every attribute is writable.
type echo struct {
	sdk.Base
	mu      sync.Mutex
	objects map[providers.Address]*providers.Object
}

func newEcho() *echo { return &echo{objects: map[providers.Address]*providers.Object{}} }

func (e *echo) Schema(context.Context) (providers.Schema, []providers.Diagnostic) {
	return providers.Schema{Name: "echo", Version: "0.1.0", Kinds: []providers.KindSchema{
		{Kind: "Deployment", Attributes: []providers.AttributeSchema{{Path: "spec.replicas", Type: "int"}}},
	}}, nil
}

func (e *echo) Read(_ context.Context, req providers.ReadRequest) providers.ReadResponse {
	e.mu.Lock()
	defer e.mu.Unlock()
	var resp providers.ReadResponse
	for _, a := range req.Addresses {
		if o, ok := e.objects[a]; ok {
			resp.Objects = append(resp.Objects, *o)
		} else {
			resp.Objects = append(resp.Objects, providers.Object{Address: a})
		}
	}
	return resp
}

func (e *echo) Apply(_ context.Context, req providers.ApplyRequest) providers.ApplyResponse {
	e.mu.Lock()
	defer e.mu.Unlock()
	var resp providers.ApplyResponse
	for _, c := range req.Changes {
		o, ok := e.objects[c.Address]
		if !ok {
			o = &providers.Object{Address: c.Address, Exists: true, Attributes: map[string]string{}, Managers: map[string]string{}, Annotations: map[string]string{}}
			e.objects[c.Address] = o
		}
		if o.Attributes[c.Attribute] != c.Value {
			o.Attributes[c.Attribute] = c.Value
			o.Generation++
		}
		o.Managers[c.Attribute] = c.Manager
		resp.Results = append(resp.Results, providers.ChangeResult{Change: c})
	}
	return resp
}
