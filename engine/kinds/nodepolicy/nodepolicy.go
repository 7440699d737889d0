// Package nodepolicykind plugs the NodePolicy kind into the loop. The
// event pipeline runs in the node agent (the NRI provider, or the sim
// world); what the engine plans, gates and applies is the policy resolved
// to the agent's config. What the node made of it (pools, problems) comes
// back through Read, as notes positioned on the spec.
package nodepolicykind

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/decide/nodepolicy"
	"github.com/setpoint-dev/setpoint/engine/diag"
	"github.com/setpoint-dev/setpoint/engine/gate"
	"github.com/setpoint-dev/setpoint/engine/intent"
	"github.com/setpoint-dev/setpoint/engine/plan"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/nodeagent"
	"github.com/setpoint-dev/setpoint/providers/noderes"
)

func init() { engine.Register("NodePolicy", decider{}) }

// Config is the one dimension the engine gates: the policy's config.
// Whether the agent adjusts containers is the spec's enforcement, carried
// inside it.
const Config intent.Dimension = "config"

// ClusterProvider runs node policies through the NRI agents' DaemonSet.
const ClusterProvider = "kubernetes"

type decider struct{}

func provider(n *spec.NodePolicy, def string) string {
	return spec.ProviderOr(n.Spec.Target.Provider, def)
}

func inCluster(n *spec.NodePolicy, def string) bool { return provider(n, def) == ClusterProvider }

func address(n *spec.NodePolicy, def string) addrs.Object {
	kind := noderes.Kind
	if inCluster(n, def) {
		kind = nodeagent.Kind
	}
	return addrs.Object{Provider: provider(n, def), Kind: kind, Namespace: n.Metadata.Namespace, Name: n.Metadata.Name}
}

// Reads the policy's object.
func (decider) Reads(doc spec.Document, def string) []addrs.Object {
	return []addrs.Object{address(doc.(*spec.NodePolicy), def)}
}

// Lists nothing: the agent sees the node's containers itself.
func (decider) Lists(spec.Document, string) []providers.ListRequest { return nil }

// Resolve turns a spec into the agent's config.
func Resolve(n *spec.NodePolicy) (noderes.Config, error) {
	pol, err := n.Spec.Policy()
	if err != nil {
		return noderes.Config{}, err
	}
	c := noderes.Config{Policy: pol}
	return c, c.Check()
}

func structured(v any) (values.Value, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return values.Value{}, err
	}
	return values.StructuredOf(raw)
}

// Decide sends the resolved config, and turns what the node reported
// into notes.
func (decider) Decide(t *engine.Tick, doc spec.Document, _ []addrs.Object, obs engine.Observation, _ *state.State) ([]intent.Intent, []plan.Note, []plan.Note) {
	n := doc.(*spec.NodePolicy)
	id := n.ID()
	conf, err := Resolve(n)
	if err != nil {
		return nil, nil, []plan.Note{{Severity: diag.Error, Spec: id, Pos: n.Src.PosOf("spec"), Message: err.Error()}}
	}
	if !inCluster(n, t.DefaultProvider) {
		// A provider running policies on several nodes picks them by it;
		// in a cluster, the NodeAgentConfig carries it.
		conf.NodeSelector = n.Spec.NodeSelector
	}
	v, err := structured(conf)
	if err != nil {
		return nil, nil, []plan.Note{{Severity: diag.Error, Spec: id, Message: err.Error()}}
	}
	a := address(n, t.DefaultProvider)
	p := conf.Policy
	why := fmt.Sprintf("node policy: %d pool(s) (%s), reserved CPUs %q, memory from NFRs %t; cpus %s, memory %s",
		len(p.Pools), poolSummary(p.Pools), p.Reserved.String(), p.MemoryFromNFR, p.CPUs, p.Memory)
	path := noderes.AttrConfig
	if inCluster(n, t.DefaultProvider) {
		path = nodeagent.Config
	}
	it := intent.Intent{Attr: addrs.Attr{Object: a, Path: path}, Kind: intent.Exact, Dimension: Config,
		Value: v, Recommended: v, Rationale: why, Source: id, SourcePos: n.Src.PosOf("spec")}
	o, exists := obs.Objects[a]
	exists = exists && o.Exists
	if !inCluster(n, t.DefaultProvider) {
		if !exists {
			it.Create = &intent.Create{}
		}
		return []intent.Intent{it}, nodeNotes(id, n, o), nil
	}
	// In a cluster: the NodeAgentConfig names the NRI agents and the
	// nodes; each node's report comes back as notes.
	agent := values.StringOf(nodeagent.NRI)
	sel := n.Spec.NodeSelector
	if sel == nil {
		sel = map[string]string{}
	}
	selV, err := structured(sel)
	if err != nil {
		return nil, nil, []plan.Note{{Severity: diag.Error, Spec: id, Message: err.Error()}}
	}
	if !exists {
		it.Create = &intent.Create{Attributes: map[addrs.Path]values.Value{nodeagent.Agent: agent, nodeagent.NodeSelector: selV}}
	}
	mk := func(path addrs.Path, v values.Value, why string) intent.Intent {
		return intent.Intent{Attr: addrs.Attr{Object: a, Path: path}, Kind: intent.Exact, Dimension: Config,
			Value: v, Recommended: v, Rationale: why, Source: id, SourcePos: n.Src.PosOf("spec")}
	}
	return []intent.Intent{it, mk(nodeagent.Agent, agent, "the NRI node agents run node policies"),
		mk(nodeagent.NodeSelector, selV, "the nodes whose agents run it")}, clusterNotes(id, n, o), nil
}

