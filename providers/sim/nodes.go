package sim

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/decide/nodepolicy"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/noderes"
)

// The sim world's nodes run node policies as the NRI agent does on a real
// node: the pods of the workloads a node hosts are its containers, and
// whenever they change (a pod added or removed) or its policy does, the
// node rebalances its pools with the same pure core, keeping what it
// assigned before. The pods serve their requests as they would without a
// node: the world measures where CPUs go, not what pinning does to
// latency.

// KindNodePolicy is a node policy's object, as the NRI provider serves it.
const KindNodePolicy = noderes.Kind

// KindNodeReport is the object through which the world hands out a node's
// NodeReport (attribute AttrReport), addressed by the node's name.
const KindNodeReport = "SimNodeReport"

// MaxNodes bounds the sim world's nodes, and MaxNodePods the pods one
// node runs: a kubelet refuses pods beyond its max-pods, and the world
// leaves them out of the node's pools (counted in its report).
const (
	MaxNodes    = 16
	MaxNodePods = 512
)

type simNode struct {
	cfg  spec.SimNode
	topo nodepolicy.Topology
	// hosts are the workloads whose pods run here, with this node's index
	// among the nodes that run each and their count: pod k goes to node
	// (k-1) mod count.
	hosts []nodeHost
	pol   *simPolicy // the policy the node runs; nil: none

	// What the last rebalance saw: the hosted workloads' pod changes and
	// the policy's generation; neither moved, nothing to do.
	podGen uint64
	polGen int
	ranFor *simPolicy
	ran    bool

	seq     map[string]uint64 // container → when the node first saw it
	nextSeq uint64
	res     nodepolicy.Result
	rep     nodeTally
}

type nodeHost struct {
	wl       *workload
	idx, cnt int
}

// simPolicy is a NodePolicy applied to the sim world.
type simPolicy struct {
	namespace, name, manager string
	raw                      values.Value
	conf                     noderes.Config
	gen                      int
}

func (sp *simPolicy) id() string { return sp.namespace + "/" + sp.name }

// newNodes builds the config's nodes and places the workloads on them.
func newNodes(w *World, cfgs []spec.SimNode) ([]*simNode, error) {
	if len(cfgs) > MaxNodes {
		return nil, fmt.Errorf("%d sim nodes: at most %d", len(cfgs), MaxNodes)
	}
	var nodes []*simNode
	on := map[*workload][]*simNode{}
	for _, c := range cfgs {
		topo, err := nodepolicy.ParseTopology(c.Topology)
		if err != nil {
			return nil, fmt.Errorf("sim node %s: %w", c.Name, err)
		}
		if slices.ContainsFunc(nodes, func(n *simNode) bool { return n.cfg.Name == c.Name }) {
			return nil, fmt.Errorf("sim node %s twice", c.Name)
		}
		n := &simNode{cfg: c, topo: topo, seq: map[string]uint64{}}
		if len(c.Workloads) == 0 {
			for _, wl := range w.wls {
				on[wl] = append(on[wl], n)
			}
		}
		for _, key := range c.Workloads {
			ns, name, _ := strings.Cut(key, "/")
			wl := w.workload(ns, name)
			if wl == nil {
				return nil, fmt.Errorf("sim node %s: no sim workload %s", c.Name, key)
			}
			if slices.Contains(on[wl], n) {
				return nil, fmt.Errorf("sim node %s: workload %s twice", c.Name, key)
			}
			on[wl] = append(on[wl], n)
		}
		nodes = append(nodes, n)
	}
	for _, wl := range w.wls {
		for i, n := range on[wl] {
			n.hosts = append(n.hosts, nodeHost{wl: wl, idx: i, cnt: len(on[wl])})
		}
	}
	return nodes, nil
}

// pods counts the changes of the node's workloads' pods.
func (n *simNode) pods() uint64 {
	var g uint64
	for _, h := range n.hosts {
		g += h.wl.podGen
	}
	return g
}

