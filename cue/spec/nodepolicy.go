package spec

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/setpoint-dev/setpoint/engine/decide/nodepolicy"
)

func init() {
	Register(Kind{Name: "NodePolicy", New: func() Document { return &NodePolicy{} }})
}

// NodePolicy shares a node's CPUs and memory among its containers.
type NodePolicy struct {
	Header
	Spec NodePolicySpec `json:"spec"`
}

// NodePolicySpec mirrors #NodePolicySpec.
type NodePolicySpec struct {
	Target       RouteGroupTarget      `json:"target"`
	NodeSelector map[string]string     `json:"nodeSelector,omitempty"`
	Reserved     NodePolicyReserved    `json:"reserved"`
	Pools        []NodePool            `json:"pools"`
	Memory       NodePolicyMemory      `json:"memory"`
	Paused       bool                  `json:"paused"`
	Enforcement  NodePolicyEnforcement `json:"enforcement"`
}

// NodePolicyReserved are the CPUs kept for the system, in the kernel's
// list format.
type NodePolicyReserved struct {
	CPUs string `json:"cpus"`
}

// NodePool mirrors #NodePool.
type NodePool struct {
	Name        string            `json:"name"`
	Namespaces  []string          `json:"namespaces,omitempty"`
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
	MinCPUs     int               `json:"minCPUs"`
	MaxCPUs     int               `json:"maxCPUs"`
	PinMemory   bool              `json:"pinMemory"`
}

// NodePolicyMemory says whether memory limits come from NFRs.
type NodePolicyMemory struct {
	FromNFR bool `json:"fromNFR"`
}

// NodePolicyEnforcement is each dimension's mode.
type NodePolicyEnforcement struct {
	CPUs   Mode `json:"cpus"`
	Memory Mode `json:"memory"`
}

// Policy resolves the spec to the node algorithm's input.
func (s NodePolicySpec) Policy() (nodepolicy.Policy, error) {
	reserved, err := nodepolicy.ParseCPUSet(s.Reserved.CPUs)
	if err != nil {
		return nodepolicy.Policy{}, fmt.Errorf("reserved CPUs %q: %w", s.Reserved.CPUs, err)
	}
	p := nodepolicy.Policy{Reserved: reserved, MemoryFromNFR: s.Memory.FromNFR,
		CPUs: nodepolicy.Observe, Memory: nodepolicy.Observe}
	if s.Enforcement.CPUs == ModeEnforce {
		p.CPUs = nodepolicy.Enforce
	}
	if s.Enforcement.Memory == ModeEnforce {
		p.Memory = nodepolicy.Enforce
	}
	for _, pool := range s.Pools {
		p.Pools = append(p.Pools, nodepolicy.Pool{Name: pool.Name, Namespaces: pool.Namespaces, MatchLabels: pool.MatchLabels,
			MinCPUs: pool.MinCPUs, MaxCPUs: pool.MaxCPUs, PinMemory: pool.PinMemory})
	}
	return p, nil
}

var (
	_ = RegisterCheck(Check{Kind: "NodePolicy", Path: "spec.reserved.cpus", What: "the reserved CPU list parses, each range from low to high", Why: WhyParse, Example: "invalid/nodepolicy-errors.yaml"})
	_ = RegisterCheck(Check{Kind: "NodePolicy", Path: "spec.pools.*.minCPUs", What: "a pool's minCPUs ≤ its maxCPUs", Why: WhyCompare, Example: "invalid/nodepolicy-errors.yaml"})
	_ = RegisterCheck(Check{Kind: "NodePolicy", Path: "spec.pools.*.name", What: "each pool named once, and not default (the pool of what no pool matches)", Why: WhyCompare, Example: "invalid/nodepolicy-errors.yaml"})
	_ = RegisterCheck(Check{Kind: "NodePolicy", Path: "spec.pools.*", What: "no pool with the same match rules as an earlier one (it would never match), and none that matches every container (the default pool would get none)", Why: WhyCompare, Example: "invalid/nodepolicy-errors.yaml"})
)

