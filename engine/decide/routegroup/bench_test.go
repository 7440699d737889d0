package routegroup

import (
	"math/rand/v2"
	"testing"
	"time"
)

// BenchmarkTick is one tick of a 1,000-backend group on a 65,537-slot
// table: decide (filters, pressure, weights, targets, step, regime) and
// build the table (goal ≤ 2 ms replicate, ≤ 10 ms Maglev).
func BenchmarkTick(b *testing.B) {
	for _, builder := range []string{BuildReplicate, BuildMaglev} {
		b.Run(builder, func(b *testing.B) {
			p := defaults()
			ns := names(1000)
			r := rand.New(rand.NewPCG(5, 6))
			samples := make([]Sample, len(ns))
			for i, n := range ns {
				samples[i] = Sample{Name: n, Queue: r.Float64() * 10, Latency: r.Float64() * 0.1, ErrorRate: r.Float64() * 0.01}
			}
			st, _ := Step(p, State{}, t0, samples)
			out := make([]uint32, p.Slots)
			at := t0
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				for i := range samples {
					samples[i].Queue = r.Float64() * 10
					samples[i].Connects += 10
				}
				at = at.Add(200 * time.Millisecond)
				var d Decision
				st, d = Step(p, st, at, samples)
				if err := Build(builder, d.Names, d.Slots, out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMaglevChurn reports the share of slots that change owner when
// one of 1,000 backends leaves a 65,537-slot table (goal ≤ 1.1%).
func BenchmarkMaglevChurn(b *testing.B) {
	var c float64
	for range b.N {
		c = churnRemovingOne(BuildMaglev, 1000, 65537, 500)
	}
	b.ReportMetric(100*c, "%churn")
}
