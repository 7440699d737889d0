package nodepolicy

import (
	"fmt"
	"testing"
)

// The design's goal: a rebalance of 500 containers on 2 × 32 × 2 in at
// most 5 ms. Each iteration is a steady-state rebalance from the last
// one's pools after one container arrived, as the pipeline runs it.
func BenchmarkRebalance500(b *testing.B) {
	topo := Topology{Sockets: 2, Cores: 32, Threads: 2}
	pol := Policy{Reserved: CPUSet{0, 64}, MemoryFromNFR: true, Pools: []Pool{
		{Name: "checkout", Namespaces: []string{"shop"}, MinCPUs: 2, MaxCPUs: 24, PinMemory: true},
		{Name: "batch", MatchLabels: map[string]string{"tier": "batch"}, MinCPUs: 0, MaxCPUs: 16},
		{Name: "data", Namespaces: []string{"data"}, MinCPUs: 4, MaxCPUs: 32},
	}}
	nss := []string{"shop", "data", "web", "batch-jobs"}
	ctrs := make([]Container, 500)
	mem := map[string]int64{}
	for i := range ctrs {
		c := Container{ID: fmt.Sprintf("c%03d", i), Namespace: nss[i%len(nss)], PodName: fmt.Sprintf("w%d-abc-%d", i%50, i),
			Workload: fmt.Sprintf("w%d", i%50), Name: "app", CPUMilli: int64(50 + i%7*25), Seq: uint64(i), WorkingSet: 64 << 20}
		if i%5 == 0 {
			c.Labels = map[string]string{"tier": "batch"}
		}
		ctrs[i] = c
		mem[MemoryKey(c.Namespace, c.Workload, c.Name)] = 128 << 20
	}
	in := Input{Topology: topo, Policy: pol, Containers: ctrs[:499], Memory: mem}
	prev := Rebalance(in).PoolCPUs()
	in.Containers, in.Prev = ctrs, prev
	b.ReportAllocs()
	for b.Loop() {
		r := Rebalance(in)
		if len(r.Assign) != 500 {
			b.Fatal(len(r.Assign))
		}
	}
}
