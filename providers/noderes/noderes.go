// Package noderes is the vocabulary the NodePolicy kind, the NFR's
// node-applied memory and the providers that run node policies (NRI,
// sim) share: the objects' kinds, their attributes and the configuration
// the engine plans, gates and applies. The event pipeline itself runs in
// the provider, which is the node agent.
package noderes

import (
	"encoding/json"
	"fmt"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/decide/nodepolicy"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
)

// Kinds a node-policy provider serves.
const (
	// Kind is a NodePolicy running on the node.
	Kind = "NodePolicy"
	// MemoryKind holds a workload's node-applied memory limits, from its
	// NFR (memory.apply: node), one attribute per container.
	MemoryKind = "WorkloadMemory"
)

// Attributes of a NodePolicy object. Config is the one setpoint writes;
// the others report what the node made of it (read-only).
var (
	AttrConfig     = addrs.MustPath("config")
	AttrTopology   = addrs.MustPath("status.topology")
	AttrPools      = addrs.MustPath("status.pools")      // structured: []nodepolicy.PoolState
	AttrProblems   = addrs.MustPath("status.problems")   // structured: []nodepolicy.Problem
	AttrContainers = addrs.MustPath("status.containers") // count
	AttrPending    = addrs.MustPath("status.pending")    // count: containers whose enforced assignment is not yet applied
	// AttrNodes is what each node running the policy made of it, from a
	// provider that runs it on several (the sim world's nodes).
	AttrNodes = addrs.MustPath("status.nodes") // structured: []NodeStatus
)

// NodeStatus is one node's report of a policy it runs.
type NodeStatus struct {
	Node     string                 `json:"node"`
	Topology string                 `json:"topology"`
	Pools    []nodepolicy.PoolState `json:"pools"`
	Problems []nodepolicy.Problem   `json:"problems,omitempty"`
}

// MemoryAttr is the path of a container's limit on a WorkloadMemory
// object.
func MemoryAttr(container string) addrs.Path {
	return addrs.FromSteps(addrs.F("containers"), addrs.Sel("name", container), addrs.F("limit"))
}

// MemoryContainer is the container a WorkloadMemory path names.
func MemoryContainer(p addrs.Path) (string, bool) {
	c, ok := p.Selected("name")
	if !ok || !p.Equal(MemoryAttr(c)) {
		return "", false
	}
	return c, true
}

// KindSchemas are the kinds as a provider lists them.
func KindSchemas() []providers.KindSchema {
	return []providers.KindSchema{
		{Kind: Kind, Attributes: []providers.AttributeSchema{
			{Path: AttrConfig, Type: values.Structured, Description: "the node policy, resolved"},
			{Path: AttrTopology, Type: values.String, ReadOnly: true, Description: "sockets×cores×threads"},
			{Path: AttrPools, Type: values.Structured, ReadOnly: true, Description: "each pool's CPUs, containers and requests"},
			{Path: AttrProblems, Type: values.Structured, ReadOnly: true, Description: "what the node could not do as the spec says"},
			{Path: AttrContainers, Type: values.Count, ReadOnly: true, Description: "containers on the node"},
			{Path: AttrPending, Type: values.Count, ReadOnly: true, Description: "containers whose enforced assignment is not applied yet"},
			{Path: AttrNodes, Type: values.Structured, ReadOnly: true, Description: "each node's pools and problems, from a provider running the policy on several nodes"},
		}},
		{Kind: MemoryKind, Attributes: []providers.AttributeSchema{
			{Path: MemoryAttr("*"), Type: values.Bytes, Description: "a container's memory limit, applied in place on the node"},
		}},
	}
}

// Config is what the engine sends for a NodePolicy.
type Config struct {
	nodepolicy.Policy
	// NodeSelector picks, among the nodes a provider runs policies on,
	// those that run this one. A provider that is one node's agent runs it
	// whatever it says: in a cluster, the agents' config selects nodes.
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
}

// Parse reads a config and checks it.
func Parse(raw []byte) (Config, error) {
	var c Config
	if err := json.Unmarshal(raw, &c); err != nil {
		return Config{}, fmt.Errorf("node policy config: %w", err)
	}
	return c, c.Check()
}

// Check refuses what the spec's validation refuses, for a config that did
// not come from a validated spec (a NodeAgentConfig edited by hand).
func (c Config) Check() error {
	if len(c.NodeSelector) > 16 {
		return fmt.Errorf("nodeSelector has %d labels: at most 16", len(c.NodeSelector))
	}
	if len(c.Policy.Pools) > 32 {
		return fmt.Errorf("%d pools: at most 32", len(c.Policy.Pools))
	}
	seen := map[string]bool{nodepolicy.Default: true}
	for i, p := range c.Policy.Pools {
		if seen[p.Name] {
			return fmt.Errorf("pool %d: name %q is taken", i, p.Name)
		}
		seen[p.Name] = true
		if p.MinCPUs < 0 || p.MinCPUs > p.MaxCPUs || p.MaxCPUs > nodepolicy.MaxCPUs {
			return fmt.Errorf("pool %s: minCPUs %d, maxCPUs %d: want 0 ≤ min ≤ max ≤ %d", p.Name, p.MinCPUs, p.MaxCPUs, nodepolicy.MaxCPUs)
		}
		if len(p.Namespaces) > 64 || len(p.MatchLabels) > 16 {
			return fmt.Errorf("pool %s: at most 64 namespaces and 16 labels", p.Name)
		}
	}
	for _, m := range []nodepolicy.Mode{c.Policy.CPUs, c.Policy.Memory} {
		if m != nodepolicy.Observe && m != nodepolicy.Enforce {
			return fmt.Errorf("enforcement %q: want observe or enforce", m)
		}
	}
	return nil
}
