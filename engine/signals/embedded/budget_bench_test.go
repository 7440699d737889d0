package embedded

import (
	"context"
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine/signals"
)

// BenchmarkSpecBudgetPeak evaluates, per op, the five triggers of one
// Schedule, as a reconcile does: under one spec budget, one after another.
// "28d" is the Schedule of the report, each sum_over_time(vector(N)[28d:1s])
// (2.4M steps, within the bound of one query): without the budgets all five
// ran (586 MB peak under watch), now each is refused at once. "11d" is the
// worst the budgets let through: its first trigger (950k steps, some 1.9M
// samples) runs and the other four are refused. It reports the peak of the
// Go heap's live and unswept objects while they run (peak-heap-MB),
// sampled every millisecond, and how many queries ran.
func BenchmarkSpecBudgetPeak(b *testing.B) {
	for _, span := range []string{"28d", "11d"} {
		b.Run(span, func(b *testing.B) { benchSpecBudget(b, span) })
	}
}

func benchSpecBudget(b *testing.B, span string) {
	src := NewSource(NewStore(30 * time.Minute))
	src.InFlight = signals.NewInFlight(signals.InFlightBudget)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				metrics.Read(sample)
				if v := sample[0].Value.Uint64(); v > peak.Load() {
					peak.Store(v)
				}
			}
		}
	}()
	runtime.GC()
	ran := 0
	b.ResetTimer()
	for range b.N {
		ctx := signals.WithBudget(context.Background(), signals.NewBudget(signals.SpecBudget))
		for n := 1; n <= 5; n++ {
			if _, err := src.Query(ctx, fmt.Sprintf("sum_over_time(vector(%d)[%s:1s])", n, span), at); err == nil {
				ran++
			}
		}
	}
	b.StopTimer()
	close(stop)
	<-done
	b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MB")
	b.ReportMetric(float64(ran)/float64(b.N), "queries-run/op")
}
