// Package nri is the NRI provider: the node agent that runs a NodePolicy
// on one node. Its NRI plugin (containerd/nri's stub, over the runtime's
// ttrpc socket) places each container as it is created and moves the
// others a change affects; a serialized pipeline over a persisted cache
// runs every event; the engine plans and gates the policy's config and
// the NFRs' node-applied memory limits, and reads back pools,
// assignments and problems.
package nri

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/decide/nodepolicy"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/internal/confine"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/noderes"
	"github.com/setpoint-dev/setpoint/providers/sdk"
)

// Name is the provider's name in an Environment.
const Name = "nri"

// Config is the provider's block in the Environment.
type Config struct {
	// Socket is the runtime's NRI socket.
	Socket string `json:"socket,omitempty"`
	// PluginIdx orders plugins at the runtime (two digits).
	PluginIdx string `json:"pluginIdx,omitempty"`
	// Topology, sockets×cores×threads ("2x32x2"), stands for the node's
	// own (read from sysfs when empty).
	Topology string `json:"topology,omitempty"`
	// Cache is where the pipeline's cache persists: relative to the
	// Environment's directory and inside it (the agent's --cache flag
	// takes any path).
	Cache string `json:"cache,omitempty"`
	// CgroupRoot is where the cgroup file systems are mounted, to read
	// containers' working sets (default /sys/fs/cgroup).
	CgroupRoot string `json:"cgroupRoot,omitempty"`
	// WorkingSetEvery is how often working sets are read, as "10s"
	// (default); "0s" reads none, and memory limits have no floor but
	// what the runtime reports.
	WorkingSetEvery string `json:"workingSetEvery,omitempty"`
}

// Defaults.
const (
	DefaultSocket    = "/var/run/nri/nri.sock"
	DefaultPluginIdx = "50"
	DefaultCache     = ".setpoint/nri-cache.json"
)

// Provider is the NRI node agent.
type Provider struct {
	sdk.Base
	mu     sync.Mutex
	cfg    Config
	pipe   *Pipeline
	plugin *Plugin
	cancel context.CancelFunc
	done   chan struct{}
	events chan providers.Event
	log    *slog.Logger
	// Connected, when set before Configure, is told of each connection
	// to the runtime.
	Connected func()
}

// New returns an unconfigured provider.
func New() *Provider {
	return &Provider{events: make(chan providers.Event, 64), log: slog.Default().With("provider", Name)}
}

// Schema says what the provider serves.
func (p *Provider) Schema(context.Context) (providers.Schema, []providers.Diagnostic) {
	return providers.Schema{Name: Name, Version: "1", Events: true, Kinds: noderes.KindSchemas()}, nil
}

func errDiag(format string, a ...any) []providers.Diagnostic {
	return []providers.Diagnostic{{Severity: providers.Error, Message: fmt.Sprintf(format, a...)}}
}

