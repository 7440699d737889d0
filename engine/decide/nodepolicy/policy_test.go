package nodepolicy

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func set(t *testing.T, s string) CPUSet {
	t.Helper()
	v, err := ParseCPUSet(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func ctr(id, ns string, milli int64, seq uint64) Container {
	return Container{ID: id, Pod: "p-" + id, Namespace: ns, PodName: "pod-" + id, Name: "app", CPUMilli: milli, Seq: seq}
}

func pools(r Result) map[string]string {
	out := map[string]string{}
	for _, p := range r.Pools {
		out[p.Name] = p.CPUs.String()
	}
	return out
}

func problems(r Result) string {
	var s []string
	for _, p := range r.Problems {
		s = append(s, p.String())
	}
	return strings.Join(s, "\n")
}

// Allocations worked by hand. 1x4x2: core k is CPUs {k, k+4}. 2x2x2:
// socket 0 is cores 0,1 = CPUs {0,4},{1,5}; socket 1 is cores 2,3 = CPUs
// {2,6},{3,7}.
func TestRebalanceByHand(t *testing.T) {
	for _, tc := range []struct {
		name     string
		topo     string
		policy   Policy
		ctrs     []Container
		prev     map[string]string
		want     map[string]string
		assigned map[string]string // container → pool
		problem  string
	}{
		{
			// 2500m asks for 3 CPUs: core 1 whole, then the free thread
			// of core 0 (its sibling is reserved) rather than breaking a
			// whole core.
			name: "reserved first, whole core, then a loose thread", topo: "1x4x2",
			policy:   Policy{Reserved: set(t, "0"), Pools: []Pool{{Name: "a", Namespaces: []string{"shop"}, MinCPUs: 2, MaxCPUs: 4}}},
			ctrs:     []Container{ctr("x", "shop", 1500, 1), ctr("y", "shop", 1000, 2), ctr("z", "other", 4000, 3)},
			want:     map[string]string{"a": "1,4-5", Default: "2-3,6-7"},
			assigned: map[string]string{"x": "a", "y": "a", "z": Default},
		},
		{
			// a wants 3 (socket 0: core 0 whole, then core 1's first
			// thread); b's 2 do not fit on socket 0, so socket 1's core 2.
			name: "pools on one socket each", topo: "2x2x2",
			policy: Policy{Pools: []Pool{
				{Name: "a", Namespaces: []string{"shop"}, MinCPUs: 1, MaxCPUs: 8},
				{Name: "b", MatchLabels: map[string]string{"tier": "batch"}, MinCPUs: 2, MaxCPUs: 2}}},
			ctrs:     []Container{ctr("x", "shop", 3000, 1)},
			want:     map[string]string{"a": "0-1,4", "b": "2,6", Default: "3,5,7"},
			assigned: map[string]string{"x": "a"},
		},
		{
			name: "a pool keeps the CPUs it had", topo: "2x2x2",
			policy:   Policy{Pools: []Pool{{Name: "a", Namespaces: []string{"shop"}, MinCPUs: 2, MaxCPUs: 2}}},
			ctrs:     []Container{ctr("x", "shop", 500, 1)},
			prev:     map[string]string{"a": "3,7"},
			want:     map[string]string{"a": "3,7", Default: "0-2,4-6"},
			assigned: map[string]string{"x": "a"},
		},
		{
			// It had core 3 and CPU 2; it needs 2: the loose thread goes.
			name: "a shrinking pool drops loose threads first", topo: "2x2x2",
			policy: Policy{Pools: []Pool{{Name: "a", Namespaces: []string{"shop"}, MinCPUs: 1, MaxCPUs: 8}}},
			ctrs:   []Container{ctr("x", "shop", 1200, 1)},
			prev:   map[string]string{"a": "2-3,7"},
			want:   map[string]string{"a": "3,7", Default: "0-2,4-6"},
		},
		{
			// It had CPU 2; growing to 3 it takes its sibling 6 first,
			// then stays on socket 1.
			name: "a growing pool completes its cores on its socket", topo: "2x2x2",
			policy: Policy{Pools: []Pool{{Name: "a", Namespaces: []string{"shop"}, MinCPUs: 1, MaxCPUs: 8}}},
			ctrs:   []Container{ctr("x", "shop", 2100, 1)},
			prev:   map[string]string{"a": "2"},
			want:   map[string]string{"a": "2-3,6", Default: "0-1,4-5,7"},
		},
		{
			name: "a full pool sends the latest container to the default pool", topo: "1x4x1",
			policy:   Policy{Pools: []Pool{{Name: "a", Namespaces: []string{"shop"}, MinCPUs: 0, MaxCPUs: 1}}},
			ctrs:     []Container{ctr("late", "shop", 400, 9), ctr("early", "shop", 800, 1)},
			want:     map[string]string{"a": "0", Default: "1-3"},
			assigned: map[string]string{"early": "a", "late": Default},
			problem:  "spec.pools.0.maxCPUs: container shop/pod-late/app requests 400m but pool a has 1 CPUs with 800m requested (maxCPUs 1): placed in the default pool",
		},
		{
			// 2 CPUs, one kept for the default pool: a's minimum of 2
			// does not fit.
			name: "minimums that do not fit", topo: "1x2x1",
			policy:   Policy{Pools: []Pool{{Name: "a", Namespaces: []string{"shop"}, MinCPUs: 2, MaxCPUs: 2}}},
			ctrs:     []Container{ctr("x", "shop", 0, 1)},
			want:     map[string]string{"a": "", Default: "0-1"},
			assigned: map[string]string{"x": Default},
			problem:  "spec.pools.0.minCPUs: minCPUs 2 does not fit: 1 of the node's 2 CPUs are left after the reserved CPUs, earlier pools and one for the default pool; its containers go to the default pool",
		},
		{
			name: "reserved CPUs outside the node", topo: "1x2x1",
			policy:  Policy{Reserved: set(t, "1,9-10")},
			want:    map[string]string{Default: "0"},
			problem: "spec.reserved.cpus: CPUs 9-10 are outside the node's 2 CPUs (1x2x1): not reserved",
		},
		{
			name: "first match wins", topo: "1x4x1",
			policy: Policy{Pools: []Pool{
				{Name: "a", Namespaces: []string{"shop"}, MinCPUs: 1, MaxCPUs: 1},
				{Name: "b", MatchLabels: map[string]string{"tier": "batch"}, MinCPUs: 1, MaxCPUs: 1}}},
			ctrs: []Container{
				{ID: "both", Namespace: "shop", Labels: map[string]string{"tier": "batch"}, Seq: 1},
				{ID: "label", Namespace: "x", Labels: map[string]string{"tier": "batch"}, Seq: 2},
				{ID: "wrong-value", Namespace: "x", Labels: map[string]string{"tier": "web"}, Seq: 3}},
			want:     map[string]string{"a": "0", "b": "1", Default: "2-3"},
			assigned: map[string]string{"both": "a", "label": "b", "wrong-value": Default},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topo, err := ParseTopology(tc.topo)
			if err != nil {
				t.Fatal(err)
			}
			prev := map[string]CPUSet{}
			for k, v := range tc.prev {
				prev[k] = set(t, v)
			}
			r := Rebalance(Input{Topology: topo, Policy: tc.policy, Containers: tc.ctrs, Prev: prev})
			if got := pools(r); !equalMaps(got, tc.want) {
				t.Errorf("pools %v, want %v", got, tc.want)
			}
			for id, p := range tc.assigned {
				if got := r.Assign[id]; got.Pool != p || !got.CPUs.Equal(r.Pools[poolIndex(r, p)].CPUs) {
					t.Errorf("container %s: %+v, want pool %s", id, got, p)
				}
			}
			if got := problems(r); got != tc.problem {
				t.Errorf("problems:\n%s\nwant:\n%s", got, tc.problem)
			}
		})
	}
}

func poolIndex(r Result, name string) int {
	return slices.IndexFunc(r.Pools, func(p PoolState) bool { return p.Name == name })
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestMemoryAndPinning(t *testing.T) {
	topo := Topology{Sockets: 2, Cores: 2, Threads: 2}
	pol := Policy{MemoryFromNFR: true, Pools: []Pool{{Name: "a", Namespaces: []string{"shop"}, MinCPUs: 2, MaxCPUs: 2, PinMemory: true}}}
	small := Container{ID: "s", Namespace: "shop", Workload: "checkout", Name: "app", WorkingSet: 100 << 20, Seq: 1}
	big := Container{ID: "b", Namespace: "shop", Workload: "checkout", Name: "side", WorkingSet: 300 << 20, Seq: 2}
	other := Container{ID: "o", Namespace: "x", Workload: "other", Name: "app", WorkingSet: 1 << 20, Seq: 3}
	mem := map[string]int64{MemoryKey("shop", "checkout", "app"): 192 << 20, MemoryKey("shop", "checkout", "side"): 256 << 20}
	r := Rebalance(Input{Topology: topo, Policy: pol, Containers: []Container{small, big, other}, Memory: mem})
	if got := r.Assign["s"]; got.MemoryLimit != 192<<20 || !slices.Equal(got.Mems, []int{0}) {
		t.Errorf("s: %+v, want the NFR's 192Mi and memory node 0", got)
	}
	if got := r.Assign["b"].MemoryLimit; got != 300<<20 {
		t.Errorf("b: limit %d, want the working set 300Mi (the NFR's 256Mi is below it)", got)
	}
	if got := r.Assign["o"]; got.MemoryLimit != 0 || got.Mems != nil {
		t.Errorf("o: %+v, want no limit (no NFR value) and no pinning (default pool)", got)
	}
	pol.MemoryFromNFR = false
	if got := Rebalance(Input{Topology: topo, Policy: pol, Containers: []Container{small}, Memory: mem}).Assign["s"].MemoryLimit; got != 0 {
		t.Errorf("memory.fromNFR off: limit %d, want none", got)
	}
}

func TestCPUSetFormat(t *testing.T) {
	for in, want := range map[string]string{"": "", "3": "3", "0-3,8": "0-3,8", "5,4,3,1": "1,3-5", " 0 - 1 , 1": "0-1"} {
		got, err := ParseCPUSet(in)
		if err != nil || got.String() != want {
			t.Errorf("%q: %q %v, want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"a", "3-1", "-1", "0-4096", "1,,2", "0-1-2"} {
		if _, err := ParseCPUSet(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// The bounds every rebalance must keep, on random topologies, policies,
// containers and (possibly inconsistent, as from a damaged disk) previous
// pools.
func TestRebalanceProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for iter := range 2000 {
		topo := Topology{Sockets: 1 + rng.IntN(3), Cores: 1 + rng.IntN(8), Threads: 1 + rng.IntN(2)}
		n := topo.CPUs()
		var pol Policy
		for c := range n {
			if rng.IntN(6) == 0 {
				pol.Reserved = append(pol.Reserved, c)
			}
		}
		nss := []string{"a", "b", "c", "d"}
		for i := range rng.IntN(4) {
			mn := rng.IntN(4)
			pol.Pools = append(pol.Pools, Pool{Name: string(rune('p' + i)), Namespaces: []string{nss[rng.IntN(len(nss))]}, MinCPUs: mn, MaxCPUs: mn + rng.IntN(6)})
		}
		var ctrs []Container
		for i := range rng.IntN(40) {
			ctrs = append(ctrs, Container{ID: string(rune('A' + i)), Namespace: nss[rng.IntN(len(nss))], CPUMilli: int64(rng.IntN(2500)), Seq: uint64(rng.IntN(10))})
		}
		prev := map[string]CPUSet{}
		for _, p := range pol.Pools {
			for c := range n + 2 {
				if rng.IntN(3) == 0 {
					prev[p.Name] = append(prev[p.Name], c)
				}
			}
		}
		in := Input{Topology: topo, Policy: pol, Containers: ctrs, Prev: prev}
		r := Rebalance(in)
		seen := make([]string, n)
		for i, p := range r.Pools {
			if i < len(pol.Pools) && len(p.CPUs) > pol.Pools[i].MaxCPUs {
				t.Fatalf("%d: pool %s has %d CPUs, max %d", iter, p.Name, len(p.CPUs), pol.Pools[i].MaxCPUs)
			}
			for _, c := range p.CPUs {
				if pol.Reserved.Contains(c) {
					t.Fatalf("%d: reserved CPU %d handed to %s", iter, c, p.Name)
				}
				if seen[c] != "" {
					t.Fatalf("%d: CPU %d in %s and %s", iter, c, seen[c], p.Name)
				}
				seen[c] = p.Name
			}
		}
		if len(pol.Reserved) < n && len(r.Pools[len(r.Pools)-1].CPUs) == 0 {
			t.Fatalf("%d: the default pool is empty with unreserved CPUs", iter)
		}
		in2 := 0
		for _, p := range r.Pools {
			in2 += len(p.Containers)
			for _, id := range p.Containers {
				if r.Assign[id].Pool != p.Name {
					t.Fatalf("%d: %s listed in %s, assigned %s", iter, id, p.Name, r.Assign[id].Pool)
				}
			}
		}
		if in2 != len(ctrs) || len(r.Assign) != len(ctrs) {
			t.Fatalf("%d: %d containers, %d listed in pools, %d assigned", iter, len(ctrs), in2, len(r.Assign))
		}
		// The same cache, in another order, gives the same assignments.
		shuffled := slices.Clone(ctrs)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		r2 := Rebalance(Input{Topology: topo, Policy: pol, Containers: shuffled, Prev: prev})
		if ch := Changed(r.Assign, r2.Assign); len(ch) > 0 {
			t.Fatalf("%d: the same input in another order changed %v", iter, ch)
		}
		// Rebalancing from its own outcome changes nothing.
		r3 := Rebalance(Input{Topology: topo, Policy: pol, Containers: ctrs, Prev: r.PoolCPUs()})
		if ch := Changed(r.Assign, r3.Assign); len(ch) > 0 {
			t.Fatalf("%d: a second rebalance moved %v", iter, ch)
		}
	}
}
