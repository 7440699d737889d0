// Command setpoint-provider-echo is an example third-party provider: a tiny
// in-memory store of objects whose attributes it reads and applies as it is
// told. Build it as setpoint-provider-echo, put it on the Environment's
// pluginPath, and list it under providers as "echo".
//
// It shows the whole protocol an author meets: typed values by attribute
// path, changes grouped per object with field managers (a field another
// manager owns is a conflict unless the change is forced), a PlanChange
// that answers what Apply would do without doing it, and List by kind,
// namespace and labels (an object's labels are its string attributes at
// metadata.labels["KEY"]).
package main

import (
	"context"
	"maps"
	"sort"
	"sync"

	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/values"
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
	return providers.Schema{Name: "echo", Version: "0.2.0", Kinds: []providers.KindSchema{
		{Kind: "Deployment", Attributes: []providers.AttributeSchema{
			{Path: addrs.MustPath("spec.replicas"), Type: values.Count, Description: "desired replicas"},
			{Path: addrs.MustPath("spec.template.spec.containers[name=app].resources.requests.memory"), Type: values.Bytes},
		}},
	}}, nil
}

func (e *echo) Read(_ context.Context, req providers.ReadRequest) providers.ReadResponse {
	e.mu.Lock()
	defer e.mu.Unlock()
	resp := providers.ReadResponse{Objects: make([]providers.Object, 0, len(req.Addresses))}
	for _, a := range req.Addresses {
		if o, ok := e.objects[a]; ok {
			resp.Objects = append(resp.Objects, clone(o))
		} else {
			resp.Objects = append(resp.Objects, providers.Object{Address: a})
		}
	}
	return resp
}

// List answers the objects of a kind (in a namespace, when given) whose
// labels match the selector, in address order.
func (e *echo) List(_ context.Context, req providers.ListRequest) providers.ListResponse {
	e.mu.Lock()
	defer e.mu.Unlock()
	var resp providers.ListResponse
	for a, o := range e.objects {
		if a.Kind != req.Kind || (req.Namespace != "" && a.Namespace != req.Namespace) || !matches(o.Labels, req.Selector) {
			continue
		}
		x := clone(o)
		x.Address.Provider = req.Provider
		resp.Objects = append(resp.Objects, x)
	}
	sort.Slice(resp.Objects, func(i, j int) bool { return resp.Objects[i].Address.String() < resp.Objects[j].Address.String() })
	return resp
}

func matches(labels, selector map[string]string) bool {
	for k, v := range selector {
		if w, ok := labels[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func (e *echo) PlanChange(_ context.Context, req providers.PlanChangeRequest) providers.PlanChangeResponse {
	e.mu.Lock()
	defer e.mu.Unlock()
	resp := providers.PlanChangeResponse{Results: make([]providers.ObjectResult, len(req.Changes))}
	for i, c := range req.Changes {
		resp.Results[i], _ = e.plan(c)
	}
	return resp
}

func (e *echo) Apply(_ context.Context, req providers.ApplyRequest) providers.ApplyResponse {
	e.mu.Lock()
	defer e.mu.Unlock()
	resp := providers.ApplyResponse{Results: make([]providers.ObjectResult, len(req.Changes))}
	for i, c := range req.Changes {
		r, after := e.plan(c)
		if r.Err == "" {
			if after == nil {
				delete(e.objects, c.Address)
			} else {
				e.objects[c.Address] = after
			}
		}
		resp.Results[i] = r
	}
	return resp
}

// plan works out one object's change without making it: the result, and
// the object after (nil when deleted). Each change succeeds or fails whole.
func (e *echo) plan(c providers.ObjectChange) (providers.ObjectResult, *providers.Object) {
	r := providers.ObjectResult{Address: c.Address}
	cur, exists := e.objects[c.Address]
	switch c.Action {
	case action.Delete:
		if !exists {
			r.Err = "no such object"
		}
		return r, nil
	case action.Create:
		if exists {
			r.Err = "already exists"
			return r, cur
		}
	case action.Update, action.NoOp:
		if !exists {
			r.Err = "no such object"
			return r, nil
		}
	}
	o := &providers.Object{Address: c.Address, Exists: true, Attributes: map[addrs.Path]values.Value{}, Managers: map[addrs.Path]string{}}
	if exists {
		x := clone(cur)
		o = &x
	}
	for _, p := range c.Changed {
		if m := o.Managers[p]; m != "" && m != c.Manager && !c.Force {
			r.Conflicts = append(r.Conflicts, providers.Conflict{Path: p, Manager: m})
		}
	}
	if len(r.Conflicts) > 0 {
		r.Err = "fields owned by other managers (apply with force to take them)"
		return r, cur
	}
	moved := false
	for p, v := range c.Attributes {
		if o.Attributes[p] != v {
			o.Attributes[p] = v
			moved = true
		}
		o.Managers[p] = c.Manager
	}
	// Released fields keep their value; restored ones get the user's value
	// back. Either way the manager gives them up in this same change.
	for _, p := range c.Released {
		if o.Managers[p] == c.Manager {
			delete(o.Managers, p)
		}
	}
	for p, v := range c.Restored {
		if o.Attributes[p] != v {
			o.Attributes[p] = v
			moved = true
		}
		delete(o.Managers, p)
	}
	if moved {
		o.Generation++
	}
	o.Labels = labels(o.Attributes)
	r.After = map[addrs.Path]values.Value{}
	for p, m := range o.Managers {
		if m == c.Manager {
			r.After[p] = o.Attributes[p]
		}
	}
	return r, o
}

// labels are the string attributes at metadata.labels["KEY"].
func labels(attrs map[addrs.Path]values.Value) map[string]string {
	out := map[string]string{}
	for p, v := range attrs {
		st := p.Steps()
		if len(st) == 3 && st[0] == addrs.F("metadata") && st[1] == addrs.F("labels") && st[2].Kind == addrs.MapKey && v.Type() == values.String {
			out[st[2].Name] = v.Str()
		}
	}
	return out
}

func clone(o *providers.Object) providers.Object {
	x := *o
	x.Attributes = maps.Clone(o.Attributes)
	x.Managers = maps.Clone(o.Managers)
	x.Labels = maps.Clone(o.Labels)
	x.Annotations = maps.Clone(o.Annotations)
	return x
}