// Configure reads the node's topology, loads the cache and connects to
// the runtime (in the background: a runtime that is not up yet is
// retried).
func (p *Provider) Configure(_ context.Context, req providers.ConfigureRequest) []providers.Diagnostic {
	var c Config
	if len(req.Config) > 0 {
		if err := json.Unmarshal(req.Config, &c); err != nil {
			return errDiag("nri provider config: %v", err)
		}
	}
	if c.Socket == "" {
		c.Socket = DefaultSocket
	}
	cache := ""
	if req.BaseDir != "" {
		root, err := confine.NewRoot(req.BaseDir)
		if err != nil {
			return errDiag("nri provider config: %v", err)
		}
		if cache, err = root.Inside(req.BaseDir, cmpOr(c.Cache, DefaultCache)); err != nil {
			return errDiag("nri provider config: cache: %v", err)
		}
	} else if c.Cache != "" {
		cache = filepath.Clean(c.Cache)
	}
	return p.start(c, cache)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Start runs the agent with a config whose cache path is already
// resolved (the node agent's flags).
func (p *Provider) Start(c Config) error {
	if d := p.start(c, c.Cache); len(d) > 0 {
		return d[0]
	}
	return nil
}

func (p *Provider) start(c Config, cache string) []providers.Diagnostic {
	// Checked here, so Configure and the agent's Start refuse alike.
	if c.PluginIdx == "" {
		c.PluginIdx = DefaultPluginIdx
	}
	if len(c.PluginIdx) != 2 || c.PluginIdx[0] < '0' || c.PluginIdx[0] > '9' || c.PluginIdx[1] < '0' || c.PluginIdx[1] > '9' {
		return errDiag("nri provider config: pluginIdx %q: want two digits, as in \"50\"", c.PluginIdx)
	}
	topo, err := topologyOf(c.Topology)
	if err != nil {
		return errDiag("nri provider: %v", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pipe != nil {
		if p.cfg == c {
			return nil
		}
		return errDiag("the nri provider is already running with another socket, topology or cache: restart it to change them")
	}
	every, err := workingSetEvery(c.WorkingSetEvery)
	if err != nil {
		return errDiag("nri provider config: %v", err)
	}
	pipe, err := NewPipeline(topo, cache, p.log)
	if err != nil {
		return errDiag("nri provider: %v", err)
	}
	pipe.Notify = p.notify
	pl := NewPlugin(pipe, p.log)
	pipe.Start(pl.Send)
	ctx, cancel := context.WithCancel(context.Background())
	p.cfg, p.pipe, p.plugin, p.cancel, p.done = c, pipe, pl, cancel, make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { _ = pl.Run(ctx, c.Socket, c.PluginIdx, p.Connected) })
	if every > 0 {
		if cg, err := OpenCgroups(cmpOr(c.CgroupRoot, DefaultCgroupRoot)); err != nil {
			p.log.Warn("working sets are not read: memory limits have no floor but the NFR's", "err", err)
		} else {
			wg.Go(func() { p.sampleEvery(ctx, pipe, cg, every) })
		}
	}
	go func() {
		wg.Wait()
		close(p.done)
	}()
	return nil
}

// workingSetEvery parses the sampling interval: default 10 s, 0 for none,
// else 1 s to 1 h.
func workingSetEvery(s string) (time.Duration, error) {
	if s == "" {
		return DefaultWorkingSetEvery, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d != 0 && (d < time.Second || d > time.Hour) {
		return 0, fmt.Errorf("workingSetEvery %q: want a duration from 1s to 1h, or 0s for none", s)
	}
	return d, nil
}

// Pipeline is the running pipeline (nil before Configure).
func (p *Provider) Pipeline() *Pipeline {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pipe
}

func topologyOf(s string) (nodepolicy.Topology, error) {
	if s != "" {
		return nodepolicy.ParseTopology(s)
	}
	return DetectTopology("/sys/devices/system/cpu")
}

func (p *Provider) notify(reason string) {
	select {
	case p.events <- providers.Event{Now: time.Now(), Reason: reason}:
	default:
	}
}

// Events sends pool and problem changes until ctx ends.
func (p *Provider) Events(ctx context.Context, _ time.Time, send func(providers.Event) error) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case e := <-p.events:
			if err := send(e); err != nil {
				return err
			}
		}
	}
}

// Read reports the policy the node runs (pools, problems, containers)
// and the memory limits it holds.
func (p *Provider) Read(ctx context.Context, req providers.ReadRequest) providers.ReadResponse {
	out := providers.ReadResponse{Objects: make([]providers.Object, len(req.Addresses))}
	pipe := p.Pipeline()
	if pipe == nil {
		out.Diagnostics = errDiag("not configured")
		return out
	}
	snap, err := pipe.Snapshot(ctx)
	if err != nil {
		out.Diagnostics = errDiag("%v", err)
		return out
	}
	for i, a := range req.Addresses {
		out.Objects[i] = Observed(a, snap)
		if ps := snap.Result.Problems; out.Objects[i].Exists && a.Kind == noderes.Kind && len(ps) > 0 {
			addr := a
			out.Diagnostics = append(out.Diagnostics, providers.Diagnostic{Severity: providers.Warning, Address: &addr, Message: ProblemsMessage(ps)})
		}
	}
	return out
}

// maxReported bounds the problems one message carries.
const maxReported = 16

// ProblemsMessage is a node's problems in one message, a line each
// ("field: message"), at most maxReported of them.
func ProblemsMessage(ps []nodepolicy.Problem) string {
	var lines []string
	for i, p := range ps {
		if i == maxReported {
			lines = append(lines, fmt.Sprintf("spec: and %d more", len(ps)-maxReported))
			break
		}
		lines = append(lines, p.String())
	}
	return strings.Join(lines, "\n")
}