// containers are the containers of the pods on the node, in pod order, and
// the pods left out (beyond MaxNodePods). The pod's CPU request goes to
// its first container.
func (n *simNode) containers() ([]nodepolicy.Container, int) {
	var out []nodepolicy.Container
	pods, left := 0, 0
	for _, h := range n.hosts {
		wl := h.wl
		milli := int64(math.Round(wl.cpuReq * 1000))
		for _, p := range wl.pods {
			if (p.seq-1)%h.cnt != h.idx {
				continue
			}
			if pods == MaxNodePods {
				left++
				continue
			}
			pods++
			for k, ct := range wl.cfg.Containers {
				// Pod names are unique in their namespace only.
				pod := wl.cfg.Namespace + "/" + p.name
				id := pod + "/" + ct.Name
				s, ok := n.seq[id]
				if !ok {
					n.nextSeq++
					s = n.nextSeq
					n.seq[id] = s
				}
				c := nodepolicy.Container{ID: id, Pod: pod, Namespace: wl.cfg.Namespace, PodName: p.name, Workload: wl.cfg.Name,
					Name: ct.Name, Labels: map[string]string{"app": wl.cfg.Name}, Seq: s, WorkingSet: int64(ct.WorkingSet)}
				if k == 0 {
					c.CPUMilli = milli
				}
				out = append(out, c)
			}
		}
	}
	return out, left
}

// step rebalances the node when its containers or its policy changed.
func (n *simNode) step(s int) {
	if n.pol == nil {
		if n.ran {
			n.ran, n.res = false, nodepolicy.Result{}
		}
		return
	}
	g := n.pods()
	if n.ran && g == n.podGen && n.ranFor == n.pol && n.pol.gen == n.polGen {
		return
	}
	ctrs, left := n.containers()
	live := make(map[string]bool, len(ctrs))
	for _, c := range ctrs {
		live[c.ID] = true
	}
	maps.DeleteFunc(n.seq, func(id string, _ uint64) bool { return !live[id] })
	var prev map[string]nodepolicy.CPUSet
	if n.ran {
		prev = n.res.PoolCPUs() // pools stay where they are
	}
	res := nodepolicy.Rebalance(nodepolicy.Input{Topology: n.topo, Policy: n.pol.conf.Policy, Containers: ctrs, Prev: prev})
	n.rep.tick(s, n, res, left)
	n.res, n.podGen, n.polGen, n.ranFor, n.ran = res, g, n.pol.gen, n.pol, true
}

// status is the node's report of its policy: no pools until it ran the
// policy as it is now (it rebalances within the second).
func (n *simNode) status() (noderes.NodeStatus, int) {
	st := noderes.NodeStatus{Node: n.cfg.Name, Topology: n.topo.String()}
	if !n.current() {
		return st, 0
	}
	st.Pools, st.Problems = n.res.Pools, n.res.Problems
	return st, len(n.res.Assign)
}

// current reports whether the node's pools are its policy's as it is now.
func (n *simNode) current() bool {
	return n.ran && n.pol != nil && n.ranFor == n.pol && n.polGen == n.pol.gen
}

// node finds a node by name.
func (w *World) node(name string) *simNode {
	for _, n := range w.nodes {
		if n.cfg.Name == name {
			return n
		}
	}
	return nil
}

// policy finds an applied node policy.
func (w *World) policy(namespace, name string) *simPolicy {
	for _, sp := range w.policies {
		if sp.namespace == namespace && sp.name == name {
			return sp
		}
	}
	return nil
}

// policyObject is a node policy's object as Read reports it: absent until
// applied; then each node running it, with its pools and problems.
func (w *World) policyObject(a providers.Address) providers.Object {
	o := providers.Object{Address: a}
	sp := w.policy(a.Namespace, a.Name)
	if sp == nil {
		return o
	}
	nodes := []noderes.NodeStatus{}
	ctrs := 0
	for _, n := range w.nodes {
		if n.pol == sp {
			st, k := n.status()
			nodes, ctrs = append(nodes, st), ctrs+k
		}
	}
	st, err := structuredOf(nodes)
	if err != nil {
		return o
	}
	o.Exists, o.Generation = true, int64(sp.gen)
	o.Attributes = map[addrs.Path]values.Value{noderes.AttrConfig: sp.raw, noderes.AttrNodes: st, noderes.AttrContainers: values.CountOf(int64(ctrs))}
	o.Managers = map[addrs.Path]string{noderes.AttrConfig: sp.manager}
	return o
}

