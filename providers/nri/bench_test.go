package nri

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine/decide/nodepolicy"
	"github.com/setpoint-dev/setpoint/internal/nritest"
	"github.com/setpoint-dev/setpoint/providers/noderes"
)

// The design's goal: a CreateContainer round trip through the real NRI
// socket in at most 2 ms at the median. The runtime already runs 200
// containers under an enforced policy, the cache is persisted, and each
// iteration creates a container (adjusted, others moved in the reply)
// and stops one, so the node stays the same size.
func BenchmarkCreateContainerRoundTrip(b *testing.B) {
	rt := nritest.Start(b)
	topo := nodepolicy.Topology{Sockets: 2, Cores: 32, Threads: 2}
	p, err := NewPipeline(topo, filepath.Join(b.TempDir(), "node.json"), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	synced := make(chan struct{}, 1)
	p.Hook = func(kind string) {
		if kind == "synchronize" {
			select {
			case synced <- struct{}{}:
			default:
			}
		}
	}
	pl := NewPlugin(p, slog.New(slog.NewTextHandler(io.Discard, nil)))
	p.Start(pl.Send)
	defer p.Stop()
	pol := &PolicyState{Address: "nri:NodePolicy/default/bench", Config: noderes.Config{Policy: nodepolicy.Policy{
		Reserved: nodepolicy.CPUSet{0, 64}, CPUs: nodepolicy.Enforce, Memory: nodepolicy.Observe,
		Pools: []nodepolicy.Pool{
			{Name: "shop", Namespaces: []string{"shop"}, MinCPUs: 2, MaxCPUs: 40},
			{Name: "data", Namespaces: []string{"data"}, MinCPUs: 2, MaxCPUs: 16}}}}}
	if err := p.SetPolicy(context.Background(), pol); err != nil {
		b.Fatal(err)
	}
	nss := []string{"shop", "data", "web", "batch"}
	for i := range 200 {
		pod := nritest.Pod(fmt.Sprintf("p%d", i), nss[i%4], fmt.Sprintf("w%d-abc-%05d", i%20, i), nil)
		rt.Add(pod, nritest.Container(pod, fmt.Sprintf("c%d", i), "app", int64(50+i%5*50), 0))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go pl.Run(ctx, rt.Socket, "10", nil)
	select {
	case <-synced:
	case <-time.After(10 * time.Second):
		b.Fatal("no synchronize")
	}
	rt.WaitRegistered()
	var lat []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		pod := nritest.Pod(fmt.Sprintf("q%d", i), nss[i%4], fmt.Sprintf("v%d-abc-%05d", i%20, i), nil)
		c := nritest.Container(pod, fmt.Sprintf("n%d", i), "app", 100, 0)
		start := time.Now()
		rpl, err := rt.Create(ctx, pod, c)
		lat = append(lat, time.Since(start))
		if err != nil || rpl.GetAdjust().GetLinux().GetResources().GetCpu().GetCpus() == "" {
			b.Fatalf("create %d: %v, no adjustment", i, err)
		}
		if _, err := rt.Stop(ctx, c.Id); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
