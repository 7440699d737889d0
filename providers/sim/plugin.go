package sim

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/diag"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/internal/version"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/noderes"
	"github.com/setpoint-dev/setpoint/providers/route"
	"github.com/setpoint-dev/setpoint/providers/samplebuf"
)

// Plugin is the sim world as an out-of-process provider: configured with
// the Environment's sim config, it replays its state file (so a restarted
// provider resumes where it was) and hands its metrics over through
// Signals. Calls are serialised: the world is one timeline.
type Plugin struct {
	mu  sync.Mutex
	p   *Provider
	buf *samplebuf.Buffer
	// sink, when set, takes the world's samples as they are made (the
	// embedded store of the process the provider runs in); Signals then
	// only advances the world.
	sink Sink
	// NoReport: the world keeps no report (Options.NoReport). Set before
	// Configure.
	NoReport bool
}

var _ providers.Full = (*Plugin)(nil)

// NewPlugin returns an unconfigured sim provider.
func NewPlugin() *Plugin { return &Plugin{} }

// NewPluginWithSink returns an unconfigured sim provider whose world writes
// its samples into sink, for a process that runs the world beside its own
// store: nothing is buffered, copied or sent.
func NewPluginWithSink(sink Sink) *Plugin { return &Plugin{sink: sink} }

// Schema lists the kinds and attributes the sim world serves, with their
// types. NAME in a container path stands for any container's name.
func (s *Plugin) Schema(context.Context) (providers.Schema, []providers.Diagnostic) {
	return simSchema(), nil
}

func simSchema() providers.Schema {
	attr := func(p addrs.Path, t values.Type, ro bool, desc string) providers.AttributeSchema {
		return providers.AttributeSchema{Path: p, Type: t, ReadOnly: ro, Description: desc}
	}
	pods := func() []providers.AttributeSchema {
		return []providers.AttributeSchema{
			attr(ContainerAttr("NAME", "requests"), values.Bytes, false, "a container's memory request (at most its limit)"),
			attr(ContainerAttr("NAME", "limits"), values.Bytes, false, "a container's memory limit"),
			attr(AttrReadyReplicas, values.Count, true, "pods serving"),
		}
	}
	return providers.Schema{Name: "sim", Version: version.Version, Signals: true, Kinds: []providers.KindSchema{
		{Kind: KindDeployment, Attributes: append([]providers.AttributeSchema{
			attr(AttrReplicas, values.Count, false, "replicas (written by the HPA when there is one)"),
			attr(AttrReplicaFailure, values.String, true, "True while its pods cannot be created (never, in the sim world)"),
			attr(AttrReplicaFailureMessage, values.String, true, "why its pods cannot be created")}, pods()...)},
		{Kind: KindHPA, Attributes: []providers.AttributeSchema{
			attr(AttrMinReplicas, values.Count, false, "at least 1"),
			attr(AttrMaxReplicas, values.Count, false, "at least minReplicas"),
			attr(AttrTargetCPU, values.Count, false, "CPU utilisation target in percent of requests"),
			attr(AttrScaleDownWindow, values.Count, false, "scale-down stabilization window in seconds (300 when unset)"),
			attr(AttrCurrentReplicas, values.Count, true, "replicas at the last sync"),
			attr(AttrDesiredReplicas, values.Count, true, "replicas the last sync asked for"),
			attr(AttrScaleTargetKind, values.String, true, "the kind of the workload it scales (its workload's Deployment)"),
			attr(AttrScaleTargetName, values.String, true, "the name of the workload it scales")}},
		{Kind: KindKnative, Attributes: append([]providers.AttributeSchema{
			attr(AttrMinScale, values.Count, false, "pods kept however idle"),
			attr(AttrMaxScale, values.Count, false, "at most this many pods (0: no bound)")}, pods()...)},
		route.KindSchema(),
		nodePolicySchema(),
	}}
}

