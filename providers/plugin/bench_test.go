package plugin_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/providers"
)

// BenchmarkStartToFirstCall: process start, handshake, gRPC dial, one Read.
func BenchmarkStartToFirstCall(b *testing.B) {
	for i := 0; i < b.N; i++ {
		m := manager()
		p := m.Provider("good", nil)
		r := p.Read(context.Background(), providers.ReadRequest{Now: time.Now(), Addresses: []providers.Address{addr("good", "a")}})
		if len(r.Objects) != 1 {
			b.Fatal(r.Diagnostics)
		}
		m.Close()
	}
}

// BenchmarkCallOverhead: one Read of one address on a running provider
// (goal ≤ 150 µs per call).
func BenchmarkCallOverhead(b *testing.B) {
	m := manager()
	defer m.Close()
	p := m.Provider("good", nil)
	req := providers.ReadRequest{Now: time.Now(), Addresses: []providers.Address{addr("good", "a")}}
	p.Read(context.Background(), req)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t := time.Now()
		p.Read(context.Background(), req)
		lat = append(lat, time.Since(t))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
}

// BenchmarkBatch1000: Read, PlanChange and Apply of 1,000 resources in
// one call each (goal ≤ 20 ms).
func BenchmarkBatch1000(b *testing.B) {
	m := manager()
	defer m.Close()
	p := m.Provider("good", nil)
	var addrs []providers.Address
	var changes []providers.ObjectChange
	for i := 0; i < 1000; i++ {
		a := addr("good", fmt.Sprintf("svc-%d", i))
		addrs = append(addrs, a)
		changes = append(changes, set(a, 3, "setpoint"))
	}
	ctx := context.Background()
	p.Apply(ctx, providers.ApplyRequest{Now: time.Now(), Changes: changes})
	b.Run("read", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if r := p.Read(ctx, providers.ReadRequest{Now: time.Now(), Addresses: addrs}); len(r.Objects) != 1000 || len(r.Diagnostics) > 0 {
				b.Fatal(r.Diagnostics)
			}
		}
	})
	b.Run("plan", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if r := p.PlanChange(ctx, providers.PlanChangeRequest{Now: time.Now(), Changes: changes}); len(r.Results) != 1000 || len(r.Diagnostics) > 0 {
				b.Fatal(r.Diagnostics)
			}
		}
	})
	b.Run("apply", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if r := p.Apply(ctx, providers.ApplyRequest{Now: time.Now(), Changes: changes}); len(r.Results) != 1000 || len(r.Diagnostics) > 0 || r.Results[999].Err != "" {
				b.Fatal(r.Diagnostics, r.Results[999])
			}
		}
	})
}
