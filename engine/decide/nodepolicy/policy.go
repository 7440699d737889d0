// Package nodepolicy is the NodePolicy algorithm: how a node's CPUs and
// memory are shared among its containers. Pure and deterministic: the
// same topology, policy, containers and previous pools give the same
// assignments, so a restarted agent re-derives what it had.
//
// Reserved CPUs come first and are never handed out. Containers go to the
// first pool whose rules match (the rest to the default pool); each pool
// holds at least minCPUs and grows to the ceiling of its containers' CPU
// requests, up to maxCPUs; the default pool has every CPU left, and
// always at least one. A pool keeps the CPUs it had where it can, so a
// rebalance moves few containers; new CPUs come whole cores first, on the
// socket the pool is on, lowest IDs first.
package nodepolicy

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
)

// Default is the pool of containers no pool matches.
const Default = "default"

// Mode is an enforcement dimension's mode: observe computes and reports,
// enforce also sends the adjustments.
type Mode string

// Modes.
const (
	Observe Mode = "observe"
	Enforce Mode = "enforce"
)

// Pool is a named set of CPUs for the containers its rules match.
type Pool struct {
	Name string `json:"name"`
	// A container matches when its namespace is listed (or none are) and
	// its pod has every label of MatchLabels (or none are given).
	Namespaces  []string          `json:"namespaces,omitempty"`
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
	MinCPUs     int               `json:"minCPUs"`
	MaxCPUs     int               `json:"maxCPUs"`
	// PinMemory keeps the pool's containers' memory on the memory nodes
	// of its CPUs' sockets.
	PinMemory bool `json:"pinMemory,omitempty"`
}