// nodeNotes are the pools a node reports (info) and its problems
// (warnings, positioned on the field the problem names); from a provider
// running the policy on several nodes, each node's, named.
func nodeNotes(id string, n *spec.NodePolicy, o providers.Object) []plan.Note {
	if !o.Exists {
		return nil
	}
	if v, ok := o.Attributes[noderes.AttrNodes]; ok {
		var nodes []noderes.NodeStatus
		if json.Unmarshal(v.JSON(), &nodes) != nil || len(nodes) > 64 {
			return nil
		}
		if len(nodes) == 0 {
			return []plan.Note{{Severity: diag.Warning, Spec: id, Pos: n.Src.PosOf("spec.nodeSelector"),
				Message: "runs on no node: the nodeSelector matches none of the provider's nodes"}}
		}
		var notes []plan.Note
		for _, ns := range nodes {
			notes = append(notes, statusNotes(id, n, "node "+ns.Node+": ", ns)...)
		}
		return notes
	}
	var ns noderes.NodeStatus
	ns.Topology = o.Attributes[noderes.AttrTopology].Str()
	if v, ok := o.Attributes[noderes.AttrPools]; ok && json.Unmarshal(v.JSON(), &ns.Pools) != nil {
		ns.Pools = nil
	}
	if v, ok := o.Attributes[noderes.AttrProblems]; ok && json.Unmarshal(v.JSON(), &ns.Problems) != nil {
		ns.Problems = nil
	}
	return statusNotes(id, n, "", ns)
}

// statusNotes are one node's pools, as an info note (a node reports at
// least its default pool: none is no report), and its problems (at most
// 32), as warnings.
func statusNotes(id string, n *spec.NodePolicy, prefix string, ns noderes.NodeStatus) []plan.Note {
	var notes []plan.Note
	if len(ns.Pools) > 0 && len(ns.Pools) <= 64 {
		var parts []string
		for _, p := range ns.Pools {
			parts = append(parts, fmt.Sprintf("%s: CPUs %q, %d container(s), %dm requested", p.Name, p.CPUs.String(), len(p.Containers), p.RequestMilli))
		}
		notes = append(notes, plan.Note{Severity: diag.Info, Spec: id, Pos: n.Src.PosOf("spec.pools"),
			Message: fmt.Sprintf("%spools on %s: %s", prefix, ns.Topology, strings.Join(parts, "; "))})
	}
	problems := ns.Problems
	if len(problems) > 32 {
		problems = problems[:32]
	}
	for _, p := range problems {
		notes = append(notes, plan.Note{Severity: diag.Warning, Spec: id, Pos: n.Src.PosOf(p.Field), Message: prefix + p.Message})
	}
	return notes
}

// clusterNotes are the nodes whose agent reported a problem, as warnings.
// An agent's message carries its problems a line each, "field: message".
func clusterNotes(id string, n *spec.NodePolicy, o providers.Object) []plan.Note {
	var notes []plan.Note
	for p, v := range o.Attributes {
		node, ok := p.Selected("name")
		if !ok || p != nodeagent.NodeAttr(node, "message") || v.Str() == "ok" {
			continue
		}
		for _, msg := range strings.Split(v.Str(), "\n") {
			field, rest, ok := strings.Cut(msg, ": ")
			pos := n.Src.PosOf("spec")
			if ok && strings.HasPrefix(field, "spec.") {
				pos, msg = n.Src.PosOf(field), rest
			}
			notes = append(notes, plan.Note{Severity: diag.Warning, Spec: id, Pos: pos, Message: fmt.Sprintf("node %s's NRI agent: %s", node, msg)})
		}
	}
	slices.SortFunc(notes, func(a, b plan.Note) int { return strings.Compare(a.Message, b.Message) })
	return notes
}

func poolSummary(pools []nodepolicy.Pool) string {
	var parts []string
	for _, p := range pools {
		parts = append(parts, fmt.Sprintf("%s %d–%d CPUs", p.Name, p.MinCPUs, p.MaxCPUs))
	}
	if len(parts) == 0 {
		return "only the default pool"
	}
	return strings.Join(parts, ", ")
}

// Rules: the config always goes (observe is inside it), unless paused.
func (decider) Rules(doc spec.Document, _ []addrs.Object, _ intent.Dimension, _ engine.Observation) gate.Rules {
	n := doc.(*spec.NodePolicy)
	rules := gate.Rules{Mode: spec.ModeEnforce}
	if n.Spec.Paused {
		rules.Paused, rules.PauseReason = true, "spec.paused at "+n.Src.PosOf("spec.paused").String()
	}
	return rules
}
