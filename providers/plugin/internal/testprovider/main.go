// Command testprovider misbehaves on purpose, for the plugin tests. Its
// behaviour comes from its binary's name, setpoint-provider-MODE:
//
//	good       an in-memory provider that works: Read, List (labels are the
//	           string attributes at metadata.labels["KEY"]), PlanChange and
//	           Apply with field managers and conflicts, Events
//	basic      like good, but implements only Read, Apply and Schema: List
//	           and PlanChange are the SDK's defaults
//	slow       Read, List, PlanChange and Apply hang for 30 s (to kill it
//	           mid-call, or time it out); when configured with
//	           {"marker": PATH}, each writes its name and a newline to PATH
//	           (a FIFO the test reads) as it begins, before hanging
//	version    speaks protocol version 1
//	malformed  answers with nil objects, unknown addresses, wrong counts,
//	           invalid typed values and empty paths, and an oversized
//	           message for the address named "big"
//	panic      panics in Read
//	wire       a raw gRPC server (no SDK) that sends malformed paths,
//	           values and addresses on the wire
package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/plugin"
	"github.com/setpoint-dev/setpoint/providers/sdk"
)

func main() {
	mode := strings.TrimPrefix(filepath.Base(os.Args[0]), "setpoint-provider-")
	switch mode {
	case "version":
		plugin.Serve(&tp{mode: mode, objects: map[providers.Address]*object{}}, 1)
	case "wire":
		serveWire()
	case "basic":
		sdk.Serve(&basic{tp{mode: mode, objects: map[providers.Address]*object{}}})
	default:
		sdk.Serve(&tp{mode: mode, objects: map[providers.Address]*object{}})
	}
}

type object struct {
	attrs    map[addrs.Path]values.Value
	managers map[addrs.Path]string
	gen      int64
}

type tp struct {
	sdk.Base
	mode    string
	mu      sync.Mutex
	objects map[providers.Address]*object
	marker  string
}

// basic hides tp's List and PlanChange behind the SDK's defaults.
type basic struct{ tp }

func (b *basic) List(ctx context.Context, req providers.ListRequest) providers.ListResponse {
	return b.Base.List(ctx, req)
}

func (b *basic) PlanChange(ctx context.Context, req providers.PlanChangeRequest) providers.PlanChangeResponse {
	return b.Base.PlanChange(ctx, req)
}

func (p *tp) Schema(context.Context) (providers.Schema, []providers.Diagnostic) {
	return providers.Schema{Name: p.mode, Version: "test", Events: p.mode == "good", Kinds: []providers.KindSchema{{Kind: "Deployment",
		Attributes: []providers.AttributeSchema{{Path: addrs.MustPath("spec.replicas"), Type: values.Count}}}}}, nil
}

func (p *tp) Configure(_ context.Context, req providers.ConfigureRequest) []providers.Diagnostic {
	var cfg struct {
		Marker string `json:"marker"`
	}
	if len(req.Config) > 0 {
		if err := json.Unmarshal(req.Config, &cfg); err != nil {
			return []providers.Diagnostic{{Severity: providers.Error, Message: "bad config", Detail: err.Error()}}
		}
	}
	p.mu.Lock()
	p.marker = cfg.Marker
	p.mu.Unlock()
	return nil
}