// Summary is what a node's report carries of its pools: each pool's
// CPUs and how many containers it holds (fixed size: at most 33 pools).
func Summary(attrs map[addrs.Path]values.Value) map[string]any {
	out := map[string]any{"topology": attrs[noderes.AttrTopology].Str()}
	var pools []nodepolicy.PoolState
	if v, ok := attrs[noderes.AttrPools]; ok && json.Unmarshal(v.JSON(), &pools) == nil {
		summary := map[string]string{}
		for _, p := range pools {
			summary[p.Name] = fmt.Sprintf("%s (%d containers)", p.CPUs, len(p.Containers))
		}
		out["pools"] = summary
	}
	return out
}

// SummaryKey is what of a node's policy its agent reports as soon as it
// changes (agentcr.Reconciler.Key): the topology and each pool's CPUs,
// not how many containers each holds (a pod's start would rewrite it).
func SummaryKey(o providers.Object) string {
	var pools []nodepolicy.PoolState
	_ = json.Unmarshal(o.Attributes[noderes.AttrPools].JSON(), &pools)
	var b strings.Builder
	b.WriteString(o.Attributes[noderes.AttrTopology].Str())
	for _, p := range pools {
		fmt.Fprintf(&b, " %s=%s", p.Name, p.CPUs)
	}
	return b.String()
}

// Observed is an address as a snapshot of the node shows it.
func Observed(a addrs.Object, snap Snapshot) providers.Object {
	o := providers.Object{Address: a}
	switch a.Kind {
	case noderes.Kind:
		if snap.Policy == nil || snap.Policy.Address != a.String() {
			return o
		}
		o.Exists = true
		o.Attributes = map[addrs.Path]values.Value{
			noderes.AttrTopology:   values.StringOf(snap.Topology.String()),
			noderes.AttrContainers: values.CountOf(int64(snap.Containers)),
			noderes.AttrPending:    values.CountOf(int64(snap.Pending)),
		}
		put := func(path addrs.Path, v any) {
			raw, err := json.Marshal(v)
			if err != nil {
				return
			}
			if sv, err := values.StructuredOf(raw); err == nil {
				o.Attributes[path] = sv
			}
		}
		put(noderes.AttrConfig, snap.Policy.Config)
		o.Managers = map[addrs.Path]string{noderes.AttrConfig: managerOr(snap.Policy.Manager)}
		put(noderes.AttrPools, snap.Result.Pools)
		problems := snap.Result.Problems
		if problems == nil {
			problems = []nodepolicy.Problem{}
		}
		put(noderes.AttrProblems, problems)
	case noderes.MemoryKind:
		lims, ok := snap.Memory[a.Namespace+"/"+a.Name]
		if !ok {
			return o
		}
		o.Exists = true
		o.Attributes = map[addrs.Path]values.Value{}
		o.Managers = map[addrs.Path]string{}
		for c, v := range lims {
			o.Attributes[noderes.MemoryAttr(c)] = values.BytesOf(v)
			o.Managers[noderes.MemoryAttr(c)] = defaultManager
		}
	}
	return o
}

// check parses a change for the node.
func check(c providers.ObjectChange) (*PolicyState, map[string]int64, error) {
	if len(c.Restored) > 0 {
		// What the node agent holds is setpoint's own (a policy, limits
		// it set): there is no user's value under it to write back.
		return nil, nil, fmt.Errorf("%s: the nri provider has no user's value to restore", c.Address)
	}
	switch c.Address.Kind {
	case noderes.Kind:
		v, ok := c.Attributes[noderes.AttrConfig]
		if !ok || v.Type() != values.Structured {
			return nil, nil, fmt.Errorf("%s: no config attribute", c.Address)
		}
		conf, err := noderes.Parse(v.JSON())
		if err != nil {
			return nil, nil, err
		}
		return &PolicyState{Address: c.Address.String(), Config: conf, Manager: c.Manager}, nil, nil
	case noderes.MemoryKind:
		lims := map[string]int64{}
		for path, v := range c.Attributes {
			ctr, ok := noderes.MemoryContainer(path)
			if !ok || v.Type() != values.Bytes || v.Int() <= 0 {
				return nil, nil, fmt.Errorf("%s: %s is not a container's memory limit in bytes", c.Address, path)
			}
			lims[ctr] = v.Int()
		}
		return nil, lims, nil
	}
	return nil, nil, fmt.Errorf("the nri provider serves %s and %s objects, not %s", noderes.Kind, noderes.MemoryKind, c.Address.Kind)
}

