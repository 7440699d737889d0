// Command testprovider misbehaves on purpose, for the plugin tests. Its
// behaviour comes from its binary's name, setpoint-provider-MODE:
//
//	good       an in-memory provider that works
//	slow       Apply and Read take 30 s (to kill it mid-call, or time it out)
//	version    speaks protocol version 99
//	malformed  answers with nil objects, unknown addresses, wrong counts,
//	           and an oversized message for the address named "big"
//	panic      panics in Read
package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/plugin"
	"github.com/setpoint-dev/setpoint/providers/sdk"
)

func main() {
	mode := strings.TrimPrefix(filepath.Base(os.Args[0]), "setpoint-provider-")
	p := &tp{mode: mode, objects: map[providers.Address]map[string]string{}}
	if mode == "version" {
		plugin.Serve(p, 99)
		return
	}
	sdk.Serve(p)
}

type tp struct {
	sdk.Base
	mode    string
	mu      sync.Mutex
	objects map[providers.Address]map[string]string
}

func (p *tp) Schema(context.Context) (providers.Schema, []providers.Diagnostic) {
	return providers.Schema{Name: p.mode, Version: "test", Events: p.mode == "good"}, nil
}

// Events: the good provider reports a change every 50 ms.
func (p *tp) Events(ctx context.Context, _ time.Time, send func(providers.Event) error) error {
	if p.mode != "good" {
		<-ctx.Done()
		return nil
	}
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(50 * time.Millisecond):
		}
		a := providers.Address{Provider: "good", Kind: "Deployment", Namespace: "shop", Name: "a"}
		if err := send(providers.Event{Now: time.Now(), Address: a, Reason: "replicas changed"}); err != nil {
			return err
		}
	}
}

func (p *tp) Read(ctx context.Context, req providers.ReadRequest) providers.ReadResponse {
	switch p.mode {
	case "slow":
		hang(ctx)
	case "panic":
		panic("the test provider panics in Read on purpose")
	case "malformed":
		resp := providers.ReadResponse{Objects: []providers.Object{
			{}, // no address at all
			{Address: providers.Address{Provider: "malformed", Kind: "Deployment", Namespace: "x", Name: "stranger"}, Exists: true},
		}}
		for _, a := range req.Addresses {
			if a.Name == "big" {
				resp.Objects = append(resp.Objects, providers.Object{Address: a, Exists: true, Attributes: map[string]string{"blob": strings.Repeat("x", 70<<20)}})
			}
		}
		return resp
	}
	if len(req.Addresses) == 1 && req.Addresses[0].Name == "log" {
		slog.Warn("asked to log", "address", req.Addresses[0].String())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var resp providers.ReadResponse
	for _, a := range req.Addresses {
		attrs, ok := p.objects[a]
		resp.Objects = append(resp.Objects, providers.Object{Address: a, Exists: ok, Attributes: attrs})
	}
	return resp
}

func (p *tp) Apply(ctx context.Context, req providers.ApplyRequest) providers.ApplyResponse {
	switch p.mode {
	case "slow":
		hang(ctx)
	case "malformed":
		return providers.ApplyResponse{Results: []providers.ChangeResult{{}}} // one result, whatever was asked
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var resp providers.ApplyResponse
	for _, c := range req.Changes {
		if p.objects[c.Address] == nil {
			p.objects[c.Address] = map[string]string{}
		}
		p.objects[c.Address][c.Attribute] = c.Value
		resp.Results = append(resp.Results, providers.ChangeResult{Change: c})
	}
	return resp
}

// hang stands in for a provider stuck in a call.
func hang(ctx context.Context) {
	select {
	case <-time.After(30 * time.Second):
	case <-ctx.Done():
	}
}