// Events: the good provider reports a change every 50 ms.
func (p *tp) Events(ctx context.Context, _ time.Time, send func(providers.Event) error) error {
	if p.mode != "good" {
		<-ctx.Done()
		return nil
	}
	for {
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

// reached tells the test (through the configured FIFO) that a call got
// here, then hangs like a provider stuck in the call.
func (p *tp) reached(call string) {
	p.mu.Lock()
	marker := p.marker
	p.mu.Unlock()
	if marker != "" {
		if f, err := os.OpenFile(marker, os.O_WRONLY, 0); err == nil {
			f.WriteString(call + "\n")
			f.Close()
		}
	}
	// Deaf to ctx, as a stuck provider is: answering when the deadline
	// passes would race the client's own timeout.
	time.Sleep(30 * time.Second)
}

var replicas = addrs.MustPath("spec.replicas")

func (p *tp) Read(ctx context.Context, req providers.ReadRequest) providers.ReadResponse {
	switch p.mode {
	case "slow":
		p.reached("Read")
	case "panic":
		panic("the test provider panics in Read on purpose")
	case "malformed":
		resp := providers.ReadResponse{Objects: []providers.Object{
			{}, // no address at all
			{Address: providers.Address{Provider: "malformed", Kind: "Deployment", Namespace: "x", Name: "stranger"}, Exists: true},
		}}
		for _, a := range req.Addresses {
			switch a.Name {
			case "big":
				blob, _ := json.Marshal(map[string]string{"x": strings.Repeat("x", 70<<20)})
				resp.Objects = append(resp.Objects, providers.Object{Address: a, Exists: true,
					Attributes: map[addrs.Path]values.Value{addrs.MustPath("blob"): values.StringOf(string(blob))}})
			case "typed":
				// An author's slips: a value never set, a path never parsed.
				resp.Objects = append(resp.Objects, providers.Object{Address: a, Exists: true, Attributes: map[addrs.Path]values.Value{
					replicas:                      values.CountOf(2),
					addrs.MustPath("spec.paused"): {},
					{}:                            values.StringOf("no path"),
				}})
			}
		}
		return resp
	}
	if len(req.Addresses) == 1 && req.Addresses[0].Name == "log" {
		slog.Warn("asked to log", "address", req.Addresses[0].String())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	resp := providers.ReadResponse{Objects: make([]providers.Object, 0, len(req.Addresses))}
	for _, a := range req.Addresses {
		resp.Objects = append(resp.Objects, p.object(a))
	}
	return resp
}

// object is the providers.Object at a (p.mu held).
func (p *tp) object(a providers.Address) providers.Object {
	o, ok := p.objects[a]
	if !ok {
		return providers.Object{Address: a}
	}
	labels := map[string]string{}
	for path, v := range o.attrs {
		st := path.Steps()
		if len(st) == 3 && st[0] == addrs.F("metadata") && st[1] == addrs.F("labels") && st[2].Kind == addrs.MapKey && v.Type() == values.String {
			labels[st[2].Name] = v.Str()
		}
	}
	return providers.Object{Address: a, Exists: true, Attributes: maps.Clone(o.attrs), Managers: maps.Clone(o.managers), Labels: labels, Generation: o.gen}
}

func (p *tp) List(ctx context.Context, req providers.ListRequest) providers.ListResponse {
	switch p.mode {
	case "slow":
		p.reached("List")
	case "malformed":
		at := func(kind, ns, name string) providers.Address {
			return providers.Address{Provider: req.Provider, Kind: kind, Namespace: ns, Name: name}
		}
		return providers.ListResponse{Objects: []providers.Object{
			{Address: at(req.Kind, "shop", "ok"), Exists: true, Labels: map[string]string{"app": "x"}},
			{Address: at("Other", "shop", "wrong-kind"), Exists: true, Labels: map[string]string{"app": "x"}},
			{Address: at(req.Kind, "elsewhere", "wrong-ns"), Exists: true, Labels: map[string]string{"app": "x"}},
			{Address: at(req.Kind, "shop", "unlabelled"), Exists: true},
			{Address: at(req.Kind, "shop", "ok"), Exists: true, Labels: map[string]string{"app": "x"}},
			{Address: at(req.Kind, "shop", "bad-value"), Exists: true, Labels: map[string]string{"app": "x"}, Attributes: map[addrs.Path]values.Value{replicas: {}}},
		}}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var resp providers.ListResponse
	for a := range p.objects {
		if a.Kind != req.Kind || (req.Namespace != "" && a.Namespace != req.Namespace) {
			continue
		}
		o := p.object(a)
		o.Address.Provider = req.Provider
		match := true
		for k, v := range req.Selector {
			if o.Labels[k] != v {
				match = false
			}
		}
		if match {
			resp.Objects = append(resp.Objects, o)
		}
	}
	sort.Slice(resp.Objects, func(i, j int) bool { return resp.Objects[i].Address.String() < resp.Objects[j].Address.String() })
	return resp
}

// change plans one object's change and, when commit, makes it (p.mu
// held). Create and Update both upsert; a changed path another manager
// owns is a conflict unless forced.
func (p *tp) change(c providers.ObjectChange, commit bool) providers.ObjectResult {
	r := providers.ObjectResult{Address: c.Address}
	o := p.objects[c.Address]
	if c.Action == action.Delete {
		if o == nil {
			r.Err = "no such object"
		} else if commit {
			delete(p.objects, c.Address)
		}
		return r
	}
	if o == nil {
		o = &object{attrs: map[addrs.Path]values.Value{}, managers: map[addrs.Path]string{}}
	}
	for _, path := range c.Changed {
		if m := o.managers[path]; m != "" && m != c.Manager && !c.Force {
			r.Conflicts = append(r.Conflicts, providers.Conflict{Path: path, Manager: m})
		}
	}
	if len(r.Conflicts) > 0 {
		r.Err = "conflict: fields owned by other managers"
		return r
	}
	if !commit {
		o = &object{attrs: maps.Clone(o.attrs), managers: maps.Clone(o.managers), gen: o.gen}
	}
	moved := false
	for path, v := range c.Attributes {
		if o.attrs[path] != v {
			moved = true
		}
		o.attrs[path] = v
		o.managers[path] = c.Manager
	}
	if moved {
		o.gen++
	}
	if commit {
		p.objects[c.Address] = o
	}
	r.After = map[addrs.Path]values.Value{}
	for path, m := range o.managers {
		if m == c.Manager {
			r.After[path] = o.attrs[path]
		}
	}
	return r
}

func (p *tp) PlanChange(ctx context.Context, req providers.PlanChangeRequest) providers.PlanChangeResponse {
	switch p.mode {
	case "slow":
		p.reached("PlanChange")
	case "malformed":
		// A result per change, each with an invalid value in After.
		out := providers.PlanChangeResponse{}
		for _, c := range req.Changes {
			out.Results = append(out.Results, providers.ObjectResult{Address: c.Address, After: map[addrs.Path]values.Value{replicas: {}}})
		}
		return out
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := providers.PlanChangeResponse{Results: make([]providers.ObjectResult, len(req.Changes))}
	for i, c := range req.Changes {
		out.Results[i] = p.change(c, false)
	}
	return out
}

func (p *tp) Apply(ctx context.Context, req providers.ApplyRequest) providers.ApplyResponse {
	switch p.mode {
	case "slow":
		p.reached("Apply")
	case "malformed":
		return providers.ApplyResponse{Results: []providers.ObjectResult{{}}} // one result, whatever was asked
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := providers.ApplyResponse{Results: make([]providers.ObjectResult, len(req.Changes))}
	for i, c := range req.Changes {
		out.Results[i] = p.change(c, true)
	}
	return out
}
