package sim

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/internal/version"
	"github.com/setpoint-dev/setpoint/providers"
)

// Plugin is the sim world as an out-of-process provider: configured with
// the Environment's sim config, it replays its state file (so a restarted
// provider resumes where it was) and hands its metrics over through
// Signals. Calls are serialised: the world is one timeline.
type Plugin struct {
	mu  sync.Mutex
	p   *Provider
	buf *Buffer
}

var _ providers.Full = (*Plugin)(nil)

// NewPlugin returns an unconfigured sim provider.
func NewPlugin() *Plugin { return &Plugin{} }

// Schema lists the kinds and attributes the sim world serves.
func (s *Plugin) Schema(context.Context) (providers.Schema, []providers.Diagnostic) {
	mem := func() []providers.AttributeSchema {
		return []providers.AttributeSchema{
			{Path: ContainerAttr("NAME", "requests"), Type: "quantity", Description: "a container's memory request"},
			{Path: ContainerAttr("NAME", "limits"), Type: "quantity", Description: "a container's memory limit"},
			{Path: AttrReadyReplicas, Type: "int", ReadOnly: true, Description: "pods serving"},
		}
	}
	return providers.Schema{Name: "sim", Version: version.Version, Signals: true, Kinds: []providers.KindSchema{
		{Kind: "Deployment", Attributes: append([]providers.AttributeSchema{{Path: AttrReplicas, Type: "int", Description: "replicas (written by the HPA when there is one)"}}, mem()...)},
		{Kind: "HorizontalPodAutoscaler", Attributes: []providers.AttributeSchema{
			{Path: AttrMinReplicas, Type: "int"}, {Path: AttrMaxReplicas, Type: "int"},
			{Path: AttrCurrentReplicas, Type: "int", ReadOnly: true}, {Path: AttrDesiredReplicas, Type: "int", ReadOnly: true}}},
		{Kind: "KnativeService", Attributes: append([]providers.AttributeSchema{{Path: AttrMinScale, Type: "int"}, {Path: AttrMaxScale, Type: "int"}}, mem()...)},
	}}, nil
}

// Configure builds the world from the sim config.
func (s *Plugin) Configure(_ context.Context, req providers.ConfigureRequest) []providers.Diagnostic {
	s.mu.Lock()
	defer s.mu.Unlock()
	var cfg spec.SimConfig
	if err := json.Unmarshal(req.Config, &cfg); err != nil {
		return []providers.Diagnostic{{Severity: providers.Error, Summary: "sim config", Detail: err.Error()}}
	}
	var changes []Change
	if req.StatePath != "" {
		var err error
		if changes, err = LoadChanges(req.StatePath); err != nil {
			return []providers.Diagnostic{{Severity: providers.Error, Summary: "sim state", Detail: err.Error()}}
		}
	}
	buf := NewBuffer()
	w, err := New(cfg, Options{BaseDir: req.BaseDir, Sink: buf, Changes: changes})
	if err != nil {
		return []providers.Diagnostic{{Severity: providers.Error, Summary: "sim world", Detail: err.Error()}}
	}
	s.p, s.buf = &Provider{World: w, StatePath: req.StatePath}, buf
	return nil
}

func (s *Plugin) notConfigured() []providers.Diagnostic {
	return []providers.Diagnostic{{Severity: providers.Error, Summary: "the sim provider was not configured"}}
}

// Read reads objects as of req.Now.
func (s *Plugin) Read(ctx context.Context, req providers.ReadRequest) providers.ReadResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p == nil {
		return providers.ReadResponse{Diagnostics: s.notConfigured()}
	}
	return s.p.Read(ctx, req)
}

// Apply applies changes as of req.Now.
func (s *Plugin) Apply(ctx context.Context, req providers.ApplyRequest) providers.ApplyResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p == nil {
		out := providers.ApplyResponse{Diagnostics: s.notConfigured()}
		for _, c := range req.Changes {
			out.Results = append(out.Results, providers.ChangeResult{Change: c, Err: "not configured"})
		}
		return out
	}
	return s.p.Apply(ctx, req)
}

// Signals advances the world to req.Now and hands over its samples.
func (s *Plugin) Signals(_ context.Context, req providers.SignalsRequest) providers.SignalsResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p == nil {
		return providers.SignalsResponse{Diagnostics: s.notConfigured()}
	}
	s.p.advance(req.Now)
	return s.buf.Take(req)
}

// Events has none yet: the engine ticks.
func (s *Plugin) Events(ctx context.Context, _ time.Time, _ func(providers.Event) error) error {
	<-ctx.Done()
	return nil
}
