// Package routegroupkind plugs the RouteGroup kind into the loop. The
// field itself runs in the provider's fast loop (the eBPF node agent, or
// the sim world); what the engine plans, gates and applies is the group's
// configuration: the spec resolved to the knobs of engine/decide/routegroup,
// with its backends (listed from a selector's pods, or given).
package routegroupkind

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/decide/routegroup"
	"github.com/setpoint-dev/setpoint/engine/diag"
	"github.com/setpoint-dev/setpoint/engine/gate"
	"github.com/setpoint-dev/setpoint/engine/intent"
	"github.com/setpoint-dev/setpoint/engine/plan"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/nodeagent"
	"github.com/setpoint-dev/setpoint/providers/route"
	"github.com/setpoint-dev/setpoint/providers/workload"
)

func init() { engine.Register("RouteGroup", decider{}) }

// Config is the one dimension the engine gates: the group's
// configuration. Whether the provider writes tables is the spec's
// enforcement.table, carried inside it.
const Config intent.Dimension = "config"

// PodsProvider serves the pods a selector names. A group whose target is
// this provider runs in the cluster: its config goes to a NodeAgentConfig
// the eBPF agents' DaemonSet reconciles from.
const PodsProvider = "kubernetes"

type decider struct{}

func provider(r *spec.RouteGroup, def string) string {
	return spec.ProviderOr(r.Spec.Target.Provider, def)
}

// inCluster says the group's config goes through the cluster's node
// agents rather than to an agent setpoint runs itself.
func inCluster(r *spec.RouteGroup, def string) bool { return provider(r, def) == PodsProvider }

func address(r *spec.RouteGroup, def string) addrs.Object {
	kind := route.Kind
	if inCluster(r, def) {
		kind = nodeagent.Kind
	}
	return addrs.Object{Provider: provider(r, def), Kind: kind, Namespace: r.Metadata.Namespace, Name: r.Metadata.Name}
}

// configPath is the attribute the config goes to.
func configPath(r *spec.RouteGroup, def string) addrs.Path {
	if inCluster(r, def) {
		return nodeagent.Config
	}
	return route.AttrConfig
}

// Reads the group's object.
func (decider) Reads(doc spec.Document, def string) []addrs.Object {
	return []addrs.Object{address(doc.(*spec.RouteGroup), def)}
}

// Lists the selector's pods.
func (decider) Lists(doc spec.Document, _ string) []providers.ListRequest {
	r := doc.(*spec.RouteGroup)
	if len(r.Spec.Backends.Selector) == 0 {
		return nil
	}
	return []providers.ListRequest{podList(r)}
}

func podList(r *spec.RouteGroup) providers.ListRequest {
	ns := r.Spec.Backends.Namespace
	if ns == "" {
		ns = r.Metadata.Namespace
	}
	return providers.ListRequest{Provider: PodsProvider, Kind: workload.Pod, Namespace: ns, Selector: r.Spec.Backends.Selector}
}

// Resolve turns a spec and its backends into the provider's config.
func Resolve(r *spec.RouteGroup, endpoints []string) (route.Config, error) {
	sp := r.Spec
	vip, proto, err := sp.VIPAddr()
	if err != nil {
		return route.Config{}, err
	}
	budget, err := sp.BudgetPerSecond()
	if err != nil {
		return route.Config{}, err
	}
	c := route.Config{
		VIP: vip.String(), Proto: proto, Endpoints: endpoints,
		Metrics: route.Metrics{Path: sp.Metrics.Path, Port: sp.Metrics.Port, Queue: sp.Metrics.Queue, Latency: sp.Metrics.Latency, ErrorRate: sp.Metrics.ErrorRate},
		Builder: sp.Table.Builder, Every: sp.Tick.Every.D(), Jitter: float64(sp.Tick.Jitter), Burst: sp.Admission.Burst,
		Failsafe: sp.Failsafe.After.D(), Table: route.TableObserve,
		Params: routegroup.Params{
			Slots: sp.Table.Slots, Alpha: sp.Filter.Alpha,
			WQueue: sp.Pressure.Weights.Queue, WLatency: sp.Pressure.Weights.Latency, WErrors: sp.Pressure.Weights.Errors,
			QueueRef: sp.Pressure.Refs.Queue, LatencyRef: sp.Pressure.Refs.Latency.D().Seconds(), ErrorRef: float64(sp.Pressure.Refs.ErrorRate),
			ErrorClip: sp.Pressure.ErrorClip, PenaltyAbove: float64(sp.Pressure.ErrorPenalty.Above), PenaltyAdd: sp.Pressure.ErrorPenalty.Add,
			QueueLimit: sp.Saturation.QueueLimit, Horizon: sp.Saturation.Horizon.D(),
			MaxSlotsPerTick: sp.Viscosity.MaxSlotsPerTick,
			SkewEpsilon:     sp.SkewGuard.Epsilon, SkewShrink: sp.SkewGuard.Shrink, MinConnects: uint64(sp.SkewGuard.MinConnects),
			TransitionAbove: sp.Regimes.TransitionAbove, CrisisAbove: sp.Regimes.CrisisAbove, RecoveryTicks: sp.Regimes.RecoveryTicks,
			SoftShed: float64(sp.Admission.SoftShed), HardBudget: budget,
		},
	}
	if sp.Enforcement.Table == spec.ModeEnforce {
		c.Table = route.TableEnforce
	}
	return c, c.Check()
}

