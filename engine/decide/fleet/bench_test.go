package fleet

import (
	"fmt"
	"testing"
)

// BenchmarkDecide1000Clusters: one evaluation of 1,000 clusters in 200
// regions (five each, mixed statuses and capacities).
func BenchmarkDecide1000Clusters(b *testing.B) {
	var places []Place
	var cs []Cluster
	for r := 0; r < 200; r++ {
		pl := Place{"aws", fmt.Sprintf("region-%03d", r)}
		places = append(places, pl)
		for i := 0; i < 5; i++ {
			cs = append(cs, Cluster{Name: fmt.Sprintf("%s-%d", pl.Region, i), Cloud: pl.Cloud, Region: pl.Region, MultiAZ: i%2 == 0,
				Nodes: 6 + 3*i, Floor: 3, Ceiling: 30, WorkloadMinimum: 3, Step: 3,
				Remaining: map[string]float64{"connections": float64(1000 * (i*r%9 + 1)), "partitions": float64(400 * (i + r%5))},
				Instances: float64(i % 3), InstancesKnown: true, ReporterReady: true, Status: Ready})
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		Decide(t0, places, cs, dims)
	}
}
