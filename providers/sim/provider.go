package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/providers"
)

// Change is an applied change as the sim state file keeps it: At is the
// second of the trace at which it took effect.
type Change struct {
	At        int               `json:"at"`
	Address   string            `json:"address"` // Kind/namespace/name
	Attribute string            `json:"attribute"`
	Value     string            `json:"value"`
	Manager   string            `json:"manager"`
	Create    map[string]string `json:"create,omitempty"`
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
	var st stateFile
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("sim state %s is corrupt: %w", path, err)
	}
	if st.Version != 1 {
		return nil, fmt.Errorf("sim state %s: version %d, this release reads 1", path, st.Version)
	}
	return st.Changes, nil
}

// saveChanges writes the state file atomically: a crash leaves the old file
// or the new one, never half of one.
func saveChanges(path string, changes []Change) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(stateFile{Version: 1, Changes: changes}, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".sim-state-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
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
	var resp providers.ReadResponse
	for _, a := range req.Addresses {
		obj := providers.Object{Address: a}
		o := p.World.byKey[a.Key()]
		if o == nil {
			resp.Objects = append(resp.Objects, obj)
			continue
		}
		obj.Exists = true
		obj.Generation = o.generation
		obj.Attributes = map[string]string{}
		obj.Managers = map[string]string{}
		for k, v := range o.attrs {
			obj.Attributes[k] = v
			obj.Managers[k] = o.manager(k)
		}
		if o.kind == "Deployment" || o.kind == "KnativeService" {
			obj.Attributes[AttrReadyReplicas] = strconv.Itoa(o.wl.ready(p.World.sec))
		}
		obj.Annotations = map[string]string{}
		for k, v := range o.annotations {
			obj.Annotations[k] = v
		}
		resp.Objects = append(resp.Objects, obj)
	}
	return resp
}

// Apply sets attributes; each change succeeds or fails alone, and the state
// file records only the ones that took effect.
func (p *Provider) Apply(_ context.Context, req providers.ApplyRequest) providers.ApplyResponse {
	p.advance(req.Now)
	var resp providers.ApplyResponse
	var recorded []Change
	for _, c := range req.Changes {
		r := providers.ChangeResult{Change: c}
		o := p.World.byKey[c.Address.Key()]
		if o == nil && c.Create != nil {
			var err error
			if o, err = p.World.create(c); err != nil {
				r.Err = err.Error()
				resp.Results = append(resp.Results, r)
				continue
			}
		}
		switch {
		case o == nil:
			r.Err = "no such object"
		default:
			// Even an unchanged value is recorded: the field's manager moves.
			if err := o.set(c.Attribute, c.Value, c.Manager); err != nil {
				r.Err = err.Error()
			} else {
				recorded = append(recorded, Change{At: p.World.sec, Address: c.Address.Key(), Attribute: c.Attribute, Value: c.Value, Manager: c.Manager, Create: c.Create})
			}
		}
		resp.Results = append(resp.Results, r)
	}
	if len(recorded) > 0 {
		p.World.record(recorded)
		if p.StatePath != "" {
			if err := saveChanges(p.StatePath, p.World.changes); err != nil {
				resp.Diagnostics = append(resp.Diagnostics, providers.Diagnostic{Severity: providers.Error, Summary: "saving sim state", Detail: err.Error()})
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

// create makes an object the engine asked for: an HPA for a Deployment that
// has none (with a CPU target of 80% of requests, as kubectl autoscale).
func (w *World) create(c providers.Change) (*object, error) {
	if c.Address.Kind != "HorizontalPodAutoscaler" {
		return nil, fmt.Errorf("the sim world creates only HorizontalPodAutoscalers, not %s", c.Address.Kind)
	}
	for _, wl := range w.wls {
		if wl.cfg.Namespace != c.Address.Namespace || wl.cfg.Name != c.Address.Name || wl.deploy == nil {
			continue
		}
		if wl.hpa != nil {
			return wl.hpa, nil
		}
		minR, err1 := strconv.Atoi(c.Create[AttrMinReplicas])
		maxR, err2 := strconv.Atoi(c.Create[AttrMaxReplicas])
		if err1 != nil || err2 != nil || minR < 1 || maxR < minR {
			return nil, fmt.Errorf("an HPA needs 1 <= minReplicas <= maxReplicas, got %q and %q", c.Create[AttrMinReplicas], c.Create[AttrMaxReplicas])
		}
		if wl.cfg.HPA == nil {
			wl.cfg.HPA = &spec.SimHPA{Min: minR, Max: maxR}
		}
		wl.hpa = wl.newObject("HorizontalPodAutoscaler", func(string) string { return c.Manager })
		wl.hpa.attrs[AttrMinReplicas] = strconv.Itoa(minR)
		wl.hpa.attrs[AttrMaxReplicas] = strconv.Itoa(maxR)
		wl.deploy.managers[AttrReplicas] = "horizontal-pod-autoscaler"
		return wl.hpa, nil
	}
	return nil, fmt.Errorf("no Deployment %s/%s to autoscale", c.Address.Namespace, c.Address.Name)
}