// policyChange is a checked change of a node policy.
type policyChange struct {
	release bool
	conf    noderes.Config
	raw     values.Value
}

// checkPolicy checks a node policy's change as the NRI agent would, and
// against the world: a node runs one policy, so a policy whose selector
// takes a node another runs is refused.
func (w *World) checkPolicy(p *pending, res providers.ObjectResult) (*pending, providers.ObjectResult) {
	c := p.c
	fail := func(format string, a ...any) (*pending, providers.ObjectResult) {
		res.Err = fmt.Sprintf(format, a...)
		return nil, res
	}
	if len(w.nodes) == 0 {
		return fail("the sim world has no nodes to run node policy %s/%s on (give the sim config nodes)", c.Address.Namespace, c.Address.Name)
	}
	for path := range c.Attributes {
		if path != noderes.AttrConfig {
			return fail("%s: a NodePolicy takes only %s (the rest is what its nodes report)", path, noderes.AttrConfig)
		}
	}
	v, set := c.Attributes[noderes.AttrConfig]
	if c.Action == action.Delete || (!set && slices.Contains(c.Released, noderes.AttrConfig)) {
		p.policy = &policyChange{release: true}
		return p, res
	}
	switch c.Action {
	case action.Create:
	case action.Update, action.NoOp:
		if w.policy(c.Address.Namespace, c.Address.Name) == nil {
			return fail("no such object: node policy %s/%s is not applied yet (create it)", c.Address.Namespace, c.Address.Name)
		}
	default:
		return fail("unknown action %s", c.Action)
	}
	if !set || v.Type() != values.Structured {
		return fail("%s: want the node policy's structured config", noderes.AttrConfig)
	}
	conf, err := noderes.Parse(v.JSON())
	if err != nil {
		return fail("%s: %v", noderes.AttrConfig, err)
	}
	for _, n := range w.nodes {
		if n.pol != nil && (n.pol.namespace != c.Address.Namespace || n.pol.name != c.Address.Name) && matches(n.cfg.Labels, conf.NodeSelector) {
			return fail("sim node %s runs node policy %s already: a node runs one policy (make the nodeSelectors disjoint)", n.cfg.Name, n.pol.id())
		}
	}
	p.policy = &policyChange{conf: conf, raw: v}
	p.after = map[addrs.Path]values.Value{noderes.AttrConfig: v}
	res.After = p.after
	return p, res
}

// commitPolicy makes a checked node policy change take effect: the nodes
// its selector matches rebalance at once, as the NRI agent does on a new
// config.
func (w *World) commitPolicy(p *pending) bool {
	moved := w.commitPolicyConfig(p)
	if moved {
		for _, n := range w.nodes {
			n.step(w.sec)
		}
	}
	return moved
}

func (w *World) commitPolicyConfig(p *pending) bool {
	a := p.c.Address
	sp := w.policy(a.Namespace, a.Name)
	if p.policy.release {
		if sp == nil {
			return false
		}
		w.policies = slices.DeleteFunc(w.policies, func(o *simPolicy) bool { return o == sp })
		for _, n := range w.nodes {
			if n.pol == sp {
				n.pol = nil
			}
		}
		return true
	}
	if sp == nil {
		sp = &simPolicy{namespace: a.Namespace, name: a.Name}
		w.policies = append(w.policies, sp)
	} else if sp.raw.Equal(p.policy.raw) {
		moved := sp.manager != p.c.Manager
		sp.manager = p.c.Manager
		return moved
	}
	sp.raw, sp.conf, sp.manager = p.policy.raw, p.policy.conf, p.c.Manager
	sp.gen++
	for _, n := range w.nodes {
		switch {
		case matches(n.cfg.Labels, sp.conf.NodeSelector):
			n.pol = sp
		case n.pol == sp:
			n.pol = nil
		}
	}
	return true
}