// endpoints are the group's backends: given, or the listed ready pods' IPs
// at the selector's port (pods without an IP yet are left out).
func endpoints(r *spec.RouteGroup, obs engine.Observation) ([]string, string) {
	if len(r.Spec.Backends.Selector) == 0 {
		out := make([]string, 0, len(r.Spec.Backends.Endpoints))
		for _, e := range r.Spec.Backends.Endpoints {
			out = append(out, netip.MustParseAddrPort(e).String())
		}
		slices.Sort(out)
		return slices.Compact(out), ""
	}
	pods, why, failed := obs.List(podList(r))
	if failed {
		return nil, "listing the selector's pods: " + why
	}
	var out []string
	for _, o := range pods {
		if o.Attributes[workload.PodReady].Str() != "True" {
			continue // not passing its readiness probe: no traffic
		}
		ip, err := netip.ParseAddr(o.Attributes[workload.PodIP].Str())
		if err != nil || !ip.Is4() {
			continue
		}
		out = append(out, netip.AddrPortFrom(ip, uint16(r.Spec.Backends.Port)).String())
	}
	slices.Sort(out)
	return slices.Compact(out), ""
}

// Decide sends the resolved config; the provider's loop does the rest.
func (decider) Decide(t *engine.Tick, doc spec.Document, reads []addrs.Object, obs engine.Observation, _ *state.State) ([]intent.Intent, []plan.Note, []plan.Note) {
	r := doc.(*spec.RouteGroup)
	id := r.ID()
	eps, why := endpoints(r, obs)
	if why != "" {
		return nil, nil, []plan.Note{{Severity: diag.Error, Spec: id, Pos: r.Src.PosOf("spec.backends.selector"), Message: why}}
	}
	if len(eps) == 0 {
		return nil, []plan.Note{{Severity: diag.Warning, Spec: id, Pos: r.Src.PosOf("spec.backends"),
			Message: "no backend has an address yet: the group's config holds until one does"}}, nil
	}
	conf, err := Resolve(r, eps)
	if err != nil {
		return nil, nil, []plan.Note{{Severity: diag.Error, Spec: id, Pos: r.Src.PosOf("spec"), Message: err.Error()}}
	}
	raw, err := json.Marshal(conf)
	if err != nil {
		return nil, nil, []plan.Note{{Severity: diag.Error, Spec: id, Message: err.Error()}}
	}
	v, err := values.StructuredOf(raw)
	if err != nil {
		return nil, nil, []plan.Note{{Severity: diag.Error, Spec: id, Message: err.Error()}}
	}
	a := address(r, t.DefaultProvider)
	why = fmt.Sprintf("route group %s over %d backend(s) (%s), %s table of %d slots, tick %s, table %s",
		conf.VIP, len(eps), summary(eps), conf.Builder, conf.Params.Slots, conf.Every, conf.Table)
	it := intent.Intent{Attr: addrs.Attr{Object: a, Path: configPath(r, t.DefaultProvider)}, Kind: intent.Exact, Dimension: Config,
		Value: v, Recommended: v, Rationale: why, Source: id, SourcePos: r.Src.PosOf("spec")}
	o, exists := obs.Objects[a]
	exists = exists && o.Exists
	if !inCluster(r, t.DefaultProvider) {
		if !exists {
			it.Create = &intent.Create{}
		}
		return []intent.Intent{it}, nil, nil
	}
	// In a cluster: the NodeAgentConfig names the eBPF agents, and what
	// each node reported of the config comes back as notes.
	agent := values.StringOf(nodeagent.EBPF)
	if !exists {
		it.Create = &intent.Create{Attributes: map[addrs.Path]values.Value{nodeagent.Agent: agent}}
	}
	byAgent := intent.Intent{Attr: addrs.Attr{Object: a, Path: nodeagent.Agent}, Kind: intent.Exact, Dimension: Config,
		Value: agent, Recommended: agent, Rationale: "the eBPF node agents run route groups", Source: id, SourcePos: r.Src.PosOf("spec")}
	return []intent.Intent{it, byAgent}, nodeReports(id, r, o), nil
}

// nodeReports are the nodes whose agent reported a problem with the
// config, as warnings on the spec.
func nodeReports(id string, r *spec.RouteGroup, o providers.Object) []plan.Note {
	var notes []plan.Note
	for p, v := range o.Attributes {
		node, ok := p.Selected("name")
		if !ok || !p.HasPrefix(nodeagent.Nodes) || p != nodeagent.NodeAttr(node, "message") || v.Str() == "ok" {
			continue
		}
		notes = append(notes, plan.Note{Severity: diag.Warning, Spec: id, Pos: r.Src.PosOf("spec"),
			Message: fmt.Sprintf("node %s's eBPF agent: %s", node, v.Str())})
	}
	slices.SortFunc(notes, func(a, b plan.Note) int { return strings.Compare(a.Message, b.Message) })
	return notes
}

func summary(eps []string) string {
	if len(eps) <= 3 {
		return strings.Join(eps, ", ")
	}
	return fmt.Sprintf("%s, … %s", strings.Join(eps[:2], ", "), eps[len(eps)-1])
}

// Rules: the config always goes (observe is inside it), unless paused.
func (decider) Rules(doc spec.Document, _ []addrs.Object, _ intent.Dimension, _ engine.Observation) gate.Rules {
	r := doc.(*spec.RouteGroup)
	rules := gate.Rules{Mode: spec.ModeEnforce}
	if r.Spec.Paused {
		rules.Paused, rules.PauseReason = true, "spec.paused at "+r.Src.PosOf("spec.paused").String()
	}
	return rules
}
