// Package nodeagent is the vocabulary of node agents run in a cluster: the
// NodeAgentConfig custom resource the engine writes through the kubernetes
// provider and the DaemonSet agents (eBPF, NRI) read and report on. Shared
// by the kinds that target it and the provider that serves it, so neither
// spells the paths itself.
package nodeagent

import "github.com/setpoint-dev/setpoint/engine/addrs"

// Kind is the custom resource's kind as the kubernetes provider serves it.
const Kind = "NodeAgentConfig"

// Agents.
const (
	EBPF = "ebpf"
	NRI  = "nri"
)

var (
	// Agent says which agents take a config (ebpf or nri).
	Agent = addrs.MustPath("spec.agent")
	// Config is what the agents apply: the one writable attribute of the
	// agent's own object (a RouteGroup's config).
	Config = addrs.MustPath("spec.config")
	// NodeSelector says which nodes' agents take a config (all when
	// empty).
	NodeSelector = addrs.MustPath("spec.nodeSelector")
	// Nodes holds each node's report, keyed by node name.
	Nodes = addrs.MustPath("status.nodes")
)

// NodeAttr is the path of a node's report (which: observedGeneration,
// message or observed).
func NodeAttr(node, which string) addrs.Path {
	return Nodes.Child(addrs.Sel("name", node), addrs.F(which))
}