// released says the change gives up every attribute without a new one.
func released(c providers.ObjectChange) bool {
	return c.Action == action.Delete || (len(c.Attributes) == 0 && len(c.Released) > 0 && len(c.Restored) == 0)
}

// PlanChange says whether each change would be accepted, and warns of
// what the node could not do as the new policy says.
func (p *Provider) PlanChange(ctx context.Context, req providers.PlanChangeRequest) providers.PlanChangeResponse {
	out := providers.PlanChangeResponse{Results: make([]providers.ObjectResult, len(req.Changes))}
	pipe := p.Pipeline()
	for i, c := range req.Changes {
		out.Results[i] = providers.ObjectResult{Address: c.Address}
		if pipe == nil {
			out.Results[i].Err = "not configured"
			continue
		}
		if released(c) {
			continue
		}
		ps, _, err := check(c)
		if err != nil {
			out.Results[i].Err = err.Error()
			continue
		}
		if ps != nil {
			problems, err := pipe.DryRun(ctx, ps)
			if err != nil {
				out.Results[i].Err = err.Error()
				continue
			}
			a := c.Address
			for _, pr := range problems {
				out.Diagnostics = append(out.Diagnostics, providers.Diagnostic{Severity: providers.Warning, Address: &a, Message: pr.String()})
			}
		}
		out.Results[i].After = c.Attributes
	}
	return out
}

// Apply runs, changes or releases the policy and memory limits.
func (p *Provider) Apply(ctx context.Context, req providers.ApplyRequest) providers.ApplyResponse {
	out := providers.ApplyResponse{Results: make([]providers.ObjectResult, len(req.Changes))}
	pipe := p.Pipeline()
	for i, c := range req.Changes {
		out.Results[i] = providers.ObjectResult{Address: c.Address}
		if pipe == nil {
			out.Results[i].Err = "not configured"
			continue
		}
		if err := p.apply(ctx, pipe, c); err != nil {
			out.Results[i].Err = err.Error()
			continue
		}
		if !released(c) {
			out.Results[i].After = c.Attributes
		}
	}
	return out
}

// syncWait bounds how long an Apply waits for the runtime: a change is
// applied when the node has it, not when the agent does.
const syncWait = 10 * time.Second

func (p *Provider) apply(ctx context.Context, pipe *Pipeline, c providers.ObjectChange) error {
	wctx, cancel := context.WithTimeout(ctx, syncWait)
	defer cancel()
	p.mu.Lock()
	pl := p.plugin
	p.mu.Unlock()
	if err := pl.WaitSynchronized(wctx); err != nil {
		return fmt.Errorf("%w (socket %s): nothing changed", err, p.cfg.Socket)
	}
	if err := applyTo(ctx, pipe, c); err != nil {
		return err
	}
	return pipe.Flush(wctx)
}

func applyTo(ctx context.Context, pipe *Pipeline, c providers.ObjectChange) error {
	workload := c.Address.Namespace + "/" + c.Address.Name
	if released(c) {
		switch c.Address.Kind {
		case noderes.Kind:
			return pipe.ReleasePolicy(ctx, c.Address.String())
		case noderes.MemoryKind:
			return pipe.SetMemory(ctx, workload, nil)
		}
		return fmt.Errorf("the nri provider serves %s and %s objects, not %s", noderes.Kind, noderes.MemoryKind, c.Address.Kind)
	}
	ps, lims, err := check(c)
	if err != nil {
		return err
	}
	if ps != nil {
		return pipe.SetPolicy(ctx, ps)
	}
	return pipe.SetMemory(ctx, workload, lims)
}

// Shutdown disconnects from the runtime and saves the cache. Containers
// keep the CPU sets and limits they have: a restarted agent resumes them.
func (p *Provider) Shutdown() error {
	p.mu.Lock()
	cancel, done, pipe := p.cancel, p.done, p.pipe
	p.mu.Unlock()
	if pipe == nil {
		return nil
	}
	// What was queued goes to the runtime first (briefly: a runtime that
	// is gone gets it at the next agent's synchronize).
	fctx, fcancel := context.WithTimeout(context.Background(), 2*time.Second)
	_ = pipe.Flush(fctx)
	fcancel()
	cancel()
	<-done
	pipe.Stop()
	return nil
}
