package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/diag"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/internal/atomicfile"
	"github.com/setpoint-dev/setpoint/providers"
)

// StateVersion is the sim state file's format.
const StateVersion = 2

// Change is an object change that took effect, as the sim state file
// keeps it: At is the second of the trace at which it did. Replaying it
// runs the same checks as Apply at the same second, so a replayed world is
// the live one.
type Change struct {
	At         int                         `json:"at"`
	Address    providers.Address           `json:"address"`
	Action     action.Action               `json:"action"`
	Attributes map[addrs.Path]values.Value `json:"attributes,omitempty"`
	Changed    []addrs.Path                `json:"changed,omitempty"`
	Manager    string                      `json:"manager"`
	Force      bool                        `json:"force,omitempty"`
}

func changeOf(at int, c providers.ObjectChange) Change {
	return Change{At: at, Address: c.Address, Action: c.Action, Attributes: maps.Clone(c.Attributes),
		Changed: slices.Clone(c.Changed), Manager: c.Manager, Force: c.Force}
}

func (c Change) objectChange() providers.ObjectChange {
	return providers.ObjectChange{Address: c.Address, Action: c.Action, Attributes: c.Attributes,
		Changed: c.Changed, Manager: c.Manager, Force: c.Force}
}

type stateFile struct {
	Version int      `json:"version"`
	Changes []Change `json:"changes"`
}

// LoadChanges reads the sim state file; a missing file is an empty world.
func LoadChanges(path string) ([]Change, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading sim state: %w", err)
	}
	var v struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("sim state %s is corrupt: %w", path, err)
	}
	if v.Version != StateVersion {
		return nil, fmt.Errorf("sim state %s is version %d and this release reads only %d: the file is a cache of the changes applied to the sim world, delete it and the world starts again from its config", path, v.Version, StateVersion)
	}
	var st stateFile
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("sim state %s is corrupt: %w", path, err)
	}
	return st.Changes, nil
}

// saveChanges writes the state file atomically: a crash leaves the old file
// or the new one, never half of one.
func saveChanges(path string, changes []Change) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(stateFile{Version: StateVersion, Changes: changes}, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(path, b, 0o644)
}

// Provider serves the world through the provider interface. Every request
// first advances the world to the request's now.
type Provider struct {
	World *World
	// StatePath persists applied changes ("" keeps them in memory only).
	StatePath string
}

var _ providers.Provider = (*Provider)(nil)

func (p *Provider) advance(now time.Time) {
	if !now.IsZero() && now.After(p.World.Now()) {
		p.World.AdvanceTo(now)
	}
}

// Read returns each addressed object as it is now.
func (p *Provider) Read(_ context.Context, req providers.ReadRequest) providers.ReadResponse {
	p.advance(req.Now)
	resp := providers.ReadResponse{Objects: make([]providers.Object, 0, len(req.Addresses))}
	for _, a := range req.Addresses {
		if o := p.World.byKey[a.Key()]; o != nil {
			resp.Objects = append(resp.Objects, o.toObject(a, p.World.sec))
		} else {
			resp.Objects = append(resp.Objects, providers.Object{Address: a})
		}
	}
	return resp
}

// List returns every object of a kind (in a namespace, when one is given)
// whose labels match the selector, in address order.
func (p *Provider) List(_ context.Context, req providers.ListRequest) providers.ListResponse {
	p.advance(req.Now)
	var resp providers.ListResponse
	if req.Kind == "" {
		resp.Diagnostics = append(resp.Diagnostics, diag.New("List needs a kind", "the sim world serves Deployment, HorizontalPodAutoscaler and KnativeService"))
		return resp
	}
	prov := req.Provider
	if prov == "" {
		prov = "sim"
	}
	for _, o := range p.World.byKey {
		if o.kind != req.Kind || (req.Namespace != "" && o.namespace != req.Namespace) || !matches(o.labels, req.Selector) {
			continue
		}
		a := providers.Address{Provider: prov, Kind: o.kind, Namespace: o.namespace, Name: o.name}
		resp.Objects = append(resp.Objects, o.toObject(a, p.World.sec))
	}
	slices.SortFunc(resp.Objects, func(a, b providers.Object) int {
		return strings.Compare(a.Address.String(), b.Address.String())
	})
	return resp
}

func matches(labels, selector map[string]string) bool {
	for k, v := range selector {
		if l, ok := labels[k]; !ok || l != v {
			return false
		}
	}
	return true
}

// PlanChange says what Apply would do with each change, changing nothing.
// Each change is judged against the world as it is, not after the
// changes before it.
func (p *Provider) PlanChange(_ context.Context, req providers.PlanChangeRequest) providers.PlanChangeResponse {
	p.advance(req.Now)
	resp := providers.PlanChangeResponse{Results: make([]providers.ObjectResult, 0, len(req.Changes))}
	for _, c := range req.Changes {
		_, res := p.World.check(c)
		resp.Results = append(resp.Results, res)
	}
	return resp
}

// Apply applies object changes in order; each succeeds or fails whole, and
// the state file records the ones that took effect.
func (p *Provider) Apply(_ context.Context, req providers.ApplyRequest) providers.ApplyResponse {
	p.advance(req.Now)
	resp := providers.ApplyResponse{Results: make([]providers.ObjectResult, 0, len(req.Changes))}
	var recorded []Change
	for _, c := range req.Changes {
		pend, res := p.World.check(c)
		if pend != nil && p.World.commit(pend) {
			recorded = append(recorded, changeOf(p.World.sec, c))
		}
		resp.Results = append(resp.Results, res)
	}
	if len(recorded) > 0 {
		p.World.record(recorded)
		if p.StatePath != "" {
			if err := saveChanges(p.StatePath, p.World.changes); err != nil {
				resp.Diagnostics = append(resp.Diagnostics, diag.New("saving sim state", err.Error()))
			}
		}
	}
	return resp
}

// record appends changes that took effect now, so replays apply them at
// the same second.
func (w *World) record(cs []Change) {
	w.changes = append(w.changes, cs...)
	w.applied = len(w.changes)
}
