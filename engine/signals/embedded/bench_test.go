package embedded

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
)

// benchStore holds 100 series × 360 samples (one hour at 10 s) of a counter
// and of histogram buckets (10 pods × 10 buckets).
func benchStore(b *testing.B) *Source {
	s := NewStore(2 * time.Hour)
	les := []string{"0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "+Inf"}
	for i := 0; i < 100; i++ {
		c := labels.FromStrings("__name__", "x", "pod", fmt.Sprintf("p-%d", i))
		h := labels.FromStrings("__name__", "h_bucket", "pod", fmt.Sprintf("p-%d", i/10), "le", les[i%10])
		for j := 0; j < 360; j++ {
			t := ms(j * 10)
			if _, err := s.Append(c, t, float64(j*(i+1))); err != nil {
				b.Fatal(err)
			}
			if _, err := s.Append(h, t, float64(j*(i%10+1))); err != nil {
				b.Fatal(err)
			}
		}
	}
	return NewSource(s)
}

// BenchmarkInstantQuery measures the design's goal: an instant query over
// 100 series × 360 samples at p50 ≤ 1 ms.
func BenchmarkInstantQuery(b *testing.B) {
	src := benchStore(b)
	for _, expr := range []string{
		`sum(rate(x[1m]))`,
		`histogram_quantile(0.99, sum by (le)(rate(h_bucket[1m])))`,
	} {
		b.Run(expr, func(b *testing.B) {
			ctx := context.Background()
			durs := make([]time.Duration, 0, b.N)
			for i := 0; i < b.N; i++ {
				start := time.Now()
				r, err := src.Query(ctx, expr, at(3590))
				durs = append(durs, time.Since(start))
				if err != nil || len(r.Samples) != 1 {
					b.Fatalf("%v %+v", err, r)
				}
			}
			sort.Slice(durs, func(i, j int) bool { return durs[i] < durs[j] })
			b.ReportMetric(float64(durs[len(durs)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(durs[len(durs)*99/100].Microseconds()), "p99-µs")
		})
	}
}