// Matches reports whether a container belongs to the pool.
func (p Pool) Matches(c Container) bool {
	if len(p.Namespaces) > 0 && !slices.Contains(p.Namespaces, c.Namespace) {
		return false
	}
	for k, v := range p.MatchLabels {
		if got, ok := c.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Policy is a NodePolicy resolved for one node.
type Policy struct {
	Reserved CPUSet `json:"reserved"`
	Pools    []Pool `json:"pools"`
	// MemoryFromNFR sets memory limits from the NFRs' recommendations
	// for workloads whose NFR says memory.apply: node.
	MemoryFromNFR bool `json:"memoryFromNFR,omitempty"`
	CPUs          Mode `json:"cpus"`
	Memory        Mode `json:"memory"`
}

// Container is what the policy knows of one container.
type Container struct {
	ID        string `json:"id"`
	Pod       string `json:"pod"` // the pod's UID
	Namespace string `json:"namespace"`
	PodName   string `json:"podName"`
	// Workload is the pod's Deployment ("" when not known), which NFR
	// memory recommendations are keyed by.
	Workload string            `json:"workload,omitempty"`
	Name     string            `json:"name"`
	Labels   map[string]string `json:"labels,omitempty"`
	// CPUMilli is the container's CPU request.
	CPUMilli int64 `json:"cpuMilli,omitempty"`
	// Seq is the order the node saw containers in: who came first keeps
	// its place in a full pool.
	Seq uint64 `json:"seq"`
	// WorkingSet is the container's memory working set, bytes (0:
	// unknown).
	WorkingSet int64 `json:"workingSet,omitempty"`
}

// MemoryKey names a container of a workload for its memory limit.
func MemoryKey(namespace, workload, container string) string {
	return namespace + "/" + workload + "/" + container
}

// Input is everything Rebalance reads.
type Input struct {
	Topology   Topology
	Policy     Policy
	Containers []Container
	// Prev is each pool's CPUs from the last rebalance, so pools stay
	// where they are.
	Prev map[string]CPUSet
	// Memory is the NFR memory limits by MemoryKey, bytes.
	Memory map[string]int64
}

// Assignment is one container's share of the node.
type Assignment struct {
	Pool string `json:"pool"`
	CPUs CPUSet `json:"cpus"`
	// Mems are the memory nodes the container is held to (pinMemory).
	Mems []int `json:"mems,omitempty"`
	// MemoryLimit is bytes; 0 leaves the container's limit alone.
	MemoryLimit int64  `json:"memoryLimit,omitempty"`
	MemoryWhy   string `json:"memoryWhy,omitempty"`
}

// PoolState is a pool after a rebalance.
type PoolState struct {
	Name       string   `json:"name"`
	CPUs       CPUSet   `json:"cpus"`
	Containers []string `json:"containers,omitempty"`
	// RequestMilli is the sum of its containers' CPU requests.
	RequestMilli int64 `json:"requestMilli"`
}

// Problem is something the node could not do as the spec says; Field is
// the spec's path, for its position.
type Problem struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

func (p Problem) String() string { return p.Field + ": " + p.Message }

// Result is a rebalance's outcome.
type Result struct {
	// Pools are in the spec's order, the default pool last.
	Pools    []PoolState           `json:"pools"`
	Assign   map[string]Assignment `json:"assign"`
	Problems []Problem             `json:"problems,omitempty"`
}

// PoolField is the spec path of the i'th pool's field, as positions are
// looked up.
func PoolField(i int, field string) string { return fmt.Sprintf("spec.pools.%d.%s", i, field) }

// Rebalance assigns every container its pool, CPUs and memory limit.
func Rebalance(in Input) Result {
	t := in.Topology
	n := t.CPUs()
	var res Result
	if err := t.Check(); err != nil {
		res.Problems = append(res.Problems, Problem{Field: "spec", Message: err.Error()})
		n = 0
	}
	pools := in.Policy.Pools
	// owner: -2 reserved, -1 free, else the pool's index.
	owner := make([]int, n)
	for i := range owner {
		owner[i] = -1
	}
	var outside CPUSet
	for _, c := range in.Policy.Reserved {
		if c < n {
			owner[c] = -2
		} else {
			outside = append(outside, c)
		}
	}
	if len(outside) > 0 {
		res.Problems = append(res.Problems, Problem{Field: "spec.reserved.cpus",
			Message: fmt.Sprintf("CPUs %s are outside the node's %d CPUs (%s): not reserved", outside, n, t)})
	}
	avail := 0
	for _, o := range owner {
		if o == -1 {
			avail++
		}
	}
	if n > 0 && avail == 0 {
		res.Problems = append(res.Problems, Problem{Field: "spec.reserved.cpus",
			Message: fmt.Sprintf("every one of the node's %d CPUs is reserved: containers get no CPU set", n)})
	}

	// Members by first match, in the order the node saw them.
	ctrs := slices.Clone(in.Containers)
	slices.SortFunc(ctrs, func(a, b Container) int {
		return cmp.Or(cmp.Compare(a.Seq, b.Seq), cmp.Compare(a.ID, b.ID))
	})
	members := make([][]int, len(pools)+1) // the last is the default pool
	for ci, c := range ctrs {
		p := len(pools)
		for i, pool := range pools {
			if pool.Matches(c) {
				p = i
				break
			}
		}
		members[p] = append(members[p], ci)
	}

	// Grants: every pool its minimum in the spec's order while they fit
	// (one CPU is always kept for the default pool), then growth.
	budget := max(avail-1, 0)
	grant := make([]int, len(pools))
	live := make([]bool, len(pools))
	for i, p := range pools {
		if p.MinCPUs > budget {
			res.Problems = append(res.Problems, Problem{Field: PoolField(i, "minCPUs"),
				Message: fmt.Sprintf("minCPUs %d does not fit: %d of the node's %d CPUs are left after the reserved CPUs, earlier pools and one for the default pool; its containers go to the default pool", p.MinCPUs, budget, n)})
			continue
		}
		live[i], grant[i] = true, p.MinCPUs
		budget -= p.MinCPUs
	}
	for i, p := range pools {
		if !live[i] {
			continue
		}
		var req int64
		for _, ci := range members[i] {
			req += ctrs[ci].CPUMilli
		}
		want := min(max(int((req+999)/1000), p.MinCPUs), p.MaxCPUs)
		more := min(want-grant[i], budget)
		grant[i] += more
		budget -= more
	}

	// Admission: a pool's containers in the order they came, while their
	// requests fit its CPUs; the rest go to the default pool.
	pool := make([]int, len(ctrs))
	for ci := range pool {
		pool[ci] = len(pools)
	}
	for i, p := range pools {
		var sum int64
		for _, ci := range members[i] {
			c := ctrs[ci]
			if !live[i] {
				continue
			}
			if sum+c.CPUMilli > int64(grant[i])*1000 {
				why := fmt.Sprintf("maxCPUs %d", p.MaxCPUs)
				if grant[i] < p.MaxCPUs {
					why = "the node has no more CPUs for it"
				}
				res.Problems = append(res.Problems, Problem{Field: PoolField(i, "maxCPUs"),
					Message: fmt.Sprintf("container %s/%s/%s requests %dm but pool %s has %d CPUs with %dm requested (%s): placed in the default pool",
						c.Namespace, c.PodName, c.Name, c.CPUMilli, p.Name, grant[i], sum, why)})
				continue
			}
			sum += c.CPUMilli
			pool[ci] = i
		}
	}
	cpus := allocate(t, owner, pools, grant, in.Prev)
	def := make([]bool, n)
	for c, o := range owner {
		if o == -1 {
			def[c] = true
		}
	}
	sets := append(cpus, setOf(def))

	res.Assign = make(map[string]Assignment, len(ctrs))
	states := make([]PoolState, len(pools)+1)
	for i := range states {
		name := Default
		if i < len(pools) {
			name = pools[i].Name
		}
		states[i] = PoolState{Name: name, CPUs: sets[i]}
	}
	for ci, c := range ctrs {
		i := pool[ci]
		st := &states[i]
		st.Containers = append(st.Containers, c.ID)
		st.RequestMilli += c.CPUMilli
		a := Assignment{Pool: st.Name, CPUs: st.CPUs}
		if i < len(pools) && pools[i].PinMemory && len(st.CPUs) > 0 {
			a.Mems = t.SocketsOf(st.CPUs)
		}
		if in.Policy.MemoryFromNFR && c.Workload != "" {
			if lim, ok := in.Memory[MemoryKey(c.Namespace, c.Workload, c.Name)]; ok && lim > 0 {
				a.MemoryLimit, a.MemoryWhy = lim, fmt.Sprintf("the NFR's %d bytes", lim)
				if c.WorkingSet > lim {
					a.MemoryLimit = c.WorkingSet
					a.MemoryWhy = fmt.Sprintf("the working set %d bytes (above the NFR's %d bytes: a limit never goes below it)", c.WorkingSet, lim)
				}
			}
		}
		res.Assign[c.ID] = a
	}
	res.Pools = states
	return res
}

// Changed lists the containers whose assignment differs between two
// results (or that are new), sorted: the ones a rebalance must update.
func Changed(prev, next map[string]Assignment) []string {
	var out []string
	for id, a := range next {
		if p, ok := prev[id]; !ok || !p.Equal(a) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// Equal compares two assignments.
func (a Assignment) Equal(b Assignment) bool {
	return a.Pool == b.Pool && a.CPUs.Equal(b.CPUs) && slices.Equal(a.Mems, b.Mems) && a.MemoryLimit == b.MemoryLimit
}

// PoolCPUs is each pool's CPUs, for the next rebalance's Prev.
func (r Result) PoolCPUs() map[string]CPUSet {
	out := make(map[string]CPUSet, len(r.Pools))
	for _, p := range r.Pools {
		out[p.Name] = p.CPUs
	}
	return out
}

// Clone copies a result's maps so a caller may keep it.
func (r Result) Clone() Result {
	r.Pools = slices.Clone(r.Pools)
	r.Assign = maps.Clone(r.Assign)
	r.Problems = slices.Clone(r.Problems)
	return r
}