// Check: the reserved list parses; each pool is named once, has a match
// rule, one no earlier pool has (it would never match), and minCPUs ≤
// maxCPUs.
func (n *NodePolicy) Check() []FieldError {
	var errs []FieldError
	if _, err := nodepolicy.ParseCPUSet(n.Spec.Reserved.CPUs); err != nil {
		errs = append(errs, FieldError{Path: "spec.reserved.cpus", Message: fmt.Sprintf("invalid CPU list %q: %v", n.Spec.Reserved.CPUs, err),
			Expected: fmt.Sprintf("CPU numbers below %d, ranges low-high, separated by commas, like \"0-1,32-33\"", nodepolicy.MaxCPUs)})
	}
	names := map[string]int{}
	rules := map[string]int{}
	for i, p := range n.Spec.Pools {
		at := fmt.Sprintf("spec.pools.%d", i)
		if p.Name == nodepolicy.Default {
			errs = append(errs, FieldError{Path: at + ".name", Message: "pool default is the pool of containers no pool matches",
				Expected: "another name"})
		}
		if j, ok := names[p.Name]; ok {
			errs = append(errs, FieldError{Path: at + ".name", Message: fmt.Sprintf("pool %s is named twice", p.Name),
				Expected: "each pool's name once", Related: fmt.Sprintf("spec.pools.%d.name", j)})
		} else {
			names[p.Name] = i
		}
		if len(p.Namespaces) == 0 && len(p.MatchLabels) == 0 {
			errs = append(errs, FieldError{Path: at, Message: fmt.Sprintf("pool %s matches every container: the pools after it and the default pool get none", p.Name),
				Expected: "namespaces or matchLabels"})
			continue
		}
		key := matchKey(p)
		if j, ok := rules[key]; ok {
			errs = append(errs, FieldError{Path: at, Message: fmt.Sprintf("pool %s has the match rules of pool %s, which matches first: it would never hold a container", p.Name, n.Spec.Pools[j].Name),
				Expected: "match rules no earlier pool has", Related: fmt.Sprintf("spec.pools.%d", j)})
		} else {
			rules[key] = i
		}
		if p.MinCPUs > p.MaxCPUs {
			errs = append(errs, FieldError{Path: at + ".minCPUs", Message: fmt.Sprintf("minCPUs %d is above maxCPUs %d", p.MinCPUs, p.MaxCPUs),
				Expected: fmt.Sprintf("<= %d", p.MaxCPUs)})
		}
	}
	return errs
}

// matchKey is a pool's match rules in one canonical string.
func matchKey(p NodePool) string {
	ns := slices.Clone(p.Namespaces)
	slices.Sort(ns)
	ns = slices.Compact(ns)
	var b strings.Builder
	fmt.Fprintf(&b, "%q|", ns)
	for _, k := range slices.Sorted(maps.Keys(p.MatchLabels)) {
		fmt.Fprintf(&b, "%q=%q,", k, p.MatchLabels[k])
	}
	return b.String()
}

// SelectorsOverlap says whether a node can carry labels both nodeSelectors
// match, and if so returns the smallest such labelling (the two selectors
// together). A nodeSelector is only matchLabels (the schema has no
// matchExpressions), so two are disjoint exactly when they require
// different values for one label; an empty selector matches every node
// and so overlaps any other. Nodes are cluster-wide, so namespaces do not
// keep two policies apart. Should the schema grow matchExpressions, only a
// contradiction that holds for every node (In sets without a common value,
// Exists against DoesNotExist) may count as disjoint: a false "overlaps"
// costs a user a selector, a false "disjoint" two policies on one node.
func SelectorsOverlap(a, b map[string]string) (map[string]string, bool) {
	node := make(map[string]string, len(a)+len(b))
	maps.Copy(node, a)
	for k, v := range b {
		if w, ok := node[k]; ok && w != v {
			return nil, false
		}
		node[k] = v
	}
	return node, true
}

// SelectorString is a nodeSelector as key=value pairs, sorted by key, ""
// for none.
func SelectorString(sel map[string]string) string {
	parts := make([]string, 0, len(sel))
	for _, k := range slices.Sorted(maps.Keys(sel)) {
		parts = append(parts, k+"="+sel[k])
	}
	return strings.Join(parts, ",")
}