// Configure builds the world from the sim config.
func (s *Plugin) Configure(_ context.Context, req providers.ConfigureRequest) []providers.Diagnostic {
	var cfg spec.SimConfig
	if err := json.Unmarshal(req.Config, &cfg); err != nil {
		return []providers.Diagnostic{diag.New("sim config", err.Error())}
	}
	AbsPaths(&cfg, req.BaseDir)
	tr, err := TraceOf(cfg, req.BaseDir)
	if err != nil {
		return []providers.Diagnostic{diag.New("sim world", err.Error())}
	}
	return s.Use(cfg, tr, req.StatePath)
}

// Use builds the world from a config whose paths are absolute and its trace,
// as Configure does from their JSON: for a process running the world
// inside, which has both read already (a list of 10,000 workloads is not
// encoded and decoded again, nor the trace read twice).
func (s *Plugin) Use(cfg spec.SimConfig, tr *Trace, statePath string) []providers.Diagnostic {
	s.mu.Lock()
	defer s.mu.Unlock()
	var buf *samplebuf.Buffer
	sink := s.sink
	if sink == nil {
		buf = samplebuf.NewBuffer()
		sink = buf
	}
	p, err := NewProvider(cfg, tr, statePath, Options{Sink: sink, NoReport: s.NoReport})
	if err != nil {
		return []providers.Diagnostic{diag.New("sim world", err.Error())}
	}
	s.p, s.buf = p, buf
	return nil
}

func (s *Plugin) notConfigured() []providers.Diagnostic {
	return []providers.Diagnostic{diag.New("the sim provider was not configured", "")}
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

// List lists objects as of req.Now.
func (s *Plugin) List(ctx context.Context, req providers.ListRequest) providers.ListResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p == nil {
		return providers.ListResponse{Diagnostics: s.notConfigured()}
	}
	return s.p.List(ctx, req)
}

// PlanChange dry-runs changes as of req.Now.
func (s *Plugin) PlanChange(ctx context.Context, req providers.PlanChangeRequest) providers.PlanChangeResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p == nil {
		return providers.PlanChangeResponse{Diagnostics: s.notConfigured(), Results: notConfigured(req.Changes)}
	}
	return s.p.PlanChange(ctx, req)
}

// Apply applies changes as of req.Now.
func (s *Plugin) Apply(ctx context.Context, req providers.ApplyRequest) providers.ApplyResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p == nil {
		return providers.ApplyResponse{Diagnostics: s.notConfigured(), Results: notConfigured(req.Changes)}
	}
	return s.p.Apply(ctx, req)
}

func notConfigured(cs []providers.ObjectChange) []providers.ObjectResult {
	out := make([]providers.ObjectResult, len(cs))
	for i, c := range cs {
		out[i] = providers.ObjectResult{Address: c.Address, Err: "not configured"}
	}
	return out
}

// Signals advances the world to req.Now and hands over its samples.
func (s *Plugin) Signals(_ context.Context, req providers.SignalsRequest) providers.SignalsResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p == nil {
		return providers.SignalsResponse{Diagnostics: s.notConfigured()}
	}
	if err := s.p.refresh(false); err != nil {
		return providers.SignalsResponse{Cursor: req.Cursor, Instance: req.Instance, Diagnostics: stateDiags(err)}
	}
	s.p.advance(req.Now)
	if s.buf == nil {
		return providers.SignalsResponse{Cursor: req.Cursor, Instance: req.Instance} // in the sink already
	}
	return s.buf.Take(req)
}

// Events has none yet: the engine ticks.
func (s *Plugin) Events(ctx context.Context, _ time.Time, _ func(providers.Event) error) error {
	<-ctx.Done()
	return nil
}

// nodePolicySchema is NodePolicy as the sim world serves it: a policy runs
// on several nodes, each reported under status.nodes.
func nodePolicySchema() providers.KindSchema {
	k := noderes.KindSchemas()[0]
	k.Attributes = slices.DeleteFunc(slices.Clone(k.Attributes), func(a providers.AttributeSchema) bool {
		return a.Path != noderes.AttrConfig && a.Path != noderes.AttrNodes && a.Path != noderes.AttrContainers
	})
	return k
}