// NodeReport is what the world measured of one node: the policy it ran at
// the end, its pools then, and what they did over the run.
type NodeReport struct {
	Node     string            `json:"node"`
	Topology string            `json:"topology"`
	Labels   map[string]string `json:"labels,omitempty"`
	Policy   string            `json:"policy,omitempty"` // namespace/name; "": none at the end
	CPUs     nodepolicy.Mode   `json:"cpus,omitempty"`
	// Rebalances are the pool computations the node ran (a pod came or
	// went, or the policy changed); Moves the times a container that was
	// placed already got other CPUs.
	Rebalances int                  `json:"rebalances"`
	Moves      int                  `json:"moves"`
	Containers int                  `json:"containers"`
	Unplaced   int                  `json:"unplaced,omitempty"` // pods beyond MaxNodePods, at the most
	Pools      []PoolReport         `json:"pools"`
	Problems   []nodepolicy.Problem `json:"problems,omitempty"`
}

// PoolReport is one pool at the end and its size over the run.
type PoolReport struct {
	nodepolicy.PoolState
	MinSize int `json:"minSize"`
	MaxSize int `json:"maxSize"`
}

// nodeTally accumulates a node's report.
type nodeTally struct {
	rebalances, moves, unplaced int
	sizes                       map[string][2]int // pool → smallest and largest CPU count
}

func (t *nodeTally) tick(_ int, n *simNode, res nodepolicy.Result, left int) {
	t.rebalances++
	t.unplaced = max(t.unplaced, left)
	if n.ran {
		for id, a := range res.Assign {
			if old, ok := n.res.Assign[id]; ok && !old.CPUs.Equal(a.CPUs) {
				t.moves++
			}
		}
	}
	if t.sizes == nil {
		t.sizes = map[string][2]int{}
	}
	for _, p := range res.Pools {
		k := len(p.CPUs)
		mm, ok := t.sizes[p.Name]
		if !ok {
			mm = [2]int{k, k}
		}
		t.sizes[p.Name] = [2]int{min(mm[0], k), max(mm[1], k)}
	}
}

// report is the node's NodeReport so far.
func (n *simNode) report() NodeReport {
	r := NodeReport{Node: n.cfg.Name, Topology: n.topo.String(), Labels: n.cfg.Labels, Rebalances: n.rep.rebalances,
		Moves: n.rep.moves, Unplaced: n.rep.unplaced, Pools: []PoolReport{}}
	if n.pol != nil {
		r.Policy, r.CPUs = n.pol.id(), n.pol.conf.CPUs
	}
	if n.current() {
		r.Containers, r.Problems = len(n.res.Assign), n.res.Problems
		for _, p := range n.res.Pools {
			mm := n.rep.sizes[p.Name]
			r.Pools = append(r.Pools, PoolReport{PoolState: p, MinSize: mm[0], MaxSize: mm[1]})
		}
	}
	return r
}

// NodeReport returns what the world measured of a node so far.
func (w *World) NodeReport(name string) (NodeReport, bool) {
	n := w.node(name)
	if n == nil {
		return NodeReport{}, false
	}
	return n.report(), true
}

func structuredOf(v any) (values.Value, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return values.Value{}, err
	}
	return values.StructuredOf(b)
}

func nodeReportObject(a providers.Address, r NodeReport) providers.Object {
	o := providers.Object{Address: a}
	if v, err := structuredOf(r); err == nil {
		o.Exists, o.Attributes = true, map[addrs.Path]values.Value{AttrReport: v}
	}
	return o
}

// DecodeNodeReport reads the NodeReport of a SimNodeReport object.
func DecodeNodeReport(o providers.Object) (NodeReport, error) {
	var r NodeReport
	return r, decodeReport(o, &r)
}
